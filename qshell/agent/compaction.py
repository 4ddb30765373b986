"""Compaction: replace a long history with a model-written summary so the work can go on.

`compact()` sends one extra round built from the session's normal request (same model,
system prompt, tools and message prefix, so the provider's prompt cache still applies)
plus a request for a thorough summary, then restarts the history as [summary, short
acknowledgement] and records that in the transcript. `needs_compaction()` decides when a
turn should compact first, and the two `*_turn` helpers are the hooks `run_turn` calls;
`prepare_summary` (after a turn, in a session that asks for it) starts that summary round
ahead, in the background, so the turn that compacts takes it instead (summary_ahead.py).
It must not change the history unless the summary round succeeded: provider errors and
`Cancelled` propagate with the history untouched, and tool calls in the summary reply are
ignored. Like the Session it works on, it runs in the thread running the turn.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from qshell.agent.events import HistoryCompacted
from qshell.agent.session import Session
from qshell.agent.summary_ahead import prepares
from qshell.cancel import CancelToken
from qshell.errors import QshellError, StreamBroken
from qshell.llm.base import StreamDone
from qshell.llm.messages import FINISHED_STOPS, Message, TextBlock
from qshell.prompts import load

CHARS_PER_TOKEN = 4  # rough size estimate: characters per token, for text not yet sent
MIN_MESSAGES_TO_COMPACT = 4  # messages the history needs before automatic compaction
MIN_MESSAGES_TO_RETRY = 2  # earlier messages a too-long turn needs to compact and retry
# a summary written ahead serves while what came after it is under this share of the
# threshold; past it, a new one is written over the longer history
REST_AHEAD = 0.25
SUMMARY_HEADER = "<summary of the earlier conversation>"
ACKNOWLEDGEMENT = "Understood. I have the summary of our earlier work and will continue from it."
NEAR_LIMIT_REASON = "the conversation was close to the model's context window"
EXCEEDED_REASON = "the model's context window was exceeded"
SUMMARY_REQUEST = load("compaction")  # the summary round's request


class CompactionError(QshellError):
    """The summary round answered without a usable summary; the history was kept."""


def threshold_tokens(session: Session) -> float:
    """The history size past which the next request compacts first (`compactThreshold`
    of `contextWindow`); D2's context veto asks the same of the fast round."""
    return session.options.context_window * session.options.compact_threshold


def needs_compaction(session: Session, incoming_text: str) -> bool:
    """True when the next request would pass the compaction threshold.

    The size is estimated as the last round's tokens (prompt + completion, from the
    provider's usage) plus the incoming text at about CHARS_PER_TOKEN characters a token.
    Short histories, and forks (Session.fork), are never compacted.
    """
    if not session.can_compact or len(session.history) < MIN_MESSAGES_TO_COMPACT:
        return False
    estimate = session.stats.last_prompt_tokens + len(incoming_text) / CHARS_PER_TOKEN
    return estimate > threshold_tokens(session)


def compact(
    session: Session, cancel: CancelToken, *, reason: str, instructions: str = ""
) -> HistoryCompacted:
    """Summarise the whole history and restart it from the summary (see the module doc)."""
    return _compact(session, cancel, reason, instructions, list(session.history), [])


def compact_before_turn(
    session: Session, prompt: str, cancel: CancelToken
) -> HistoryCompacted | None:
    """Compact before `prompt` is appended when the history is near the context window,
    with the summary written ahead when there is one for it (summary_ahead.py)."""
    if not needs_compaction(session, prompt):
        return None
    ahead = session.summary_ahead.take(session.history, cancel)
    if ahead is None:
        return compact(session, cancel, reason=NEAR_LIMIT_REASON)
    earlier = session.history[: len(session.history) - len(ahead.rest)]
    return _compact(session, cancel, NEAR_LIMIT_REASON, "", earlier, list(ahead.rest), ahead.done)


