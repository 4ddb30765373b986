"""The confidence gate: the acceptance estimate (the model's confidence until this user's
outcomes of about that confidence say otherwise), the outcomes read from telemetry and
followed live, and the cases it does not gate."""

from __future__ import annotations

import pytest

from qshell.followup.gating import (
    NEAR,
    PRIOR,
    RATE_MIN_SAMPLES,
    WINDOW,
    ConfidenceGate,
    estimate,
    outcomes,
)
from qshell.telemetry import Telemetry


def test_with_no_outcomes_the_estimate_is_the_models_confidence():
    for confidence in (0.0, 0.3, 0.9):
        assert estimate(confidence, []) == pytest.approx(confidence)


def test_ignored_suggestions_of_about_that_confidence_lower_it_and_accepted_ones_raise_it():
    ignored = [(0.6, False)] * 4
    taken = [(0.6, True)] * 4
    assert estimate(0.6, ignored) == pytest.approx((PRIOR * 0.6) / (4 + PRIOR))
    assert estimate(0.6, taken) == pytest.approx((4 + PRIOR * 0.6) / (4 + PRIOR))
    assert estimate(0.6, ignored) < 0.6 < estimate(0.6, taken)


def test_only_outcomes_near_the_confidence_count():
    far = [(0.6 + NEAR + 0.01, False), (0.6 - NEAR - 0.01, False), (None, False)] * 5
    assert estimate(0.6, far) == pytest.approx(0.6)


def test_a_user_who_takes_confident_suggestions_and_ignores_the_rest_keeps_the_confident_ones():
    history = [(0.9, True)] * 5 + [(0.2, False)] * 15  # 25 % accepted overall
    gate = ConfidenceGate(base=0.35, enabled=True, history=history)
    assert gate.rate == 0.25
    assert gate.decide(0.85).speculate  # an overall low rate does not hold these back
    assert not gate.decide(0.3).speculate


def test_a_user_who_ignores_even_confident_suggestions_stops_paying_for_them():
    gate = ConfidenceGate(base=0.35, enabled=True)
    assert gate.decide(0.8).speculate
    for _ in range(6):
        gate.observed("suggestion", {"outcome": "ignored", "confidence": 0.8})
    decision = gate.decide(0.8)
    assert not decision.speculate and decision.estimate is not None and decision.estimate < 0.35


def test_unknown_confidence_or_gating_off_always_speculates():
    gate = ConfidenceGate(base=0.9, enabled=True)
    assert gate.decide(None).speculate and not gate.decide(None).gated
    off = ConfidenceGate(base=0.9, enabled=False)
    assert off.decide(0.01).speculate and not off.decide(0.01).gated


def test_an_estimate_below_the_base_is_gated_and_one_at_it_is_not():
    gate = ConfidenceGate(base=0.5, enabled=True)
    assert not gate.decide(0.49).speculate
    decision = gate.decide(0.5)
    assert decision.speculate and decision.gated and decision.threshold == 0.5
    assert decision.estimate == 0.5


def test_the_rate_needs_enough_outcomes_and_only_the_last_window_counts():
    few = [(0.5, True)] * (RATE_MIN_SAMPLES - 1)
    assert ConfidenceGate(base=0.5, enabled=True, history=few).rate is None
    history = [(0.5, True)] * WINDOW + [(0.5, False)] * WINDOW  # the old ones fell out
    gate = ConfidenceGate(base=0.5, enabled=True, history=history)
    assert gate.rate == 0.0
    assert gate.decide(0.5).estimate == pytest.approx(PRIOR * 0.5 / (WINDOW + PRIOR), abs=1e-3)


def test_outcomes_come_from_accepted_and_ignored_suggestion_events_with_their_confidence():
    events: list[dict] = [
        {"event": "suggestion", "outcome": "shown", "confidence": 0.9},
        {"event": "suggestion", "outcome": "accepted", "confidence": 0.7},
        {"event": "speculation", "outcome": "accepted"},
        {"event": "suggestion", "outcome": "ignored"},
        {"event": "suggestion", "outcome": "ignored", "confidence": True},
        {"event": "suggestion", "outcome": "ignored", "confidence": 7},
        {"event": "suggestion", "outcome": "suppressed"},
    ]
    assert outcomes(events) == [(0.7, True), (None, False), (None, False), (None, False)]


def test_the_gate_reads_earlier_sessions_telemetry_and_follows_new_outcomes(tmp_path):
    earlier = Telemetry.for_state_dir(tmp_path)
    for _ in range(RATE_MIN_SAMPLES):
        earlier.record("suggestion", outcome="ignored", confidence=0.6)
    earlier.close()
    telemetry = Telemetry.for_state_dir(tmp_path)
    gate = ConfidenceGate.watching(telemetry, base=0.5, enabled=True)
    assert gate.rate == 0.0
    held = gate.decide(0.6)
    assert not held.speculate and held.threshold == 0.5  # ignored at this confidence before
    for _ in range(3 * RATE_MIN_SAMPLES):
        telemetry.record("suggestion", outcome="accepted", confidence=0.6)
    assert gate.rate == 0.75
    assert gate.decide(0.45).speculate  # accepted since: the estimate rose past the base
