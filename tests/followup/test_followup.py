"""Followup wired to a Conversation: guards from the session, generation, transcript notes."""

from __future__ import annotations

import json
import threading

import pytest

from qshell.agent.events import FailureKind, TurnFailed
from qshell.config import ApprovalMode, load_settings
from qshell.followup.followup import Followup
from qshell.followup.gating import BACKOFF_AFTER
from qshell.followup.suggestion import SUGGESTION_MARKER
from qshell.llm.messages import Message
from qshell.telemetry import Telemetry, read_events
from tests.agent.scripted import call
from tests.agent.test_conversation import consume, make_conversation
from tests.followup.test_controller import FakeClock, FakeScheduler
from tests.waiting import wait_until

READ = Message.assistant("", [call("ls", "{}", "l1")])


class SignallingScheduler(FakeScheduler):
    """A fake scheduler that also signals when something was scheduled (from any thread)."""

    def __init__(self, clock: FakeClock) -> None:
        super().__init__(clock)
        self.scheduled = threading.Event()

    def call_later(self, delay_s, fn):
        timer = super().call_later(delay_s, fn)
        self.scheduled.set()
        return timer


class Shown:
    """Collects on_change values; `wait()` until a text arrives."""

    def __init__(self) -> None:
        self.values: list[str | None] = []
        self.arrived = threading.Event()

    def __call__(self, text: str | None) -> None:
        self.values.append(text)
        if text:
            self.arrived.set()


@pytest.fixture
def rig(tmp_path):
    setup = make_conversation(tmp_path)
    settings = load_settings(
        project_root=setup.root,
        # speculation has its own tests
        environ={"QSHELL_HOME": str(tmp_path / "q"), "QSHELL_SPECULATION": "0"},
    )
    clock = FakeClock()
    scheduler = SignallingScheduler(clock)
    shown = Shown()
    telemetry = Telemetry(tmp_path / "events.jsonl")
    followup = Followup(
        setup.conversation,
        settings,
        on_change=shown,
        telemetry=telemetry,
        scheduler=scheduler,
    )
    yield setup, followup, shown, scheduler, tmp_path / "events.jsonl"
    followup.close()


def outcomes(path) -> list[tuple[str, str | None]]:
    return [(e["outcome"], e["reason"]) for e in read_events(path)]


def test_a_turn_with_two_assistant_messages_gets_a_suggestion(rig):
    setup, followup, shown, scheduler, events = rig
    setup.script(READ, Message.assistant("listed"), Message.assistant("run the tests"))
    last = consume(setup.conversation.turn("list files"))[-1]
    followup.turn_ended(last)
    assert scheduler.scheduled.wait(5)  # generation ran in the pool and scheduled the show
    scheduler.advance(1.0)
    assert shown.arrived.wait(5) and followup.visible_text == "run the tests"
    fork = setup.provider.requests[-1]
    assert SUGGESTION_MARKER in fork.messages[-1].text
    assert fork.messages[:-1] == [
        *setup.provider.requests[-2].messages,
        Message.assistant("listed"),
    ]
    assert followup.submitted("run the tests") == "run the tests"
    notes = [
        json.loads(line)
        for line in setup.conversation.session.transcript.path.read_text().splitlines()
    ]
    assert {"type": "suggestion", "shown": "run the tests", "accepted": True}.items() <= notes[
        -1
    ].items()
    assert ("accepted", None) in [(o, None) for o, _ in outcomes(events)]


def test_one_assistant_message_is_too_early(rig):
    setup, followup, _, _, events = rig
    setup.script(Message.assistant("hi"))
    followup.turn_ended(consume(setup.conversation.turn("hello"))[-1])
    assert outcomes(events) == [("suppressed", "early_conversation")]
    assert len(setup.provider.requests) == 1


@pytest.mark.parametrize(
    ("last", "reason"),
    [
        (TurnFailed(FailureKind.UNAVAILABLE, "down"), "last_turn_error"),
        (TurnFailed(FailureKind.CANCELLED, "cancelled"), "aborted"),
        (None, "aborted"),
    ],
)
def test_failed_or_cancelled_turns_get_no_suggestion(rig, last, reason):
    setup, followup, _, _, events = rig
    setup.script(READ, Message.assistant("listed"))
    consume(setup.conversation.turn("list files"))
    followup.turn_ended(last)
    assert outcomes(events) == [("suppressed", reason)]


def test_plan_mode_gets_no_suggestion(rig):
    setup, followup, _, _, events = rig
    setup.script(READ, Message.assistant("listed"))
    last = consume(setup.conversation.turn("list files"))[-1]
    setup.conversation.set_approval_mode(ApprovalMode.PLAN)
    followup.turn_ended(last)
    assert outcomes(events) == [("suppressed", "plan_mode")]


def test_the_environment_switch_turns_suggestions_off(tmp_path):
    setup = make_conversation(tmp_path)
    settings = load_settings(
        project_root=setup.root,
        environ={"QSHELL_HOME": str(tmp_path / "q"), "QSHELL_SUGGESTIONS": "0"},
    )
    followup = Followup(
        setup.conversation,
        settings,
        on_change=Shown(),
        telemetry=Telemetry(tmp_path / "e.jsonl"),
    )
    setup.script(READ, Message.assistant("listed"))
    followup.turn_ended(consume(setup.conversation.turn("list files"))[-1])
    followup.close()
    assert outcomes(tmp_path / "e.jsonl") == [("suppressed", "disabled")]


def test_after_eight_ignored_suggestions_one_is_asked_for_every_other_turn_until_taken(
    rig,
):
    setup, followup, shown, scheduler, events = rig
    for _ in range(BACKOFF_AFTER):  # as telemetry tells the gate, from this session or before
        followup.gate.observed("suggestion", {"outcome": "ignored", "kind": "show"})

    def turn(prompt: str, *suggested: Message) -> None:
        setup.script(READ, Message.assistant("listed"), *suggested)
        followup.turn_ended(consume(setup.conversation.turn(prompt))[-1])

    def asked() -> int:
        return sum(SUGGESTION_MARKER in r.messages[-1].text for r in setup.provider.requests)

    turn("list files")
    assert wait_until(lambda: ("suppressed", "backoff") in outcomes(events))
    assert asked() == 0
    turn("list files again", Message.assistant("run the tests"))
    assert scheduler.scheduled.wait(5)
    scheduler.advance(1.0)
    assert shown.arrived.wait(5) and asked() == 1
    followup.submitted("run the tests")  # taken: every turn again
    assert followup.gate.ask_gap() == 1
