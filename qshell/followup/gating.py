"""Confidence gating: whether a shown suggestion is worth speculating for this user, and how far.
A speculation costs a background turn and pays only when the user accepts the suggestion, so
the gate weighs the chance that this user accepts it and decides a `Stage`: the whole turn
(FULL), up to its first expensive point with the rest once the user shows intent (STAGED,
followup/speculation.py holds the run there), or not at all (NONE; the ghost text still
shows). With a confidence from the model (0–1, from its prediction or the suggestion
request), the chance starts as that confidence and is corrected by what this user did with
suggestions of about that confidence: `estimate = (accepted + PRIOR × c) / (outcomes +
PRIOR)` over the accepted and ignored ones among their last WINDOW (local telemetry
`suggestion` events, earlier sessions and this one) within NEAR of `c`. Without one, the
chance is this user's acceptance of suggestions of the same kind (followup/kinds.py: test,
edit, explain…), starting from NEUTRAL. Either way a kind with KIND_MIN outcomes or more
among the last WINDOW, none of them accepted, stops being speculated, whatever the model
says. A chance below `speculation.minConfidence` is not speculated — below a smaller share
of it for a kind whose speculated first steps are slow (tests, builds: a right guess saves
most there, and the slow step costs CPU at idle priority, not tokens); one at
`speculation.fullConfidence` or above runs whole; in between it is staged. With no
confidence and fewer than KIND_MIN outcomes of its kind, it is staged (whole with
`speculation.staged: false`, which runs every speculated suggestion whole);
`speculation.gating: false` speculates every one whole, as before gating existed. A
suggestion the answer did not fold in costs a request of its own: once this user has ignored
BACKOFF_AFTER in a row, those requests space out (`ask_gap`, `suggestions.backoff`) until
they take one again. The gate must not write telemetry (the caller records the decision) nor
read the events file more than once. Thread-safe: a lock guards what it learned, which the
telemetry observer updates from whichever thread records an outcome.
"""

from __future__ import annotations

import statistics
import threading
from collections import defaultdict, deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from qshell.config import DEFAULTS
from qshell.followup.kinds import OTHER, SLOW_KINDS
from qshell.followup.states import Stage
from qshell.telemetry import Telemetry, read_events

WINDOW = 50  # the recent accepted/ignored suggestions the estimate learns from
NEAR = 0.15  # outcomes whose confidence is this close to a suggestion's tell about it
PRIOR = 3.0  # how many outcomes the model's own confidence weighs as
RATE_MIN_SAMPLES = 5  # fewer outcomes than this: no overall acceptance rate reported
KIND_MIN = 4  # this many outcomes of a kind, none accepted: the kind is not speculated
KIND_PRIOR = 2.0  # how many outcomes NEUTRAL weighs as, for a suggestion with no confidence
NEUTRAL = 0.5  # the chance a suggestion of unknown confidence is taken, before any outcome
SLOW_S = 2.0  # a kind whose speculated first steps took this long (median) is slow
SLOW_SHARE = 0.5  # a slow kind is speculated from this share of minConfidence
STEPS_KEPT = 20  # first-step times remembered per kind
BACKOFF_AFTER = 8  # suggestions ignored in a row from which suggestion requests space out
MAX_GAP = 4  # at most this many turns between two suggestion requests
SUGGESTION_EVENT = "suggestion"  # followup/controller.py's telemetry event
SPECULATION_EVENT = "speculation"  # followup/speculator.py's
COUNTED = {"accepted": True, "ignored": False}  # outcome → accepted?


@dataclass(frozen=True, slots=True)
class PastGuess:
    """A suggestion this user accepted or ignored: its confidence, if any, and its kind."""

    confidence: float | None
    taken: bool
    kind: str = OTHER


