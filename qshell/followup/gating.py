"""Confidence gating: whether a shown suggestion is worth speculating, for this user.

A speculation costs a full background turn, and it pays only when the user accepts the
suggestion; so a suggestion is speculated only when the model's confidence in it (0–1, from
its prediction tag or the suggestion request: agent/prediction.py, followup/suggestion.py)
is at least a threshold. The rule is one line: `threshold = base + SLOPE × (TARGET_RATE −
rate)`, clamped to `base ± SPAN` and to [0, 1], where `base` is `speculation.minConfidence`
and `rate` is this user's acceptance rate over their last `WINDOW` suggestions that were
accepted or ignored (local telemetry `suggestion` events, from earlier sessions and this
one). A user who rarely accepts gets a higher bar, one who often does a lower one; with
fewer than `MIN_SAMPLES` outcomes the bar is `base`. A suggestion of unknown confidence is
speculated as before (no gating), and so is every one with `speculation.gating: false`.
The ghost text shows whatever the confidence: gating concerns speculation only. It must not
write telemetry (the caller records the decision) nor read the events file more than once.
Thread-safe: a lock guards the recent outcomes, which the telemetry observer updates from
whichever thread records a suggestion outcome.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from qshell.telemetry import Telemetry, read_events

WINDOW = 20  # the recent accepted/ignored suggestions the rate is measured over
MIN_SAMPLES = 5  # fewer outcomes than this: the base threshold, unadjusted
TARGET_RATE = 0.5  # the acceptance rate at which the threshold is the base
SLOPE = 0.4  # how far the threshold moves per unit of rate below or above the target
SPAN = 0.2  # the threshold stays within base ± SPAN
SUGGESTION_EVENT = "suggestion"  # followup/controller.py's telemetry event
COUNTED = {"accepted": True, "ignored": False}  # outcome → accepted?


def threshold(base: float, rate: float | None) -> float:
    """The confidence a suggestion needs to be speculated, given the acceptance `rate`
    (None: not measured yet)."""
    if rate is None:
        return base
    moved = base + SLOPE * (TARGET_RATE - rate)
    return min(1.0, max(0.0, base - SPAN, min(base + SPAN, moved)))


@dataclass(frozen=True, slots=True)
class GateDecision:
    """Whether to speculate, and what the decision was measured against."""

    speculate: bool
    gated: bool  # confidence was known and gating on: the threshold decided
    threshold: float | None
    rate: float | None


class ConfidenceGate:
    """The adaptive threshold for one session, fed by its telemetry."""

    def __init__(self, *, base: float, enabled: bool, history: Iterable[bool] = ()) -> None:
        self.base = base
        self.enabled = enabled
        self._lock = threading.Lock()
        self._outcomes: deque[bool] = deque(history, maxlen=WINDOW)

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
        accepted = COUNTED.get(str(fields.get("outcome"))) if event == SUGGESTION_EVENT else None
        if accepted is not None:
            with self._lock:
                self._outcomes.append(accepted)

    @property
    def rate(self) -> float | None:
        """The recent acceptance rate, None before MIN_SAMPLES outcomes."""
        with self._lock:
            seen = list(self._outcomes)
        return sum(seen) / len(seen) if len(seen) >= MIN_SAMPLES else None

    def decide(self, confidence: float | None) -> GateDecision:
        """Whether a suggestion of this `confidence` is speculated."""
        if not self.enabled or confidence is None:
            return GateDecision(True, False, None, None)
        rate = self.rate
        bar = threshold(self.base, rate)
        return GateDecision(confidence >= bar, True, round(bar, 3), rate)


def outcomes(events: Iterable[Mapping[str, Any]]) -> list[bool]:
    """The last WINDOW accepted (True) / ignored (False) suggestion outcomes, oldest first."""
    found = [
        COUNTED[str(e.get("outcome"))]
        for e in events
        if e.get("event") == SUGGESTION_EVENT and str(e.get("outcome")) in COUNTED
    ]
    return found[-WINDOW:]
