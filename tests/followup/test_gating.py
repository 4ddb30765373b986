"""The confidence gate: the threshold rule (base, moved by the acceptance rate, within
bounds), the rate read from telemetry and followed live, and the cases it does not gate."""

from __future__ import annotations

import pytest

from qshell.followup.gating import (
    MIN_SAMPLES,
    SPAN,
    WINDOW,
    ConfidenceGate,
    outcomes,
    threshold,
)
from qshell.telemetry import Telemetry


def test_the_threshold_is_the_base_until_a_rate_is_measured_and_at_the_target_rate():
    assert threshold(0.5, None) == 0.5
    assert threshold(0.5, 0.5) == pytest.approx(0.5)


def test_a_low_acceptance_rate_raises_the_threshold_and_a_high_one_lowers_it():
    assert threshold(0.5, 0.1) > threshold(0.5, 0.3) > 0.5
    assert threshold(0.5, 0.9) < threshold(0.5, 0.7) < 0.5


@pytest.mark.parametrize("base", [0.0, 0.1, 0.5, 0.9, 1.0])
@pytest.mark.parametrize("rate", [0.0, 0.25, 0.5, 0.75, 1.0])
def test_the_threshold_stays_within_the_base_plus_or_minus_the_span_and_0_to_1(base, rate):
    bar = threshold(base, rate)
    assert max(0.0, base - SPAN) - 1e-9 <= bar <= min(1.0, base + SPAN) + 1e-9


def test_unknown_confidence_or_gating_off_always_speculates():
    gate = ConfidenceGate(base=0.9, enabled=True)
    assert gate.decide(None).speculate and not gate.decide(None).gated
    off = ConfidenceGate(base=0.9, enabled=False)
    assert off.decide(0.01).speculate and not off.decide(0.01).gated


def test_a_confidence_below_the_threshold_is_gated_and_one_at_it_is_not():
    gate = ConfidenceGate(base=0.5, enabled=True)
    assert not gate.decide(0.49).speculate
    decision = gate.decide(0.5)
    assert decision.speculate and decision.gated and decision.threshold == 0.5


def test_the_rate_needs_enough_outcomes_and_counts_only_the_last_window():
    assert ConfidenceGate(base=0.5, enabled=True, history=[True] * (MIN_SAMPLES - 1)).rate is None
    history = [True] * WINDOW + [False] * WINDOW  # the old acceptances fell out of the window
    assert ConfidenceGate(base=0.5, enabled=True, history=history).rate == 0.0


def test_outcomes_come_from_accepted_and_ignored_suggestion_events_only():
    events = [
        {"event": "suggestion", "outcome": "shown"},
        {"event": "suggestion", "outcome": "accepted"},
        {"event": "speculation", "outcome": "accepted"},
        {"event": "suggestion", "outcome": "ignored"},
        {"event": "suggestion", "outcome": "suppressed"},
    ]
    assert outcomes(events) == [True, False]


def test_the_gate_reads_earlier_sessions_telemetry_and_follows_new_outcomes(tmp_path):
    earlier = Telemetry.for_state_dir(tmp_path)
    for _ in range(MIN_SAMPLES):
        earlier.record("suggestion", outcome="ignored")
    earlier.close()
    telemetry = Telemetry.for_state_dir(tmp_path)
    gate = ConfidenceGate.watching(telemetry, base=0.5, enabled=True)
    assert gate.rate == 0.0
    raised = gate.decide(0.6)
    assert not raised.speculate and raised.threshold == 0.5 + SPAN  # a rarely accepting user
    for _ in range(3 * MIN_SAMPLES):
        telemetry.record("suggestion", outcome="accepted")
    assert gate.rate == 0.75
    assert gate.decide(0.45).speculate  # accepting more lowered the bar below the base
