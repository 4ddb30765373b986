"""What the user does with a suggestion reaches its staged speculation: typing its start
or Tab (Followup.fill) lets the held run go on, typing away aborts it, and the speculation's
telemetry says its kind, its stage, what let it go on and how long its first step took."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest

from qshell.config import Settings
from qshell.followup.followup import Followup
from qshell.followup.speculation import Speculation
from qshell.followup.speculator import Speculator
from qshell.followup.states import Stage, Status
from qshell.llm.messages import Message
from qshell.telemetry import Telemetry, read_events
from tests.agent.scripted import call
from tests.followup.helpers import answered_conversation
from tests.followup.test_controller import FakeClock, FakeScheduler
from tests.waiting import wait_until

SUGGESTION = "run the tests"
WAIT_S = 10.0
LISTING = Message.assistant("", [call("ls", "{}", "l1")])


@pytest.fixture
def setup(tmp_path, monkeypatch):
    return answered_conversation(tmp_path, monkeypatch)


def held(setup, tmp_path, **settings: object) -> tuple[Speculator, Speculation, list]:
    """A speculator whose staged speculation of SUGGESTION is held after its listing."""
    setup.script(LISTING, Message.assistant("12 passed"))
    started: list[Callable[[], None]] = []

    def submit(task: Callable[[], None]) -> None:
        started.append(task)
        threading.Thread(target=task, daemon=True).start()

    speculator = Speculator(
        setup.conversation,
        Settings(speculation={"dwell_ms": 60_000, **settings}),
        submit_task=submit,
        telemetry=Telemetry(tmp_path / "events.jsonl"),
    )
    speculator.start(SUGGESTION, stage=Stage.STAGED, kind="test")
    spec = started[0].__self__  # type: ignore[attr-defined]
    assert isinstance(spec, Speculation)
    assert wait_until(lambda: spec.holding, WAIT_S)
    return speculator, spec, started


def test_typing_the_start_of_the_suggestion_lets_its_staged_run_go_on(setup, tmp_path):
    speculator, spec, _ = held(setup, tmp_path)
    speculator.user_typed("run the")
    assert spec.done.wait(WAIT_S) and spec.status is Status.COMPLETED
    assert spec.resumed_by == "typed"
    assert speculator.take(SUGGESTION) is spec


def test_typing_away_aborts_it_and_the_record_says_what_it_was(setup, tmp_path):
    speculator, spec, _ = held(setup, tmp_path)
    speculator.user_typed("git st")
    assert spec.done.wait(WAIT_S) and spec.status is Status.ABORTED
    path = tmp_path / "events.jsonl"
    [event] = wait_until(lambda: [e for e in read_events(path) if e["event"] == "speculation"])
    assert (event["outcome"], event["kind"], event["stage"]) == ("aborted", "test", "staged")
    assert event["resumed_by"] is None and event["first_step_ms"] >= 0
    assert event["rounds"] == 1  # the answer's round was never asked for


def test_tab_lets_the_held_run_go_on(setup, tmp_path):
    speculator, spec, _ = held(setup, tmp_path)
    followup = followup_over(setup, tmp_path, speculator, SUGGESTION)
    try:
        assert followup.fill("tab") == SUGGESTION
        assert spec.done.wait(WAIT_S) and spec.status is Status.COMPLETED
        assert spec.resumed_by == "tab"
    finally:
        followup.close()


def followup_over(setup, tmp_path, speculator: Speculator, filled: str) -> Followup:
    """A Followup driving `speculator`, whose controller fills `filled`."""
    followup = Followup(
        setup.conversation,
        Settings(),
        on_change=lambda text: None,
        telemetry=Telemetry(tmp_path / "ev.jsonl"),
        scheduler=FakeScheduler(FakeClock()),
    )
    followup.speculator = speculator
    followup.controller.fill = lambda method, index=None: filled  # type: ignore[method-assign]
    return followup


def test_filling_another_candidate_is_no_intent_for_the_one_held(setup, tmp_path):
    """Plain mode's `.2` (or Tab within the delay after Alt-]) fills a candidate whose own
    speculation has not started: the held one, of the candidate not taken, stays held."""
    speculator, spec, _ = held(setup, tmp_path)
    followup = followup_over(setup, tmp_path, speculator, "run the linter")
    try:
        assert followup.fill("dot", 1) == "run the linter"
        assert spec.holding and spec.resumed_by is None
    finally:
        followup.close()
    assert spec.done.wait(WAIT_S) and spec.status is Status.ABORTED


def test_a_dismissed_suggestions_held_run_does_not_go_on_by_the_dwell_time(setup, tmp_path):
    """Esc: the suggestion is off the screen, so its dwell time no longer counts; typing it
    by hand is still intent."""
    speculator, spec, _ = held(setup, tmp_path, dwell_ms=300)
    followup = followup_over(setup, tmp_path, speculator, SUGGESTION)
    try:
        followup.dismiss()
        wait_until(lambda: spec.clock() > spec.started_at + 1.0)
        assert spec.holding and not spec.done.is_set()
        followup.user_typed("run")
        assert spec.done.wait(WAIT_S) and spec.status is Status.COMPLETED
        assert spec.resumed_by == "typed"
    finally:
        followup.close()
