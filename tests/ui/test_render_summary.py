"""A summary streaming in background (D3), as the rich renderer draws it and the driver
hands it over: its text stays one live block until the turn ends, a cancel takes it off
the screen whole and says so in one dim line, a finished one settles exactly as any answer
does; `follow` detaches at `SummaryStarted` and the rest can be taken or followed."""

from __future__ import annotations

import threading
from collections.abc import Iterator

from qshell.agent.events import (
    Event,
    FailureKind,
    RoundFinished,
    SummaryStarted,
    TentativeText,
    TextDelta,
    TextWithdrawn,
    ToolFinished,
    ToolStarted,
    TurnFailed,
    TurnFinished,
)
from qshell.cancel import CancelToken
from qshell.llm.messages import Usage
from qshell.tools.base import ToolResult
from qshell.ui.driver import RunningTurn, follow, start
from qshell.ui.live import FRAME_S
from qshell.ui.render_rich import SUMMARY_DROPPED
from qshell.ui.repl import cancels_summary
from tests.ui.test_driver import FakeRenderer, never_ask
from tests.ui.test_live import block_at_a_time, live_renderer, words

TOOL: list[Event] = [
    ToolStarted("c1", "read_file", {"path": "a.txt"}),
    ToolFinished("c1", "read_file", ToolResult("hi", display="Read 1 lines from a.txt")),
]
SUMMARY = "First paragraph of the summary.\n\nSecond paragraph, still coming"
CANCELLED = TurnFailed(FailureKind.CANCELLED, "cancelled")
FINISHED = TurnFinished(SUMMARY, Usage(), 2)


def test_a_cancelled_summary_leaves_the_screen_and_one_dim_line_says_so() -> None:
    renderer, term, clock = live_renderer(rows=24)
    for event in [*TOOL, SummaryStarted(round=2), *words(SUMMARY)]:
        clock.now += FRAME_S
        renderer.event(event)
    clock.now += FRAME_S
    renderer.tick()
    assert "paragraph," in " ".join(term.read())  # it was on screen while it streamed
    renderer.event(CANCELLED)
    renderer.end_turn()
    screen = term.read()
    assert not any("paragraph" in line for line in screen)
    assert screen[-1] == SUMMARY_DROPPED
    assert any("Read 1 lines from a.txt" in line for line in screen)  # the results stay


def test_a_finished_summary_settles_as_any_answer_does() -> None:
    renderer, term, clock = live_renderer(rows=24)
    events: list[Event] = [*TOOL, *words(SUMMARY), RoundFinished(2, Usage()), FINISHED]
    for event in [*TOOL, SummaryStarted(round=2), *events[len(TOOL) :]]:
        clock.now += FRAME_S
        renderer.event(event)
    renderer.end_turn()
    assert term.read() == block_at_a_time(events)


def test_off_a_terminal_a_cancelled_summary_prints_none_of_its_text() -> None:
    events: list[Event] = [*TOOL, SummaryStarted(round=2), *words(SUMMARY), CANCELLED]
    screen = block_at_a_time(events)
    assert not any("paragraph" in line for line in screen)
    assert screen[-1] == SUMMARY_DROPPED


def _turn(gate: threading.Event) -> Iterator[Event]:
    yield from TOOL
    yield SummaryStarted(round=2)
    gate.wait(10)
    yield TextDelta("the summary")
    yield FINISHED


def test_follow_detaches_at_summary_started_and_the_rest_can_be_taken() -> None:
    gate = threading.Event()
    renderer = FakeRenderer()
    running = follow(start(_turn(gate), CancelToken()), renderer, never_ask, detach_on_summary=True)
    assert isinstance(running, RunningTurn)
    assert renderer.calls[-1] == ("event", SummaryStarted(round=2))
    assert "end_turn" not in [name for name, _ in renderer.calls]  # the turn goes on
    gate.set()
    assert running.join(10)
    taken = running.take()
    assert taken == [TextDelta("the summary"), FINISHED] and running.ended
    assert running.take() == []


def test_events_put_back_come_first_when_the_rest_is_followed() -> None:
    gate = threading.Event()
    gate.set()
    running = follow(
        start(_turn(gate), CancelToken()), FakeRenderer(), never_ask, detach_on_summary=True
    )
    assert isinstance(running, RunningTurn)
    assert running.join(10)
    taken = running.take()
    running.put_back(taken)
    renderer = FakeRenderer()
    last = follow(running, renderer, never_ask)
    assert last == FINISHED
    shown = [event for name, event in renderer.calls if name == "event"]
    assert shown == taken


def test_a_message_or_a_command_that_starts_a_turn_or_leaves_cancels_the_summary() -> None:
    for line in ["what next?", "/compact focus on tests", "/exit", "/q", "/tmp/x is a path"]:
        assert cancels_summary(line), line
    for line in ["/stats", "/help", "/?", "/clear", "/model"]:
        assert not cancels_summary(line), line


def test_a_withdrawn_fast_answer_leaves_the_screen_and_the_main_models_stays() -> None:
    # D2: the fast model's text, then its fallback; the main model's answer replaces it
    renderer, term, clock = live_renderer(rows=24)
    answer = "The main model's own answer."
    events: list[Event] = [*TOOL, TentativeText(), *words(SUMMARY)]
    for event in [*events, TextWithdrawn("the fast model started a tool call")]:
        clock.now += FRAME_S
        renderer.event(event)
    for event in [*words(answer), RoundFinished(2, Usage()), TurnFinished(answer, Usage(), 2)]:
        clock.now += FRAME_S
        renderer.event(event)
    renderer.end_turn()
    screen = " ".join(term.read())
    assert "paragraph" not in screen  # the withdrawn text is gone
    assert "the fast model started a tool call" in screen
    assert answer in screen and "Read 1 lines from a.txt" in screen
