"""The decision log (seed 004 §5.4/§5.5): one record per round decision of a turn.

A `TurnLog` follows one run of `run_turn`: it routes each round (the first always on the
primary model; after a tool batch `Routing.plan` of latency/routing.py picks the tier and
the lean knobs), streams it through the loop's `_stream` with a `Watch` that times the
first token and — on the fast tier — cuts the stream when it starts a tool call, then
retries the round on the primary model (nothing of the cut round reaches the history;
a `TextWithdrawn` says so on screen and takes the text back). It names each round's position (first | middle |
summary, for cached-token accounting) and, when the turn ends, appends its records to
`<state>/telemetry/decisions.jsonl` through a `Telemetry` of its own (same permissions,
never raises, the prompt's text only under `telemetry.logText`). A D1 skip is a record
with decision `skip` and no round. Speculative runs write nothing: a fork gets no
`DecisionLog` (its rounds are not a wait the user sat through; an accepted speculation
is the `speculation` telemetry event). It never changes the history. A TurnLog belongs to
the thread running its turn; `DecisionLog.write` is thread-safe (Telemetry's lock, one
whole line per write).
"""

from __future__ import annotations

import enum
import time
import uuid
from collections.abc import Callable, Generator, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from qshell.agent import compaction
from qshell.agent.events import (
    Event,
    PredictionStarted,
    SummaryStarted,
    TentativeText,
    TextWithdrawn,
    ToolFinished,
    ToolStarted,
)
from qshell.agent.events import RoundPosition as Position
from qshell.agent.session import Session
from qshell.errors import QshellError
from qshell.latency import routing
from qshell.latency.routing import PRIMARY_ONLY, Plan, Tier
from qshell.llm.base import StreamDone, StreamEvent, StreamReasoning, StreamText
from qshell.llm.messages import ChatRequest, Usage
from qshell.telemetry import TELEMETRY_DIRNAME, Telemetry
from qshell.tools.base import ErrorType, ToolResult

DECISIONS_FILENAME = "decisions.jsonl"
DECISION_EVENT = "decision"
FALLBACK_NOTICE = "the fast model started a tool call; the primary model answers this round"


class Decision(enum.StrEnum):
    SKIP = "skip"  # D1 ended the turn: no round
    PRIMARY = "primary"
    FAST = "fast"


class DecisionLog:
    """Where a session's decision records go; `DecisionLog.disabled()` keeps none."""

    def __init__(self, telemetry: Telemetry, *, log_text: bool = False) -> None:
        self._telemetry = telemetry
        self.log_text = log_text

    @classmethod
    def for_state_dir(cls, state: Path, *, log_text: bool = False) -> DecisionLog:
        path = state / TELEMETRY_DIRNAME / DECISIONS_FILENAME
        return cls(Telemetry(path), log_text=log_text)

    @classmethod
    def disabled(cls) -> DecisionLog:
        return cls(Telemetry.disabled())

    def write(self, records: Iterable[dict[str, Any]]) -> None:
        """Append the records, one line each, and close the file until the next turn."""
        for record in records:
            self._telemetry.record(DECISION_EVENT, **record)
        self._telemetry.close()


class Watch:
    """One stream's clock: the first chunk's time, the text it brought, and — when
    `cut_on_call` — whether it started a tool call (any chunk but text, reasoning or the
    end, which is how a provider that streams calls shows one)."""

    def __init__(self, clock: Callable[[], float], *, cut_on_call: bool) -> None:
        self._clock = clock
        self.started = clock()
        self.first: float | None = None
        self.ended: float | None = None
        self.chars = 0
        self.cut_on_call = cut_on_call
        self.was_cut = False

    def cut(self, chunk: StreamEvent) -> bool:
        """Note `chunk`; True when the stream must stop here."""
        now = self._clock()
        if self.first is None:
            self.first = now
        if isinstance(chunk, StreamText | StreamReasoning):
            self.chars += len(chunk.text)
            return False
        self.ended = now
        self.was_cut = self.cut_on_call and not isinstance(chunk, StreamDone)
        return self.was_cut

    def ttft_ms(self) -> int | None:
        return None if self.first is None else _ms(self.first - self.started)

    def rt_ms(self) -> int:
        return _ms((self.ended or self._clock()) - self.started)


