"""Session: the conversation state one agent loop works on.

It owns the history (a list of messages that always satisfies the pairing invariant after
a turn), the system prompt built once and kept byte-identical, the provider and model,
the approval mode, its settings (`SessionOptions`, one frozen value), what it counts
(`SessionStats`: usage totals, rounds, the next request's size) and the transcript; no
routing or decision log (latency/router.py: composition hands the loop those). It builds
each round's `ChatRequest`. `fork()` gives the session a speculation runs on: same
prefix, its requests built by `CacheSafeParams` (llm/fork.py) so they share the prompt
cache, no transcript and no compaction; `adopt()` makes an accepted fork's messages,
rounds and usage this session's own, in history and transcript. Not thread-safe: one
turn at a time mutates a session, from the thread running the loop (a fork belongs to
its speculation's thread).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from qshell.agent.summary_ahead import SummaryAhead
from qshell.agent.transcript import Transcript
from qshell.config import DEFAULTS, ApprovalMode, BackgroundReasoning
from qshell.latency.directives import HONOURED, Directives
from qshell.latency.tool_offer import offered_specs, required_tool
from qshell.llm.base import Provider
from qshell.llm.fork import CacheSafeParams
from qshell.llm.messages import (
    ChatRequest,
    Message,
    ToolResultBlock,
    ToolSpec,
    Usage,
    answered_calls,
)
from qshell.tools import tools_by_name
from qshell.tools.base import Tool, ToolContext, tool_spec


@dataclass(frozen=True, slots=True)
class SessionRequest:
    """Which session to open: a new one, the latest (`continue_latest`), or `resume_id`."""

    continue_latest: bool = False
    resume_id: str | None = None
    append_system_prompt: str = ""
    # a new session's answers end with the next prompt they predict (agent/prediction.py)
    predict_next: bool = False
    # an interactive REPL session: a summary round may stream in background (D3), if the
    # `summarizeInBackground` setting is on
    background_summary: bool = False
    # more turns will follow (the REPL, ACP): compaction's summary is written ahead
    summary_ahead: bool = False


SessionFactory = Callable[[SessionRequest], "Session"]


def new_session_id() -> str:
    return str(uuid.uuid4())


def check_history(messages: Sequence[Message]) -> list[str]:
    """Problems with tool-call pairing: each call answered exactly once, in the next
    message, whose results answer only that message's calls (an id alone may name a call
    of every response: some servers number them `call_0` each time)."""
    problems: list[str] = []
    for index, message in enumerate(messages):
        asked = answered_calls(messages, index)
        for result in message.tool_results:
            if result.tool_call_id not in asked:
                problems.append(f"tool result {result.tool_call_id} answers no call before it")
        if message.role != "assistant" or not message.tool_calls:
            continue
        following = messages[index + 1] if index + 1 < len(messages) else None
        answered = [r.tool_call_id for r in following.tool_results] if following else []
        for call in message.tool_calls:
            count = answered.count(call.id)
            if count != 1:
                problems.append(f"tool call {call.id} has {count} results")
    return problems


def _prompt_index(messages: Sequence[Message]) -> int | None:
    """Where the current turn's prompt is: the last user message that answers no call."""
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if message.role == "user" and not message.tool_results:
            return index
    return None


@dataclass(frozen=True, slots=True)
class SessionOptions:
    """How a session runs its turns, fixed when it opens (composition reads them from the
    settings; a fork keeps its parent's, with its own round limit and no D3)."""

    max_turns: int = DEFAULTS.max_turns
    max_tokens: int = DEFAULTS.max_tokens
    context_window: int = DEFAULTS.context_window
    compact_threshold: float = DEFAULTS.compact_threshold
    # A small model gets compact tool descriptions, only the tools its turn's prompt
    # could need (latency/tool_offer.py), and its last round of a turn is sent without
    # tools so the turn ends in an answer rather than more calls.
    compact_tools: bool = False
    final_round_without_tools: bool = False
    tools_by_prompt: bool = False
    # and is shown the files its prompt is about, as though attached (latency/retrieval.py)
    files_by_prompt: bool = False
    # its answers end with the next prompt they predict (agent/prediction.py)
    predicts_next: bool = False
    directives: Directives = HONOURED  # which post-execution directives it honours
    # what its forks do with reasoning (llm/fork.py; `backgroundReasoning`)
    background_reasoning: BackgroundReasoning = DEFAULTS.background_reasoning
    # D3: a round after an all-terminal batch is announced as a summary (SummaryStarted);
    # never on a fork (a speculation's turn has no prompt to give back)
    summarizes_in_background: bool = False
    # D4: a read call starts while its response still streams (latency/stream_ahead.py)
    stream_ahead: bool = DEFAULTS.stream_ahead_tools
    # the summary compaction needs is written ahead, after the turn that nears it
    # (agent/summary_ahead.py): sessions with a next turn to wait for (the REPL, ACP)
    summary_ahead: bool = False