def estimate(confidence: float, history: Iterable[PastGuess]) -> float:
    """The chance this user accepts a suggestion of `confidence`, given their outcomes."""
    near = [
        g.taken
        for g in history
        if g.confidence is not None and abs(g.confidence - confidence) <= NEAR
    ]
    return (sum(near) + PRIOR * confidence) / (len(near) + PRIOR)


def kind_estimate(taken: list[bool]) -> float:
    """The chance this user accepts a suggestion with no confidence, given their outcomes
    with suggestions of its kind."""
    return (sum(taken) + KIND_PRIOR * NEUTRAL) / (len(taken) + KIND_PRIOR)


@dataclass(frozen=True, slots=True)
class GatingResult:
    """How far to speculate, and what the decision was measured against."""

    stage: Stage
    gated: bool  # gating on: the estimate decided (not the `gating: false` default)
    threshold: float | None  # the estimate a suggestion needs to be speculated at all
    rate: float | None  # the user's overall acceptance rate, for the record
    estimate: float | None = None  # the chance this user accepts this suggestion
    kind: str = OTHER
    reason: str | None = None  # why not speculated: "confidence" or "kind_never_taken"
    slow: bool = False  # its kind's first step is slow

    @property
    def speculate(self) -> bool:
        return self.stage is not Stage.NONE


class ConfidenceGate:
    """The acceptance estimate for one session, fed by its telemetry."""

    def __init__(
        self,
        *,
        base: float,
        enabled: bool,
        history: Iterable[PastGuess] = (),
        full: float = DEFAULTS.speculation.full_confidence,
        staged: bool = True,
        steps: Iterable[tuple[str, float]] = (),
        backoff: bool = True,
    ) -> None:
        self.base = base
        self.backoff = backoff
        self.enabled = enabled
        self.full = full
        self.staged = staged
        self._lock = threading.Lock()
        self._outcomes: deque[PastGuess] = deque(history, maxlen=WINDOW)
        self._steps: defaultdict[str, deque[float]] = defaultdict(lambda: deque(maxlen=STEPS_KEPT))
        for kind, seconds in steps:
            self._steps[kind].append(seconds)

    @classmethod
    def watching(
        cls,
        telemetry: Telemetry,
        *,
        base: float,
        enabled: bool,
        full: float = DEFAULTS.speculation.full_confidence,
        staged: bool = True,
        backoff: bool = True,
    ) -> ConfidenceGate:
        """A gate that starts from the telemetry file's recent outcomes (and first-step
        times) and follows the ones recorded from now on."""
        wanted = enabled or backoff
        past = read_events(telemetry.path) if telemetry.path is not None and wanted else []
        gate = cls(
            base=base,
            enabled=enabled,
            history=outcomes(past),
            full=full,
            staged=staged,
            steps=first_steps(past),
            backoff=backoff,
        )
        telemetry.observe(gate.observed)
        return gate

    def observed(self, event: str, fields: Mapping[str, Any]) -> None:
        """A telemetry observer: count a suggestion accepted or ignored, and note how long
        a speculation's first step took."""
        if event == SUGGESTION_EVENT and (found := _outcome(fields)) is not None:
            with self._lock:
                self._outcomes.append(found)
        elif event == SPECULATION_EVENT and (step := _first_step(fields)) is not None:
            with self._lock:
                self._steps[step[0]].append(step[1])

    def _seen(self) -> list[PastGuess]:
        with self._lock:
            return list(self._outcomes)

    @property
    def rate(self) -> float | None:
        """The recent acceptance rate, None before RATE_MIN_SAMPLES outcomes."""
        seen = self._seen()
        return sum(g.taken for g in seen) / len(seen) if len(seen) >= RATE_MIN_SAMPLES else None

    def ask_gap(self) -> int:
        """Every how many turns a suggestion is worth a request of its own (one the answer
        did not fold in): every turn, until this user has ignored BACKOFF_AFTER in a row;
        then every 2nd turn, then every 4th (MAX_GAP) once one more was ignored. One
        accepted suggestion brings it back to every turn."""
        if not self.backoff:
            return 1
        streak = 0
        for guess in reversed(self._seen()):
            if guess.taken:
                break
            streak += 1
        if streak < BACKOFF_AFTER:
            return 1
        return min(MAX_GAP, 1 << (streak - BACKOFF_AFTER + 1))

    def slow(self, kind: str) -> bool:
        """Whether speculating `kind` starts with a slow step: as measured, once two of its
        speculations told; before that, whether it is a kind that tests or builds."""
        with self._lock:
            times = list(self._steps.get(kind, ()))
        return statistics.median(times) >= SLOW_S if len(times) >= 2 else kind in SLOW_KINDS

    def decide(self, confidence: float | None, kind: str = OTHER) -> GatingResult:
        """How far a suggestion of this `confidence` and `kind` is speculated."""
        if not self.enabled:
            return GatingResult(Stage.FULL, False, None, None, kind=kind)
        seen = self._seen()
        of_kind = [g.taken for g in seen if g.kind == kind]
        slow = self.slow(kind)
        threshold = round(self.base * (SLOW_SHARE if slow else 1.0), 3)
        decided = _Decision(kind=kind, slow=slow, threshold=threshold, rate=self.rate)
        if confidence is None:
            chance = round(kind_estimate(of_kind), 3)
        else:
            chance = round(estimate(confidence, seen), 3)
        if len(of_kind) >= KIND_MIN and not any(of_kind):
            return decided.result(Stage.NONE, chance, "kind_never_taken")
        if confidence is None and len(of_kind) < KIND_MIN:  # too little known to go further
            return decided.result(Stage.STAGED if self.staged else Stage.FULL, chance)
        if chance < threshold:
            return decided.result(Stage.NONE, chance, "confidence")
        whole = chance >= self.full or not self.staged
        return decided.result(Stage.FULL if whole else Stage.STAGED, chance)


