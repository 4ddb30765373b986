"""The confidence gate: the acceptance estimate (the model's confidence until this user's
outcomes of about that confidence say otherwise), the outcomes read from telemetry and
followed live, and the cases it does not gate."""

from __future__ import annotations

import pytest

from qshell.followup.gating import (
    BACKOFF_AFTER,
    KIND_MIN,
    MAX_GAP,
    NEAR,
    NEUTRAL,
    PRIOR,
    RATE_MIN_SAMPLES,
    WINDOW,
    ConfidenceGate,
    estimate,
    outcomes,
)
from qshell.followup.gating import PastGuess as G
from qshell.followup.states import Stage
from qshell.telemetry import Telemetry


def test_with_no_outcomes_the_estimate_is_the_models_confidence():
    for confidence in (0.0, 0.3, 0.9):
        assert estimate(confidence, []) == pytest.approx(confidence)


def test_ignored_suggestions_of_about_that_confidence_lower_it_and_accepted_ones_raise_it():
    ignored = [G(0.6, False)] * 4
    taken = [G(0.6, True)] * 4
    assert estimate(0.6, ignored) == pytest.approx((PRIOR * 0.6) / (4 + PRIOR))
    assert estimate(0.6, taken) == pytest.approx((4 + PRIOR * 0.6) / (4 + PRIOR))
    assert estimate(0.6, ignored) < 0.6 < estimate(0.6, taken)


def test_only_outcomes_near_the_confidence_count():
    far = [G(0.6 + NEAR + 0.01, False), G(0.6 - NEAR - 0.01, False), G(None, False)] * 5
    assert estimate(0.6, far) == pytest.approx(0.6)


def test_a_user_who_takes_confident_suggestions_and_ignores_the_rest_keeps_the_confident_ones():
    history = [G(0.9, True)] * 5 + [G(0.2, False)] * 15  # 25 % accepted overall
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


def test_unknown_confidence_is_staged_until_its_kind_has_outcomes_and_gating_off_runs_whole():
    gate = ConfidenceGate(base=0.9, enabled=True)
    unknown = gate.decide(None)
    assert unknown.stage is Stage.STAGED and unknown.gated and unknown.estimate == NEUTRAL
    off = ConfidenceGate(base=0.9, enabled=False)
    assert off.decide(0.01).stage is Stage.FULL and not off.decide(0.01).gated


def test_an_estimate_below_the_base_is_gated_and_one_at_it_is_not():
    gate = ConfidenceGate(base=0.5, enabled=True)
    assert not gate.decide(0.49).speculate
    decision = gate.decide(0.5)
    assert decision.speculate and decision.gated and decision.threshold == 0.5
    assert decision.estimate == 0.5


def test_the_rate_needs_enough_outcomes_and_only_the_last_window_counts():
    few = [G(0.5, True)] * (RATE_MIN_SAMPLES - 1)
    assert ConfidenceGate(base=0.5, enabled=True, history=few).rate is None
    history = [G(0.5, True)] * WINDOW + [G(0.5, False)] * WINDOW  # the old ones fell out
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
    assert outcomes(events) == [G(0.7, True), G(None, False), G(None, False), G(None, False)]


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


def test_the_chance_decides_the_stage_whole_staged_or_none():
    gate = ConfidenceGate(base=0.35, enabled=True, full=0.7)
    assert gate.decide(0.2, "edit").stage is Stage.NONE
    assert gate.decide(0.2, "edit").reason == "confidence"
    assert gate.decide(0.5, "edit").stage is Stage.STAGED
    assert gate.decide(0.7, "edit").stage is Stage.FULL
    whole = ConfidenceGate(base=0.35, enabled=True, full=0.7, staged=False)
    assert whole.decide(0.5, "edit").stage is Stage.FULL
    assert whole.decide(0.2, "edit").stage is Stage.NONE


