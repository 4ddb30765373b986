"""The decision log (seed 004 §5.4/§5.5): one record per round decision of a turn.

A `TurnLog` follows one run of `run_turn` and records what it is told: the router's plan
for each round (`routed`), each stream's first token (`streamed`), a fast round's
fallback to the primary model (`fell_back`, latency/router.py decides it), the round's
end and position (first | middle | summary, for cached-token accounting), each tool
batch (a D1 skip is a record with choice `skip` and no round), and every event the turn
yields (when the user could type again). When the turn ends it appends its records to
`<state>/telemetry/decisions.jsonl` through a `Telemetry` of its own (same permissions,
never raises, the prompt's text only under `telemetry.logText`). It decides nothing and
never changes the history. Speculative runs write nothing: a fork's turn runs without a
router, so with a disabled log (its rounds are not a wait the user sat through; an
accepted speculation is the `speculation` telemetry event). A TurnLog belongs to the
thread running its turn; `DecisionLog.write` is thread-safe (Telemetry's lock, one whole
line per write).
"""

from __future__ import annotations

import enum
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from qshell.agent import compaction
from qshell.agent.events import (
    Event,
    PredictionStarted,
    SummaryStarted,
    ToolFinished,
    ToolStarted,
)
from qshell.agent.events import RoundPosition as Position
from qshell.agent.session import Session
from qshell.config import DEFAULTS, SummaryTier
from qshell.latency import routing
from qshell.latency.routing import Plan, Tier
from qshell.llm.base import StreamDone
from qshell.llm.messages import Usage
from qshell.telemetry import TELEMETRY_DIRNAME, Telemetry
from qshell.tools.base import ErrorType, ToolResult

DECISIONS_FILENAME = "decisions.jsonl"
DECISION_EVENT = "decision"


class RoundChoice(enum.StrEnum):
    """What a decision record says was chosen for the next round (its `decision` key)."""

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

    def __init__(
        self,
        session: Session,
        log: DecisionLog | None = None,
        *,
        strategy: SummaryTier = DEFAULTS.summary_tier_strategy,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.session = session
        self.log: DecisionLog = log or DecisionLog.disabled()
        self.strategy = strategy  # the `summaryTierStrategy` the records name
        self._clock = clock
        self.started = clock()
        self.turn_id = uuid.uuid4().hex
        self.records: list[dict[str, Any]] = []
        self.batch = _Batch()
        self.first_token: float | None = None
        self.idle: float | None = None
        self.last_event = self.started
        self._chars = 0  # text the round's last stream brought, for an output estimate

    @property
    def batches(self) -> int:
        """How many tool batches of the turn have ended so far."""
        return self.batch.batches

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

    def routed(self, plan: Plan, facts: routing.TurnFacts) -> None:
        """A round starts on `plan`'s tier: its record opens."""
        record = self._base(facts, RoundChoice(str(plan.tier)))
        record.update(
            tier_requested=str(plan.tier),
            tier_actual=str(plan.tier),
            veto_reason=str(plan.veto) if plan.veto else None,
            lean=plan.lean,
            model=plan.request.model,
            _started=self._clock(),
        )
        self.records.append(record)

    def streamed(self, tier: Tier, *, first: float | None, ttft_ms: int | None) -> None:
        """One stream of the round ended on `tier`; `first` is when its first chunk came."""
        if self.first_token is None and first is not None:
            self.first_token = first
        self.records[-1][f"{tier}_ttft_ms"] = ttft_ms

    def fell_back(self, reason: str, detail: str, *, cut: Usage | None, chars: int) -> None:
        """The fast stream was given up (`reason`): the primary model answers the round.
        What the fast model spent is `cut` (its usage, when known) or estimated from the
        `chars` of text it streamed."""
        if cut is not None:
            consumed, source = cut.completion_tokens, "usage"
        else:
            consumed, source = chars // compaction.CHARS_PER_TOKEN, "estimated"
        self.records[-1].update(
            tier_actual=str(Tier.PRIMARY),
            fallback_triggered=True,
            fallback_reason=reason,
            fallback_detail=detail or None,
            fast_tokens_consumed=consumed,
            fast_tokens_source=source,
            fast_prompt_tokens=cut.prompt_tokens if cut is not None else None,
            model=self.session.model,
        )

    def stream_ended(self, *, chars: int) -> None:
        """The round's streaming is over; `chars` of text came in its last stream."""
        record = self.records[-1]
        record["total_rt_ms"] = _ms(self._clock() - record.pop("_started"))
        self._chars = chars

    def round_done(self, done: StreamDone) -> Position:
        """The finished round's position; its usage joins the open record."""
        if not self.batches:
            position = Position.FIRST
        else:
            position = Position.MIDDLE if done.message.tool_calls else Position.SUMMARY
        if self.records:
            fields = _usage_fields(done.usage)
            if not done.usage.known:
                fields["output_tokens"] = self._chars // compaction.CHARS_PER_TOKEN
            self.records[-1].update(fields, position=str(position))
        return position

    def batch_done(self, *, skipped: routing.TurnFacts | None) -> None:
        """A tool batch ended; when D1 skipped the next round (`skipped` holds the turn's
        facts then), that is a decision too."""
        self.batch.ended()
        if skipped is not None:
            record = self._base(skipped, RoundChoice.SKIP)
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

    def _base(self, facts: routing.TurnFacts, choice: RoundChoice) -> dict[str, Any]:
        session = self.session
        record: dict[str, Any] = {
            "turn_id": self.turn_id,
            "prompt_id": f"{session.id}:{_prompts(session)}",
            "session_id": session.id,
            "decision": str(choice),
            "batches_before": self.batches,  # tool batches of the turn before it
            "user_strategy": str(self.strategy),
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