@dataclass(frozen=True, slots=True)
class _Decision:
    """What every decision of one `decide` call records, whatever its stage."""

    kind: str
    slow: bool
    threshold: float
    rate: float | None

    def result(self, stage: Stage, chance: float | None, reason: str | None = None) -> GatingResult:
        return GatingResult(
            stage, True, self.threshold, self.rate, chance, self.kind, reason, self.slow
        )


def _outcome(fields: Mapping[str, Any]) -> PastGuess | None:
    """An accepted/ignored suggestion event's outcome, else None."""
    taken = COUNTED.get(str(fields.get("outcome")))
    if taken is None:
        return None
    kind = fields.get("kind")
    kind = kind if isinstance(kind, str) and kind else OTHER
    seen = fields.get("confidence")
    if isinstance(seen, bool) or not isinstance(seen, int | float) or not 0 <= seen <= 1:
        return PastGuess(None, taken, kind)
    return PastGuess(float(seen), taken, kind)


def _first_step(fields: Mapping[str, Any]) -> tuple[str, float] | None:
    """A speculation event's kind and first-step time in seconds, when it has both."""
    kind, ms = fields.get("kind"), fields.get("first_step_ms")
    if not isinstance(kind, str) or isinstance(ms, bool) or not isinstance(ms, int | float):
        return None
    return (kind, ms / 1000) if ms >= 0 else None


def outcomes(events: Iterable[Mapping[str, Any]]) -> list[PastGuess]:
    """The last WINDOW accepted/ignored suggestion outcomes, oldest first."""
    found = [o for e in events if e.get("event") == SUGGESTION_EVENT and (o := _outcome(e))]
    return found[-WINDOW:]


def first_steps(events: Iterable[Mapping[str, Any]]) -> list[tuple[str, float]]:
    """Each recorded speculation's kind and first-step seconds, oldest first."""
    return [s for e in events if e.get("event") == SPECULATION_EVENT and (s := _first_step(e))]
