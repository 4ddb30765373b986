"""Summary-round routing (seed 004 D2): which model answers the round after a tool batch.

`facts(session)` reads what the turn has done so far from the history (its prompt, the
calls and results since it, the last batch); `vetoes` (seed §3.2) says whether the next
round could be anything but a pure summary — the prompt asks for further action or deep
reasoning (English and Chinese keywords, `classify`), the batch holds a mutator, an error
is unresolved by (tool, arguments) fingerprint, three or more distinct calls, over 4,000
tokens of tool output, a history near the context limit, just after `/clear` or
compaction, a prompt in another language. `Routing.plan` turns that and the
`summaryTierStrategy` into the round's tier (`fastModel`, if one is set) and, under
`leanSummaryRounds`, the request knobs of a predicted pure summary. Under the defaults it
returns the request unchanged. It decides; it never streams, writes or changes the
history (latency/router.py streams and falls back, latency/decisions.py records). Pure
functions over the session's state, in the thread running the turn; the session imports
nothing of it.
"""

from __future__ import annotations

import enum
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass

from qshell.agent import compaction
from qshell.agent.session import Session
from qshell.config import DEFAULTS, SummaryTier
from qshell.llm.messages import ChatRequest, Message, answered_calls
from qshell.tools.base import Kind

MUTATOR_KINDS: frozenset[Kind] = frozenset({Kind.EDIT, Kind.DELETE, Kind.MOVE, Kind.EXECUTE})
CROSS_RESULT_CALLS = 3  # distinct (tool, arguments) calls in a turn that need the primary
OUTPUT_TOKENS_LIMIT = 4_000  # estimated tool-output tokens above which the primary sums up
FOREIGN_LETTERS_SHARE = 0.1  # letters outside English and Chinese that make a prompt foreign

_ACTION = re.compile(
    r"\b(create|fix|change|add|remove|delete|implement|write|update|edit|modify|replace|"
    r"rename|refactor|move|install|commit)\b|"
    # Chinese verbs as verbs: "实现" alone is as often the noun ("两个实现")
    r"改成|改为|修改|改一下|删除|删掉|添加|加上|替换|修复|实现一|实现下|新建|创建|写入|写一|"
    r"更新|重构|移动|安装|提交",
    re.IGNORECASE,
)
_DEEP = re.compile(
    r"\b(explain|why|compare|analy[sz]e|analysis|diagnose|reason about|evaluate)\b|"
    r"分析|解释|为什么|对比|比较|诊断|原因",
    re.IGNORECASE,
)
_KANA_HANGUL = re.compile(r"[\u3040-\u30ff\u31f0-\u31ff\uac00-\ud7af\u1100-\u11ff]")
_CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")


class PromptClass(enum.StrEnum):
    """What a prompt asks for (the decision log's `user_prompt_classification`)."""

    QUERY = "query"
    ACTION = "action"
    ANALYSIS = "analysis"


class Veto(enum.StrEnum):
    """Why the next round is not predicted to be a pure summary (`veto_reason`)."""

    FURTHER_ACTION = "further_action"
    WRITE_TOOL = "write_tool"
    UNRESOLVED_ERROR = "unresolved_error"
    DEEP_REASONING = "deep_reasoning"
    CROSS_RESULT = "cross_result"
    OUTPUT_TOKENS = "output_tokens"
    CONTEXT = "context_window"
    LANG_UNSUPPORTED = "lang_unsupported"
    COMPACT_OR_CLEAR = "compact_or_clear"


class Tier(enum.StrEnum):
    PRIMARY = "primary"
    FAST = "fast"


def classify(prompt: str) -> PromptClass:
    """Action before analysis: "explain it, then fix it" is a task with more steps."""
    if _ACTION.search(prompt):
        return PromptClass.ACTION
    if _DEEP.search(prompt):
        return PromptClass.ANALYSIS
    return PromptClass.QUERY


def supported_language(prompt: str) -> bool:
    """English or Chinese: no kana or hangul, and few letters of other scripts."""
    if _KANA_HANGUL.search(prompt):
        return False
    letters = [c for c in prompt if c.isalpha() and not _CJK.match(c)]
    foreign = sum(not c.isascii() for c in letters)
    return not letters or foreign / len(letters) <= FOREIGN_LETTERS_SHARE


def fingerprint(name: str, arguments: str) -> tuple[str, str]:
    """A call's identity: its tool and its arguments with the keys sorted."""
    try:
        return name, json.dumps(json.loads(arguments or "{}"), sort_keys=True)
    except (ValueError, RecursionError):
        return name, arguments


@dataclass(frozen=True, slots=True)
class TurnFacts:
    """What the current turn has done so far, read from the history."""

    prompt: str = ""
    fresh: bool = False  # its history before the prompt is empty or only a compaction summary
    tool_count: int = 0  # calls in the turn
    distinct_tool_count: int = 0  # distinct (tool, arguments) calls in the turn
    batch_mutates: bool = False  # a call of the last batch has a mutating kind
    batch_error: bool = False  # a result of the last batch is an error
    unresolved_error: bool = False  # a call's last result (by fingerprint) is an error
    output_tokens_est: int = 0  # the turn's tool output, in chars / 4
    history_tokens_est: int = 0  # the next request's size, as compaction estimates it

    @property
    def classification(self) -> PromptClass:
        return classify(self.prompt)


def _prompt_index(history: Sequence[Message]) -> int:
    for index in range(len(history) - 1, -1, -1):
        message = history[index]
        if message.role == "user" and not message.tool_results:
            return index
    return -1


def _fresh(before: Sequence[Message]) -> bool:
    if not before:
        return True
    first = before[0].text if before[0].role == "user" else ""
    return len(before) <= 2 and first.startswith(compaction.SUMMARY_HEADER)