Streamer = Callable[[ChatRequest, Watch], Generator[Event, None, StreamDone | None]]


@dataclass
class _Batch:
    """What the turn's tool batches showed in their ToolFinished events."""

    batches: int = 0
    results: list[ToolResult] = field(default_factory=list)  # of the batch running now
    last: list[ToolResult] = field(default_factory=list)  # of the batch that ended last

    def ended(self) -> None:
        self.batches += 1
        self.last, self.results = self.results, []

    def signals(self) -> dict[str, bool]:
        results = self.last
        return {
            "signal_skipLlmRound": bool(results) and all(r.skip_llm_round for r in results),
            "signal_resultIsTerminal": bool(results) and all(r.result_is_terminal for r in results),
            "has_cancel": any(
                r.error is not None and r.error.type is ErrorType.CANCELLED for r in results
            ),
        }


class TurnLog:
    """The decisions of one turn, written when it ends (`close`)."""

    def __init__(self, session: Session, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.session = session
        self.log: DecisionLog = session.decisions or DecisionLog.disabled()
        self.routing = session.routing or PRIMARY_ONLY
        self._clock = clock
        self.started = clock()
        self.turn_id = uuid.uuid4().hex
        self.records: list[dict[str, Any]] = []
        self.batch = _Batch()
        self.first_token: float | None = None
        self.idle: float | None = None
        self.last_event = self.started
        self._watch: Watch | None = None

    def saw(self, event: Event) -> Event:
        """Each event of the turn, as it is produced (returned unchanged)."""
        self.last_event = self._clock()
        if isinstance(event, ToolFinished):
            self.batch.results.append(event.result)
        elif isinstance(event, SummaryStarted | PredictionStarted) and self.idle is None:
            self.idle = self.last_event  # D3, or a hidden line left: the prompt comes back now
        elif isinstance(event, ToolStarted):
            self.idle = None  # the round called a tool after all: the turn took the prompt back
        return event

    def stream(
        self, request: ChatRequest, streamer: Streamer
    ) -> Generator[Event, None, StreamDone | None]:
        """Route and stream one round; on the fast tier, fall back to the primary model
        when its stream starts a tool call (or fails). Returns the round's StreamDone."""
        facts = routing.facts(self.session)
        plan = self._plan(request, facts)
        record = self._record(plan, facts)
        watch = Watch(self._clock, cut_on_call=plan.tier is Tier.FAST)
        reason = detail = ""
        if plan.tier is Tier.FAST:
            yield TentativeText()
        try:
            done = yield from streamer(plan.request, watch)
        except QshellError as exc:
            if plan.tier is not Tier.FAST:
                raise
            done, reason, detail = None, "error", type(exc).__name__
        else:
            if watch.was_cut or (done is not None and done.message.tool_calls):
                reason = "tool_call_seen"
            elif done is None:
                reason, detail = "error", "the stream ended early"
        self._mark_first(watch)
        record[f"{plan.tier}_ttft_ms"] = watch.ttft_ms()
        if plan.tier is Tier.FAST and reason:
            self._fell_back(record, watch, done, reason, detail)
            yield TextWithdrawn(FALLBACK_NOTICE)
            watch = Watch(self._clock, cut_on_call=False)
            done = yield from streamer(request, watch)
            self._mark_first(watch)
            record["primary_ttft_ms"] = watch.ttft_ms()
        record["total_rt_ms"] = _ms(self._clock() - record.pop("_started"))
        self._watch = watch
        return done

    def round_done(self, done: StreamDone) -> Position:
        """The finished round's position; its usage joins the open record."""
        if not self.batch.batches:
            position = Position.FIRST
        else:
            position = Position.MIDDLE if done.message.tool_calls else Position.SUMMARY
        if self.records:
            fields = _usage_fields(done.usage)
            if not done.usage.known and self._watch is not None:
                fields["output_tokens"] = self._watch.chars // compaction.CHARS_PER_TOKEN
            self.records[-1].update(fields, position=str(position))
        return position

    def batch_done(self, *, skipped: bool) -> None:
        """A tool batch ended; when D1 skipped the next round, that is a decision too."""
        self.batch.ended()
        if skipped:
            facts = routing.facts(self.session)
            record = self._base(facts, Decision.SKIP)
            record.update(tier_requested=None, tier_actual=None, veto_reason=None)
            self.records.append(record)

    def close(self) -> None:
        """The turn ended: every record gets the turn's times and is written."""
        idle = self.idle if self.idle is not None else self.last_event
        for record in self.records:
            record.pop("_started", None)
            record["t_first_token_ms"] = (
                None if self.first_token is None else _ms(self.first_token - self.started)
            )
            record["t_user_idle_ms"] = _ms(idle - self.started)
        self.log.write(self.records)
        self.records = []

    def _plan(self, request: ChatRequest, facts: routing.TurnFacts) -> Plan:
        if not self.batch.batches:
            return Plan(request, Tier.PRIMARY, None, lean=False)
        return self.routing.plan(self.session, request, facts)

    def _record(self, plan: Plan, facts: routing.TurnFacts) -> dict[str, Any]:
        record = self._base(facts, Decision(str(plan.tier)))
        record.update(
            tier_requested=str(plan.tier),
            tier_actual=str(plan.tier),
            veto_reason=str(plan.veto) if plan.veto else None,
            lean=plan.lean,
            model=plan.request.model,
            _started=self._clock(),
        )
        self.records.append(record)
        return record

    def _base(self, facts: routing.TurnFacts, decision: Decision) -> dict[str, Any]:
        session = self.session
        record: dict[str, Any] = {
            "turn_id": self.turn_id,
            "prompt_id": f"{session.id}:{_prompts(session)}",
            "session_id": session.id,
            "decision": str(decision),
            "batches_before": self.batch.batches,  # tool batches of the turn before it
            "user_strategy": str(self.routing.strategy),
            **self.batch.signals(),
            "tool_count": facts.tool_count,
            "distinct_tool_count": facts.distinct_tool_count,
            "has_write_tool": facts.batch_mutates,
            "has_error": facts.batch_error,
            "output_tokens_est": facts.output_tokens_est,
            "user_prompt_classification": str(facts.classification),
            "fast_ttft_ms": None,
            "primary_ttft_ms": None,
            "fast_tokens_consumed": None,
            "total_rt_ms": None,
            "fallback_triggered": False,
            "fallback_reason": None,
            "tokens_source": None,
            "position": None,
        }
        if self.log.log_text:
            record["prompt"] = facts.prompt
        return record

    def _fell_back(
        self,
        record: dict[str, Any],
        watch: Watch,
        done: StreamDone | None,
        reason: str,
        detail: str,
    ) -> None:
        cut_usage = done.usage if done is not None and done.usage.known else None
        if cut_usage is not None:
            consumed, source = cut_usage.completion_tokens, "usage"
        else:
            consumed, source = watch.chars // compaction.CHARS_PER_TOKEN, "estimated"
        record.update(
            tier_actual=str(Tier.PRIMARY),
            fallback_triggered=True,
            fallback_reason=reason,
            fallback_detail=detail or None,
            fast_tokens_consumed=consumed,
            fast_tokens_source=source,
            fast_prompt_tokens=cut_usage.prompt_tokens if cut_usage is not None else None,
            model=self.session.model,
        )

    def _mark_first(self, watch: Watch) -> None:
        if self.first_token is None and watch.first is not None:
            self.first_token = watch.first


def _prompts(session: Session) -> int:
    """How many prompts the history holds: the ordinal of the current one."""
    return sum(1 for m in session.history if m.role == "user" and not m.tool_results)


def _usage_fields(usage: Usage) -> dict[str, Any]:
    return {
        "prompt_tokens": usage.prompt_tokens,
        "cached_tokens": usage.cached_tokens,
        "cache_creation_tokens": usage.cache_creation_tokens,
        "output_tokens": usage.completion_tokens,
        "tokens_source": "usage" if usage.known else "estimated",
    }


def _ms(seconds: float) -> int:
    return round(1000 * seconds)
