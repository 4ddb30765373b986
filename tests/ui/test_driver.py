"""The driver: a turn's events run in a worker and are rendered, asked and ticked here.

No test sleeps: a generator that must block waits on an Event that the fake renderer sets
from `waiting()`, which the driver calls only while nothing arrives.
"""

from __future__ import annotations

import itertools
import signal
import threading
from collections.abc import Iterator
from concurrent.futures import Future
from typing import Any

import pytest

from qshell.agent.events import (
    Event,
    FailureKind,
    PermissionAnswer,
    PermissionReply,
    PermissionRequested,
    TextDelta,
    TurnFailed,
    TurnFinished,
)
from qshell.cancel import CancelToken
from qshell.llm.messages import Usage
from qshell.ui.driver import drive

DONE = TurnFinished("done", Usage(), 1)
WAIT_S = 10  # upper bound for a blocked generator, only reached when a test is broken


class FakeRenderer:
    """Records every call; `on_waiting` runs on each waiting() tick."""

    def __init__(self, on_waiting=None) -> None:
        self.calls: list[tuple[str, Any]] = []
        self.on_waiting = on_waiting

    def event(self, event: Event) -> None:
        self.calls.append(("event", event))

    def permission(self, request: PermissionRequested) -> None:
        self.calls.append(("permission", request))

    def notice(self, text: str) -> None:
        self.calls.append(("notice", text))

    def say(self, text: str) -> None:
        self.calls.append(("say", text))

    def error(self, text: str) -> None:
        self.calls.append(("error", text))

    def waiting(self, elapsed_s: float) -> None:
        self.calls.append(("waiting", elapsed_s))
        if self.on_waiting is not None:
            self.on_waiting()

    def end_turn(self) -> None:
        self.calls.append(("end_turn", None))

    def expand(self) -> None:
        self.calls.append(("expand", None))

    def without_waiting(self) -> list[tuple[str, Any]]:
        return [c for c in self.calls if c[0] != "waiting"]


def never_ask(request: PermissionRequested) -> PermissionReply:
    raise AssertionError("no question expected")


def request(call_id: str = "c1") -> PermissionRequested:
    future: Future[PermissionReply] = Future()
    return PermissionRequested(call_id, "edit", {"path": "a.txt"}, "edits need approval", future)


def test_events_are_rendered_in_order_and_the_final_one_is_returned():
    events: list[Event] = [TextDelta("a"), TextDelta("b"), DONE]
    renderer = FakeRenderer()
    last = drive(iter(events), renderer, never_ask, CancelToken())
    assert last == DONE
    assert renderer.without_waiting() == [*(("event", e) for e in events), ("end_turn", None)]


def test_a_stream_without_a_final_event_returns_none():
    renderer = FakeRenderer()
    assert drive(iter([TextDelta("x")]), renderer, never_ask, CancelToken()) is None
    assert renderer.calls[-1] == ("end_turn", None)


def test_a_permission_question_is_shown_asked_and_its_future_resolved():
    question = request()
    reply = PermissionReply(PermissionAnswer.DENY, "not that one")
    asked: list[PermissionRequested] = []

    def turn() -> Iterator[Event]:
        yield question
        got = question.future.result(timeout=WAIT_S)
        yield TextDelta(f"told: {got.reason}")
        yield DONE

    def ask(req: PermissionRequested) -> PermissionReply:
        asked.append(req)
        return reply

    renderer = FakeRenderer()
    last = drive(turn(), renderer, ask, CancelToken())
    assert asked == [question] and question.future.result() == reply
    assert renderer.without_waiting() == [
        ("permission", question),
        ("event", TextDelta("told: not that one")),
        ("event", DONE),
        ("end_turn", None),
    ]
    assert last == DONE


def test_a_question_already_settled_is_not_answered_again():
    question = request()

    def turn() -> Iterator[Event]:
        question.future.cancel()  # as a cancel token does while the question is open
        yield question
        yield DONE

    def ask(req: PermissionRequested) -> PermissionReply:
        return PermissionReply(PermissionAnswer.ALLOW_ONCE)

    assert drive(turn(), FakeRenderer(), ask, CancelToken()) == DONE
    assert question.future.cancelled()


