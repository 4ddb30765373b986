"""SuggestionFlights: one request per context, joined or reused; ended when nobody needs it.

The request is a fake that blocks until the test lets it answer (or its token is
cancelled) and counts its calls; callers run on threads. Every wait is bounded; nothing
asserts on elapsed time.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest

from qshell.cancel import CancelToken
from qshell.followup.flights import SuggestionContext, SuggestionFlights
from qshell.followup.suggestion import SuggestionResult
from qshell.llm.fork import CacheSafeParams
from qshell.llm.messages import ChatRequest, Message

WAIT_S = 10.0


class Gate:
    """The fake request: waits for `answer()` or its cancel, counting calls per context."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.started = threading.Semaphore(0)
        self.go = threading.Event()
        self.tokens: list[CancelToken] = []

    def __call__(self, context: SuggestionContext, cancel: CancelToken) -> SuggestionResult:
        self.calls.append(context.params.reply.text)
        self.tokens.append(cancel)
        self.started.release()
        cancel.on_cancel(self.go.set)
        self.go.wait(WAIT_S)
        if cancel.cancelled:
            return SuggestionResult(None, "aborted", None)
        return SuggestionResult("run the tests", None, None)

    def wait_started(self) -> None:
        assert self.started.acquire(timeout=WAIT_S)


def context(reply: str = "done", previous: str = "") -> SuggestionContext:
    request = ChatRequest(model="m1", system="sys", messages=[Message.user("fix it")])
    params = CacheSafeParams.capture(request, Message.assistant(reply))
    return SuggestionContext(provider=None, params=params, model=None, previous_prompt=previous)  # type: ignore[arg-type]


class Caller:
    """`flights.get(...)` on a thread of its own."""

    def __init__(self, call: Callable[[], SuggestionResult]) -> None:
        self.result: SuggestionResult | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)
        self._call = call
        self.thread.start()

    def _run(self) -> None:
        self.result = self._call()

    def join(self) -> SuggestionResult:
        self.thread.join(WAIT_S)
        assert not self.thread.is_alive() and self.result is not None
        return self.result


@pytest.fixture
def gate() -> Gate:
    return Gate()


def test_a_second_caller_for_the_same_context_joins_the_request_in_flight(gate):
    flights = SuggestionFlights(gate)
    first = Caller(lambda: flights.get(context(), CancelToken()))
    gate.wait_started()
    second = Caller(lambda: flights.get(context(), CancelToken()))
    gate.go.set()
    assert first.join().text == second.join().text == "run the tests"
    assert gate.calls == ["done"]


def test_a_finished_result_is_reused_and_another_context_asks_again(gate):
    gate.go.set()
    flights = SuggestionFlights(gate)
    assert flights.get(context(), CancelToken()).text == "run the tests"
    assert flights.get(context(), CancelToken()).text == "run the tests"
    flights.get(context("other reply"), CancelToken())
    flights.get(context(previous="Ship  It"), CancelToken())
    flights.get(context(previous="ship it"), CancelToken())  # compared as the filter does
    assert gate.calls == ["done", "other reply", "done"]


def test_the_last_waiter_cancelled_ends_the_request_and_an_aborted_result_is_not_reused(gate):
    flights = SuggestionFlights(gate)
    cancel = CancelToken()
    caller = Caller(lambda: flights.get(context(), cancel))
    gate.wait_started()
    cancel.cancel()
    assert caller.join().reason == "aborted"
    assert gate.tokens[0].cancelled
    gate.go.clear()
    again = Caller(lambda: flights.get(context(), CancelToken()))
    gate.wait_started()
    gate.go.set()
    assert again.join().text == "run the tests"
    assert len(gate.calls) == 2


def test_a_waiter_that_leaves_does_not_end_a_request_others_wait_for(gate):
    flights = SuggestionFlights(gate)
    leaving = CancelToken()
    owner = Caller(lambda: flights.get(context(), CancelToken()))
    gate.wait_started()
    joined = Caller(lambda: flights.get(context(), leaving))
    leaving.cancel()
    assert joined.join().reason == "aborted"
    assert not gate.tokens[0].cancelled
    gate.go.set()
    assert owner.join().text == "run the tests"


def test_a_request_whose_first_caller_never_cancels_runs_until_it_is_dropped(gate):
    flights = SuggestionFlights(gate)
    pinned = Caller(lambda: flights.get(context(), CancelToken()))
    gate.wait_started()
    leaving = CancelToken()
    joined = Caller(lambda: flights.get(context(), leaving))
    leaving.cancel()
    joined.join()
    assert not gate.tokens[0].cancelled
    flights.keep_only([context("another context")])
    assert gate.tokens[0].cancelled
    assert pinned.join().reason == "aborted"


def test_keep_only_keeps_the_named_context(gate):
    flights = SuggestionFlights(gate)
    kept = Caller(lambda: flights.get(context(), CancelToken()))
    gate.wait_started()
    flights.keep_only([context()])
    assert not gate.tokens[0].cancelled
    flights.drop(context())
    assert gate.tokens[0].cancelled
    assert kept.join().reason == "aborted"


def test_close_ends_every_request_and_starts_no_more(gate):
    flights = SuggestionFlights(gate)
    running = Caller(lambda: flights.get(context(), CancelToken()))
    gate.wait_started()
    flights.close()
    assert running.join().reason == "aborted"
    assert flights.get(context("later"), CancelToken()).reason == "aborted"
    assert gate.calls == ["done"]


def test_a_request_no_longer_wanted_is_never_sent(gate):
    flights = SuggestionFlights(gate)
    result = flights.get(context(), CancelToken(), still_wanted=lambda: False)
    assert result.reason == "aborted" and gate.calls == []