def _unresolved(history: Sequence[Message]) -> bool:
    """Whether some call's last result in `history` (the current turn's messages: seed
    §3.2's `turn.toolResults`), by (tool, arguments) fingerprint, is an error."""
    results = [r for m in history for r in m.tool_results]
    if not any(r.is_error for r in results):
        return False  # the common case, without parsing every call's arguments
    last: dict[tuple[str, str], bool] = {}
    for index, message in enumerate(history):  # a result answers the message before it
        calls = answered_calls(history, index)
        for result in message.tool_results:
            call = calls.get(result.tool_call_id)
            if call is not None:
                last[fingerprint(call.name, call.arguments)] = result.is_error
    return any(last.values())


def facts(session: Session) -> TurnFacts:
    """The turn's facts: its prompt is the last user message that answers no call."""
    history = session.history
    start = _prompt_index(history)
    prompt = history[start].text if start >= 0 else ""
    turn = history[start + 1 :]
    calls = [c for m in turn for c in m.tool_calls]
    results = [r for m in turn for r in m.tool_results]
    batch = next((m.tool_results for m in reversed(turn) if m.tool_results), [])
    asked = next((m.tool_calls for m in reversed(turn) if m.tool_calls), [])
    kinds = [getattr(session.tools_by_name.get(c.name), "kind", None) for c in asked]
    return TurnFacts(
        prompt=prompt,
        fresh=_fresh(history[: max(start, 0)]),
        tool_count=len(calls),
        distinct_tool_count=len({fingerprint(c.name, c.arguments) for c in calls}),
        batch_mutates=any(kind in MUTATOR_KINDS for kind in kinds),
        batch_error=any(r.is_error for r in batch),
        unresolved_error=_unresolved(turn),
        output_tokens_est=sum(len(r.content) for r in results) // compaction.CHARS_PER_TOKEN,
        # as compaction sizes the next request: the last round's tokens plus what is new
        history_tokens_est=session.stats.last_prompt_tokens
        + sum(len(r.content) for r in batch) // compaction.CHARS_PER_TOKEN,
    )


def vetoes(facts: TurnFacts, *, context_limit: float) -> list[Veto]:
    """Every reason the next round may not be a pure summary, in the seed's order."""
    found: list[Veto] = []
    kind = facts.classification
    checks = [
        (kind is PromptClass.ACTION, Veto.FURTHER_ACTION),
        (facts.batch_mutates, Veto.WRITE_TOOL),
        (facts.batch_error or facts.unresolved_error, Veto.UNRESOLVED_ERROR),
        (kind is PromptClass.ANALYSIS, Veto.DEEP_REASONING),
        (facts.distinct_tool_count >= CROSS_RESULT_CALLS, Veto.CROSS_RESULT),
        (facts.output_tokens_est > OUTPUT_TOKENS_LIMIT, Veto.OUTPUT_TOKENS),
        (facts.history_tokens_est > context_limit, Veto.CONTEXT),
        (not supported_language(facts.prompt), Veto.LANG_UNSUPPORTED),
        (facts.fresh, Veto.COMPACT_OR_CLEAR),
    ]
    for vetoed, veto in checks:
        if vetoed:
            found.append(veto)
    return found


TOOL_CALL_VETOES = frozenset({Veto.FURTHER_ACTION, Veto.UNRESOLVED_ERROR, Veto.LANG_UNSUPPORTED})
"""The vetoes that foretell another tool call after a batch of terminal results (more
work asked, an error to deal with, or a language whose action words are not known). The
write veto is not among them: a terminal result is a read's output (the shell marks only a
plain `cat`, `git status` or `git log`), whatever the tool's kind; the other vetoes say the
fast model would sum up worse, not that the round would not be a summary."""


def predicts_summary(session: Session) -> bool:
    """Whether the round after a batch of terminal results is expected to sum up without
    a tool call: no veto of `TOOL_CALL_VETOES` applies. D3 gives the prompt back only then
    (and the REPL takes it back if a tool call comes after all); D2 and lean rounds ask
    for more, every veto, through `Routing.plan`."""
    found = vetoes(facts(session), context_limit=compaction.threshold_tokens(session))
    return not TOOL_CALL_VETOES.intersection(found)


@dataclass(frozen=True, slots=True)
class Plan:
    """One continuation round: its request, the tier asked for, and why not a summary."""

    request: ChatRequest
    tier: Tier
    veto: Veto | None  # None: predicted to be a pure summary
    lean: bool  # the request asks for no tool calls and no reasoning


@dataclass(frozen=True, slots=True)
class Routing:
    """A session's routing settings: `summaryTierStrategy`, `fastModel`, `leanSummaryRounds`."""

    strategy: SummaryTier = DEFAULTS.summary_tier_strategy
    fast_model: str = DEFAULTS.fast_model
    lean: bool = DEFAULTS.lean_summary_rounds

    def plan(self, session: Session, request: ChatRequest, turn: TurnFacts) -> Plan:
        """The tier and request of the round after a batch (`request` is the primary's)."""
        found = vetoes(turn, context_limit=compaction.threshold_tokens(session))
        veto = found[0] if found else None
        wanted = self.strategy is SummaryTier.ALWAYS_FAST or (
            self.strategy is SummaryTier.AUTO and veto is None
        )
        usable = bool(self.fast_model) and self.fast_model != request.model
        tier = Tier.FAST if wanted and usable else Tier.PRIMARY
        lean = self.lean and veto is None
        if tier is Tier.FAST:
            request = request.model_copy(update={"model": self.fast_model})
        if lean:
            request = request.model_copy(update={"no_tool_calls": True, "reasoning_off": True})
        return Plan(request, tier, veto, lean)


PRIMARY_ONLY = Routing()