@dataclass(slots=True)
class SessionStats:
    """What a session counts: usage totals (all rounds, the last one, by position in their
    turn for /stats), rounds, the size of the next request, and accepted speculations."""

    usage: Usage = field(default_factory=Usage)
    last_usage: Usage | None = None  # the last round's usage
    rounds: int = 0
    # Tokens the last round used (prompt + completion): the next request's size, roughly.
    last_prompt_tokens: int = 0
    # the rounds' usage by position in their turn (first, middle, summary), for /stats
    position_usage: dict[str, Usage] = field(default_factory=dict)
    speculations_accepted: int = 0
    time_saved_s: float = 0.0  # by accepted speculations (followup/acceptance.py)

    def count_round(self, usage: Usage, position: str | None) -> None:
        self.usage = self.usage + usage
        self.last_usage = usage
        self.rounds += 1
        self.last_prompt_tokens = usage.prompt_tokens + usage.completion_tokens
        self.count_position(usage, position)

    def count_position(self, usage: Usage, position: str | None) -> None:
        if position is not None:
            self.position_usage[position] = self.position_usage.get(position, Usage()) + usage


DEFAULT_OPTIONS = SessionOptions()


class Session:
    """One conversation: history, prompt, provider and transcript.

    `options` are its settings; the rest is this session's own: `model` and
    `approval_mode` (which /model and /mode change), the system prompt and history it
    opened with, its tools and their context, its id and transcript, and what it counts
    (`stats`; a resumed session starts from its transcript's `last_prompt_tokens`)."""

    def __init__(
        self,
        *,
        provider: Provider,
        model: str,
        system_prompt: str,
        tools: Sequence[Tool],
        tool_context: ToolContext,
        options: SessionOptions = DEFAULT_OPTIONS,
        approval_mode: ApprovalMode = ApprovalMode.DEFAULT,
        session_id: str | None = None,
        transcript: Transcript | None = None,
        history: Sequence[Message] = (),
        stats: SessionStats | None = None,
    ) -> None:
        self.id = session_id or new_session_id()
        self.provider = provider
        self.model = model
        self.system_prompt = system_prompt
        self.options = options
        self.tools = list(tools)
        self.tools_by_name = tools_by_name(self.tools)
        self._offer: tuple[int, str, list[ToolSpec]] | None = None  # prompt index, text, tools
        # what the user typed this turn, with its attachments: a small model's tool offer
        # reads it, not the piped data, editor context or notes around it (`read_as_typed`)
        self.typed_prompt: str | None = None
        self.tool_specs: list[ToolSpec] = [
            tool_spec(t, compact=options.compact_tools) for t in self.tools
        ]
        self.tool_context = tool_context
        self.approval_mode = approval_mode
        self.transcript = transcript
        self.history: list[Message] = list(history)
        self.stats = stats or SessionStats()
        # the last successful round's request and reply, for cache-safe forks (llm/fork.py)
        self.cache_safe: CacheSafeParams | None = None
        # A fork's (see `fork`): the main request its requests extend, and the usage of its
        # rounds, kept for `adopt` because a fork writes no transcript.
        self.is_fork = False
        self.forked_from: CacheSafeParams | None = None
        self._fork_rounds: list[tuple[Usage, str | None]] = []
        self.summary_ahead = SummaryAhead()  # compaction's summary, written ahead

    @property
    def can_compact(self) -> bool:
        """A fork never compacts: its history must stay an extension of its parent's."""
        return not self.is_fork

    @property
    def project_root(self) -> Path:
        return self.tool_context.root

    def append(self, message: Message) -> None:
        """Add one complete message to history and transcript."""
        self.history.append(message)
        if self.transcript is not None:
            self.transcript.write_message(message)

    def record_round(self, usage: Usage, *, position: str | None = None) -> None:
        self.stats.count_round(usage, position)
        if self.is_fork:
            self._fork_rounds.append((usage, position))
        self.note("usage", usage=usage.model_dump(), position=position)

    def note(self, record_type: str, **fields: object) -> None:
        """A non-message transcript record, e.g. a failed turn."""
        if self.transcript is not None:
            self.transcript.write({"type": record_type, **fields})

    def restart_history(self, messages: Sequence[Message], **record: object) -> None:
        """Replace the whole history (compaction); the transcript records a `compacted`
        note with `record` and then the new messages, so a resume starts from them."""
        self.note("compacted", **record)
        self.cache_safe = None  # the cached prefix is gone with the old history
        self.history.clear()
        for message in messages:
            self.append(message)

    def request(self, *, round_index: int = 0) -> ChatRequest:
        """The request for round `round_index` (0-based) of the current turn."""
        options = self.options
        toolless = options.final_round_without_tools and round_index >= options.max_turns - 1
        tools = [] if toolless else self.offered_specs()
        if self.forked_from is not None:  # the session's own tools: its parent's last
            # request may have been a toolless last round
            return self.forked_from.continued(self.history, model=self.model, tools=tools)
        return ChatRequest(
            model=self.model,
            system=self.system_prompt,
            messages=list(self.history),
            tools=tools,
            max_tokens=self.options.max_tokens,
            tool_choice=self._required_tool(tools) if round_index == 0 else None,
        )

    def _required_tool(self, tools: list[ToolSpec]) -> str | None:
        """With `tools_by_prompt`, the tool a prompt that asks for an action must call."""
        index = _prompt_index(self.history)
        if not (self.options.tools_by_prompt and tools) or index is None:
            return None
        return required_tool(self.read_as_typed(self.history[index].text), tools, self.tools)

    def read_as_typed(self, prompt: str) -> str:
        """The part of this turn's `prompt` the user typed (with its attachments), when the
        front-end said what that was (`typed_prompt`, set per turn); else all of it."""
        typed = self.typed_prompt
        return typed if typed is not None and typed in prompt else prompt

    def offered_specs(self) -> list[ToolSpec]:
        """The tools this turn's rounds offer: all of them, or with `tools_by_prompt` those
        its prompt could need, decided once per turn (a file the turn creates does not
        change the offer between its rounds)."""
        if not self.options.tools_by_prompt:
            return self.tool_specs
        index = _prompt_index(self.history)
        if index is None:
            return self.tool_specs
        prompt = self.history[index].text
        if self._offer is None or self._offer[:2] != (index, prompt):
            typed = self.read_as_typed(prompt)
            specs = offered_specs(typed, self.project_root, self.tools, self.tool_specs)
            self._offer = (index, prompt, specs)
        return self._offer[2]

    def fork(self, *, model: str | None = None, max_turns: int | None = None) -> Session:
        """A session for a speculative run that extends this one's last request.

        It shares the provider, system prompt, tools, tool context, options and history
        (copied), uses `model` and `max_turns` when given, never summarizes in background
        (D3), has no transcript and never compacts.
        After a successful round its requests are built from this session's
        CacheSafeParams, so their prefix is the one the provider has just cached.
        """
        fork = Session(
            provider=self.provider,
            model=model or self.model,
            system_prompt=self.system_prompt,
            tools=self.tools,
            tool_context=self.tool_context,
            options=replace(
                self.options,
                max_turns=max_turns or self.options.max_turns,
                summarizes_in_background=False,
            ),
            approval_mode=self.approval_mode,
            session_id=self.id,
            history=self.history,
            stats=SessionStats(last_prompt_tokens=self.stats.last_prompt_tokens),
        )
        fork.is_fork = True
        fork.forked_from = self.cache_safe
        return fork

    def adopt(self, fork: Session, messages: Sequence[Message], *, saved_s: float) -> None:
        """Make an accepted speculation's work this session's own: `messages` (what it kept
        of its fork's new history) join history and transcript, every round it ran is
        counted and written as a usage record, and its last round becomes the prefix of
        the next fork. `saved_s` is the time the user did not have to wait."""
        for message in messages:
            self.append(message)
        stats, done = self.stats, fork.stats
        for usage, position in fork._fork_rounds:
            stats.count_position(usage, position)
            self.note("usage", usage=usage.model_dump(), position=position)
        stats.usage = stats.usage + done.usage
        stats.rounds += done.rounds
        if done.rounds:
            stats.last_usage = done.last_usage
            stats.last_prompt_tokens = done.last_prompt_tokens
        if fork.cache_safe is not None:
            self.cache_safe = fork.cache_safe
        stats.speculations_accepted += 1
        stats.time_saved_s += saved_s

    def answer_all(self, results: Sequence[ToolResultBlock]) -> None:
        """Append the tool results of the last round as one user message."""
        self.append(Message(role="user", content=list(results)))

    def close(self) -> None:
        self.summary_ahead.cancel()
        if self.transcript is not None:
            self.transcript.close()