def test_waiting_is_called_while_the_turn_is_idle():
    released = threading.Event()
    ticks = itertools.count(0.0, 0.5)

    def turn() -> Iterator[Event]:
        yield TextDelta("thinking")
        released.wait(WAIT_S)
        yield DONE

    renderer = FakeRenderer(on_waiting=released.set)
    last = drive(turn(), renderer, never_ask, CancelToken(), clock=lambda: next(ticks))
    assert last == DONE
    assert renderer.without_waiting() == [
        ("event", TextDelta("thinking")),
        ("event", DONE),
        ("end_turn", None),
    ]
    waits = [value for name, value in renderer.calls if name == "waiting"]
    assert waits and all(elapsed > 0 for elapsed in waits)


def test_a_crashing_generator_becomes_an_error_failure(caplog):
    def turn() -> Iterator[Event]:
        yield TextDelta("half")
        raise RuntimeError("boom")

    renderer = FakeRenderer()
    last = drive(turn(), renderer, never_ask, CancelToken())
    assert isinstance(last, TurnFailed) and last.kind is FailureKind.ERROR
    assert "boom" in last.message
    assert renderer.without_waiting() == [
        ("event", TextDelta("half")),
        ("event", last),
        ("end_turn", None),
    ]
    assert "turn crashed" in caplog.text


def test_ctrl_c_during_a_turn_cancels_its_token_and_the_turn_ends_cancelled():
    cancel = CancelToken()
    interrupted = threading.Event()

    def turn() -> Iterator[Event]:
        yield TextDelta("working")
        if cancel.wait(WAIT_S):
            yield TurnFailed(FailureKind.CANCELLED, "cancelled")
            return
        yield DONE

    def press_ctrl_c() -> None:
        if not interrupted.is_set():
            interrupted.set()
            signal.raise_signal(signal.SIGINT)

    before = signal.getsignal(signal.SIGINT)
    renderer = FakeRenderer(on_waiting=press_ctrl_c)
    last = drive(turn(), renderer, never_ask, cancel)
    assert cancel.cancelled
    assert isinstance(last, TurnFailed) and last.kind is FailureKind.CANCELLED
    assert signal.getsignal(signal.SIGINT) is before


def test_a_second_ctrl_c_stops_waiting_for_a_turn_that_ignores_its_token():
    cancel = CancelToken()
    stuck = threading.Event()

    def turn() -> Iterator[Event]:
        yield TextDelta("stuck")
        stuck.wait(WAIT_S)

    def press_ctrl_c() -> None:
        signal.raise_signal(signal.SIGINT)

    renderer = FakeRenderer(on_waiting=press_ctrl_c)
    try:
        last = drive(turn(), renderer, never_ask, cancel)
    finally:
        stuck.set()
    assert cancel.cancelled
    assert isinstance(last, TurnFailed) and last.kind is FailureKind.CANCELLED
    assert renderer.calls[-1] == ("end_turn", None)


def test_ctrl_c_at_a_permission_question_cancels_the_turn():
    cancel = CancelToken()
    question = request()
    finished = threading.Event()

    def turn() -> Iterator[Event]:
        yield question
        try:
            question.future.result(timeout=WAIT_S)
        finally:
            finished.set()

    def ask(req: PermissionRequested) -> PermissionReply:
        def cancel_question() -> None:
            req.future.cancel()

        cancel.on_cancel(cancel_question)  # what the loop registers for an open question
        raise KeyboardInterrupt

    renderer = FakeRenderer()
    last = drive(turn(), renderer, ask, cancel)
    assert isinstance(last, TurnFailed) and last.kind is FailureKind.CANCELLED
    assert cancel.cancelled and question.future.cancelled()
    assert finished.wait(WAIT_S)
    assert renderer.calls[-1] == ("end_turn", None)


@pytest.mark.parametrize("kind", [FailureKind.AUTH, FailureKind.CANCELLED])
def test_a_failed_turn_is_rendered_and_returned(kind):
    failed = TurnFailed(kind, "it failed")
    renderer = FakeRenderer()
    assert drive(iter([failed]), renderer, never_ask, CancelToken()) == failed
    assert ("event", failed) in renderer.calls