def test_a_kind_never_taken_stops_being_speculated_whatever_the_confidence():
    ignored = [G(0.9, False, "explain")] * KIND_MIN
    gate = ConfidenceGate(base=0.35, enabled=True, history=ignored + [G(0.9, True, "edit")] * 9)
    held = gate.decide(0.95, "explain")
    assert held.stage is Stage.NONE and held.reason == "kind_never_taken"
    assert gate.decide(None, "explain").stage is Stage.NONE
    assert gate.decide(0.95, "edit").stage is Stage.FULL  # other kinds are not held back
    fewer = ConfidenceGate(base=0.35, enabled=True, history=ignored[1:])
    assert fewer.decide(None, "explain").stage is Stage.STAGED
    gate.observed("suggestion", {"outcome": "accepted", "confidence": 0.9, "kind": "explain"})
    assert gate.decide(0.95, "explain").speculate  # taken once: back in


def test_without_a_confidence_this_users_outcomes_with_the_kind_decide_once_there_are_enough():
    taken = [G(None, True, "show")] * 4 + [G(None, False, "show")]
    rare = [G(None, True, "search")] + [G(None, False, "search")] * 6
    gate = ConfidenceGate(base=0.35, enabled=True, full=0.7, history=taken + rare)
    show = gate.decide(None, "show")
    assert show.stage is Stage.FULL and show.estimate == round((4 + 2 * NEUTRAL) / 7, 3)
    search = gate.decide(None, "search")
    assert search.stage is Stage.NONE and search.reason == "confidence"


def test_a_kind_whose_first_step_is_slow_is_speculated_from_a_lower_chance():
    gate = ConfidenceGate(base=0.4, enabled=True)
    tests = gate.decide(0.25, "test")  # tests are slow until measured otherwise
    assert tests.slow and tests.threshold == 0.2 and tests.stage is Stage.STAGED
    assert gate.decide(0.25, "edit").stage is Stage.NONE
    for ms in (40, 60):  # this project's tests turned out quick
        gate.observed("speculation", {"kind": "test", "first_step_ms": ms})
    assert not gate.slow("test") and gate.decide(0.25, "test").stage is Stage.NONE
    for ms in (9000, 12000, 7000):  # and its edits start with a slow build
        gate.observed("speculation", {"kind": "edit", "first_step_ms": ms})
    assert gate.slow("edit") and gate.decide(0.25, "edit").stage is Stage.STAGED


def test_kinds_and_first_steps_are_read_from_earlier_sessions(tmp_path):
    earlier = Telemetry.for_state_dir(tmp_path)
    for _ in range(KIND_MIN):
        earlier.record("suggestion", outcome="ignored", kind="git")
    earlier.record("speculation", outcome="accepted", kind="run", first_step_ms=8000)
    earlier.record("speculation", outcome="aborted", kind="run", first_step_ms=6000)
    earlier.close()
    gate = ConfidenceGate.watching(Telemetry.for_state_dir(tmp_path), base=0.35, enabled=True)
    assert gate.decide(None, "git").reason == "kind_never_taken"
    assert gate.slow("run") and not gate.slow("edit")


def test_suggestion_requests_space_out_as_more_are_ignored_in_a_row_and_one_taken_resets():
    gate = ConfidenceGate(base=0.35, enabled=True)
    gaps = []
    for _ in range(BACKOFF_AFTER + 4):
        gaps.append(gate.ask_gap())
        gate.observed("suggestion", {"outcome": "ignored", "kind": "edit"})
    assert gaps == [1] * BACKOFF_AFTER + [2, 4, MAX_GAP, MAX_GAP] and MAX_GAP == 4
    gate.observed("suggestion", {"outcome": "shown", "kind": "edit"})  # not an outcome
    assert gate.ask_gap() == MAX_GAP
    gate.observed("suggestion", {"outcome": "accepted", "kind": "edit"})
    assert gate.ask_gap() == 1
    never = ConfidenceGate(base=0.35, enabled=True, backoff=False)
    for _ in range(2 * BACKOFF_AFTER):
        never.observed("suggestion", {"outcome": "ignored"})
    assert never.ask_gap() == 1


def test_staged_off_runs_a_suggestion_without_confidence_whole_too():
    """README: `staged: false` runs every speculated suggestion whole — one with no
    confidence and few outcomes of its kind included."""
    gate = ConfidenceGate(base=0.35, enabled=True, staged=False)
    assert gate.decide(None, "edit").stage is Stage.FULL
    assert ConfidenceGate(base=0.35, enabled=True).decide(None, "edit").stage is Stage.STAGED
