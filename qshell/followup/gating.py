"""Confidence gating: whether a shown suggestion is worth speculating, for this user.

A speculation costs a full background turn, and it pays only when the user accepts the
suggestion; so a suggestion is speculated only when the chance that this user accepts it is
at least `speculation.minConfidence`. That chance starts as the model's own confidence in
the suggestion (0–1, from its prediction or the suggestion request: agent/prediction.py,
followup/suggestion.py) and is then corrected by what this user did with suggestions of
about that confidence: `estimate = (accepted + PRIOR × c) / (outcomes + PRIOR)`, counting
the accepted and ignored suggestions among their last WINDOW (local telemetry `suggestion`
events, from earlier sessions and this one) whose confidence was within NEAR of `c`. So a
user who takes confident suggestions gets them speculated even when they ignore the rest,
one who ignores even confident ones soon stops paying for them, and with no outcomes yet
the confidence itself decides. A suggestion of unknown confidence is speculated as before
(no gating), and so is every one with `speculation.gating: false`. The ghost text shows
whatever the confidence: gating concerns speculation only. It must not write telemetry (the
caller records the decision) nor read the events file more than once. Thread-safe: a lock
guards the recent outcomes, which the telemetry observer updates from whichever thread
records a suggestion outcome.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from qshell.telemetry import Telemetry, read_events

WINDOW = 50  # the recent accepted/ignored suggestions the estimate learns from
NEAR = 0.15  # outcomes whose confidence is this close to a suggestion's tell about it
PRIOR = 3.0  # how many outcomes the model's own confidence weighs as
RATE_MIN_SAMPLES = 5  # fewer outcomes than this: no overall acceptance rate reported
SUGGESTION_EVENT = "suggestion"  # followup/controller.py's telemetry event
COUNTED = {"accepted": True, "ignored": False}  # outcome → accepted?
PastGuess = tuple[float | None, bool]  # the confidence a suggestion had, and whether taken


def estimate(confidence: float, history: Iterable[PastGuess]) -> float:
    """The chance this user accepts a suggestion of `confidence`, given their outcomes."""
    near = [taken for seen, taken in history if seen is not None and abs(seen - confidence) <= NEAR]
    return (sum(near) + PRIOR * confidence) / (len(near) + PRIOR)


@dataclass(frozen=True, slots=True)
class GatingResult:
    """Whether to speculate, and what the decision was measured against."""

    speculate: bool
    gated: bool  # confidence was known and gating on: the estimate decided
    threshold: float | None  # the estimate a suggestion needs (minConfidence)
    rate: float | None  # the user's overall acceptance rate, for the record
    estimate: float | None = None  # the chance this user accepts this suggestion


class ConfidenceGate:
    """The acceptance estimate for one session, fed by its telemetry."""

    def __init__(self, *, base: float, enabled: bool, history: Iterable[PastGuess] = ()) -> None:
        self.base = base
        self.enabled = enabled
        self._lock = threading.Lock()
        self._outcomes: deque[PastGuess] = deque(history, maxlen=WINDOW)

    @classmethod
    def watching(cls, telemetry: Telemetry, *, base: float, enabled: bool) -> ConfidenceGate:
        """A gate that starts from the telemetry file's recent outcomes and follows the
        outcomes recorded from now on."""
        past = read_events(telemetry.path) if telemetry.path is not None and enabled else []
        gate = cls(base=base, enabled=enabled, history=outcomes(past))
        telemetry.observe(gate.observed)
        return gate

    def observed(self, event: str, fields: Mapping[str, Any]) -> None:
        """A telemetry observer: count a suggestion accepted or ignored."""
        found = _outcome(fields) if event == SUGGESTION_EVENT else None
        if found is not None:
            with self._lock:
                self._outcomes.append(found)

    def _seen(self) -> list[PastGuess]:
        with self._lock:
            return list(self._outcomes)

    @property
    def rate(self) -> float | None:
        """The recent acceptance rate, None before RATE_MIN_SAMPLES outcomes."""
        seen = self._seen()
        return sum(t for _, t in seen) / len(seen) if len(seen) >= RATE_MIN_SAMPLES else None

    def decide(self, confidence: float | None) -> GatingResult:
        """Whether a suggestion of this `confidence` is speculated."""
        if not self.enabled or confidence is None:
            return GatingResult(True, False, None, None)
        chance = round(estimate(confidence, self._seen()), 3)
        return GatingResult(chance >= self.base, True, self.base, self.rate, chance)


def _outcome(fields: Mapping[str, Any]) -> PastGuess | None:
    """An accepted/ignored suggestion event's (confidence, accepted), else None."""
    taken = COUNTED.get(str(fields.get("outcome")))
    if taken is None:
        return None
    seen = fields.get("confidence")
    if isinstance(seen, bool) or not isinstance(seen, int | float) or not 0 <= seen <= 1:
        return (None, taken)
    return (float(seen), taken)


def outcomes(events: Iterable[Mapping[str, Any]]) -> list[PastGuess]:
    """The last WINDOW accepted/ignored suggestion outcomes, oldest first."""
    found = [o for e in events if e.get("event") == SUGGESTION_EVENT and (o := _outcome(e))]
    return found[-WINDOW:]