def prepare_summary(session: Session) -> bool:
    """After a turn: when the history is near the point where the next turn compacts, start
    its summary round in the background (summary_ahead.py); True when one was started."""
    if not session.options.summary_ahead or not session.can_compact:
        return False
    if len(session.history) < MIN_MESSAGES_TO_COMPACT:
        return False
    threshold = threshold_tokens(session)
    if not prepares(session.stats.last_prompt_tokens, threshold):
        return False
    covered = session.summary_ahead.covered(session.history)
    if covered is not None:  # the summary under way still serves while the rest is small
        rest = session.history[covered:]
        if estimate_tokens(session, rest) - estimate_tokens(session, []) < REST_AHEAD * threshold:
            return False
    earlier = list(session.history)
    request = session.request().model_copy(update={"messages": _with_summary_request(earlier, "")})
    return session.summary_ahead.after_turn(earlier, session.provider, request)


def can_retry_compacted(session: Session) -> bool:
    """True when a turn whose first round was too long may compact and retry: the history
    ends with the turn's prompt and has enough messages before it to summarise."""
    history = session.history
    return (
        session.can_compact
        and len(history) - 1 >= MIN_MESSAGES_TO_RETRY
        and history[-1].role == "user"
        and not history[-1].tool_results
    )


def compact_for_retry(session: Session, cancel: CancelToken) -> HistoryCompacted:
    """Summarise everything before the turn's prompt, then put the prompt back after it."""
    prompt = session.history[-1]
    return _compact(session, cancel, EXCEEDED_REASON, "", session.history[:-1], [prompt])


def _compact(
    session: Session,
    cancel: CancelToken,
    reason: str,
    instructions: str,
    earlier: list[Message],
    tail: list[Message],
    done: StreamDone | None = None,
) -> HistoryCompacted:
    """Summarise `earlier` (with the round `done` when it was sent ahead) and restart the
    history from the summary and `tail`."""
    before = len(session.history)
    if done is None:
        done = _summary_round(session, cancel, earlier, instructions)
    if done is None:
        raise StreamBroken("the model stream ended before the summary was complete")
    session.record_round(done.usage)
    if done.stop_reason not in FINISHED_STOPS:
        raise CompactionError(
            f"the summary did not finish ({done.stop_reason}); the history was kept"
        )
    summary = done.message.text.strip()
    if not summary:
        raise CompactionError(
            "the model answered the summary request without any text; the history was kept"
        )
    messages = [
        Message.user(f"{SUMMARY_HEADER}\n\n{summary}"),
        Message.assistant(ACKNOWLEDGEMENT),
        *tail,
    ]
    estimate = estimate_tokens(session, messages)
    session.restart_history(
        messages, reason=reason, messages_before=before, estimated_tokens=estimate
    )
    session.stats.last_prompt_tokens = estimate
    return HistoryCompacted(reason=reason, messages_before=before, messages_after=len(messages))


def _summary_round(
    session: Session, cancel: CancelToken, earlier: list[Message], instructions: str
) -> StreamDone | None:
    request = session.request().model_copy(
        update={"messages": _with_summary_request(earlier, instructions)}
    )
    done: StreamDone | None = None
    for chunk in session.provider.stream(request, cancel):
        if isinstance(chunk, StreamDone):
            done = chunk
    return done


def _with_summary_request(earlier: list[Message], instructions: str) -> list[Message]:
    """The history plus the summary request; joined to a trailing user message, if any,
    so that two user messages never follow each other."""
    text = SUMMARY_REQUEST
    if instructions.strip():
        text += "\n\nThe user adds these instructions for the summary:\n" + instructions.strip()
    if earlier and earlier[-1].role == "user":
        last = earlier[-1]
        joined = Message(role="user", content=[*last.content, TextBlock(text=text)])
        return [*earlier[:-1], joined]
    return [*earlier, Message.user(text)]


def estimate_tokens(session: Session, messages: Sequence[Message]) -> int:
    """A rough size of the next request (system prompt, tools, messages) in tokens."""
    chars = len(session.system_prompt)
    chars += sum(
        len(json.dumps(spec.parameters)) + len(spec.description) for spec in session.tool_specs
    )
    chars += sum(len(message.model_dump_json()) for message in messages)
    return int(chars / CHARS_PER_TOKEN)
