"""Speculator.start against the user's verbs: a speculation whose suggestion went stale while
it was being set up never runs, and a start that cannot be submitted leaves no overlay; a
completed speculation pipelines its next suggestion only when the guards would show it."""

from __future__ import annotations

import os
import tempfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from qshell.cancel import CancelToken
from qshell.config import Settings, load_settings
from qshell.followup.flights import SuggestionFlights
from qshell.followup.followup import Followup
from qshell.followup.speculator import Speculator
from qshell.followup.suggestion import SUGGESTION_MARKER
from qshell.llm.base import StreamDone, StreamEvent
from qshell.llm.messages import ChatRequest, Message, Usage
from qshell.telemetry import Telemetry
from tests.agent.scripted import call
from tests.agent.test_conversation import consume
from tests.followup.helpers import answered_conversation
from tests.followup.test_controller import FakeClock, FakeScheduler

SUGGESTION = "run the tests"
WAIT_S = 10.0
READ = Message.assistant("", [call("ls", "{}", "l1")])


@pytest.fixture
def setup(tmp_path, monkeypatch):
    setup = answered_conversation(tmp_path, monkeypatch)
    return setup


def overlays() -> list[Path]:
    base = Path(tempfile.gettempdir()) / f"qshell-speculation-{os.getuid()}"
    return [p for p in base.rglob("overlay-*")] if base.is_dir() else []


def speculator(setup, submit) -> Speculator:
    telemetry = Telemetry(setup.root.parent / "events.jsonl")
    return Speculator(setup.conversation, Settings(), submit_task=submit, telemetry=telemetry)


def test_a_suggestion_that_went_stale_during_set_up_is_never_speculated(setup):
    submitted: list[object] = []
    spec = speculator(setup, submitted.append)
    spec.start(SUGGESTION, still_wanted=lambda: False)
    assert submitted == [] and overlays() == []
    assert spec.take(SUGGESTION) is None


def test_a_speculation_of_text_the_user_typed_away_from_is_never_started(setup):
    submitted: list[object] = []
    spec = speculator(setup, submitted.append)
    spec.user_typed("git")  # the line no longer starts the suggestion
    spec.start(SUGGESTION)
    assert submitted == [] and overlays() == []


def test_a_start_the_closing_pool_refuses_leaves_no_overlay_behind(setup):
    def closed(task):
        raise RuntimeError("cannot schedule new futures after shutdown")

    spec = speculator(setup, closed)
    spec.start(SUGGESTION)
    assert overlays() == []
    assert spec.take(SUGGESTION) is None


def test_submitting_other_text_while_a_speculation_is_set_up_drops_it(setup, tmp_path):
    """The generation thread hands the suggestion over, then the user submits something
    else before the speculation is registered: it must not start afterwards."""
    settings = load_settings(
        project_root=setup.root,
        environ={"QSHELL_HOME": str(tmp_path / "q"), "QSHELL_SPECULATION": "1"},
    )
    followup = Followup(
        setup.conversation,
        settings,
        on_change=lambda text: None,
        telemetry=Telemetry(tmp_path / "ev.jsonl"),
        scheduler=FakeScheduler(FakeClock()),
    )
    real_start = followup.speculator.start
    handed_over, go_on, finished = threading.Event(), threading.Event(), threading.Event()

    def slow_start(
        suggestion: str, still_wanted: Callable[[], bool] = lambda: True, **options: Any
    ) -> None:
        handed_over.set()
        go_on.wait(WAIT_S)  # the set-up is still running when the user submits
        real_start(suggestion, still_wanted, **options)
        finished.set()

    followup.speculator.start = slow_start  # type: ignore[method-assign]
    try:
        setup.script(READ, Message.assistant("listed"), Message.assistant(SUGGESTION))
        followup.turn_ended(consume(setup.conversation.turn("list files"))[-1])
        assert handed_over.wait(WAIT_S)
        followup.submitted("something else entirely")
        go_on.set()
        assert finished.wait(WAIT_S)
        assert followup.speculator.take(SUGGESTION) is None
        assert overlays() == []
    finally:
        go_on.set()
        followup.close()


@pytest.mark.parametrize(("cached", "pipelined"), [(49_000, 1), (0, 0)], ids=["warm", "cold"])
def test_a_completed_speculation_pipelines_only_a_suggestion_the_guards_would_show(
    setup, tmp_path, cached, pipelined
):
    """Its last round left 50,000 prompt tokens: with `cached` of them read from the cache.
    Cold, the guard would suppress the suggestion after the accepted turn, so none is asked."""

    def answer(request: ChatRequest, cancel: CancelToken) -> Iterator[StreamEvent]:
        usage = Usage(prompt_tokens=50_000, completion_tokens=5, cached_tokens=cached)
        yield StreamDone(Message.assistant("all 12 tests pass"), usage, "end_turn")

    setup.script(answer, Message.assistant("commit this"))
    followup = Followup(
        setup.conversation,
        load_settings(project_root=setup.root, environ={"QSHELL_HOME": str(tmp_path / "q")}),
        on_change=lambda text: None,
        telemetry=Telemetry(tmp_path / "ev.jsonl"),
        scheduler=FakeScheduler(FakeClock()),
    )
    spec = Speculator(
        setup.conversation,
        Settings(),
        submit_task=lambda task: task(),  # the run, and its pipelining, happen right here
        telemetry=Telemetry(tmp_path / "ev2.jsonl"),
        flights=SuggestionFlights(),
        may_pipeline=followup.may_pipeline,
    )
    try:
        spec.start(SUGGESTION)
        asked = [r for r in setup.provider.requests if SUGGESTION_MARKER in r.messages[-1].text]
        assert len(asked) == pipelined
        taken = spec.take(SUGGESTION)
        assert taken is not None
        taken.release()
    finally:
        followup.close()
