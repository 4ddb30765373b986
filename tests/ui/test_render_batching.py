"""Render batching: model text that comes within a frame is drawn once, at the next frame.

Read off an emulated terminal (pyte) with the renderer's clock injected, so no test waits
for a frame or asserts a timing: a chunk is "within the frame" because the clock has not
moved. Whatever was held is on the screen, whole and in order, before a tool call, a
question, a notice, reasoning, the turn's end or a cancel is drawn.
"""

from __future__ import annotations

import io
import signal
from collections.abc import Iterator
from concurrent.futures import Future

from rich.console import Console

from qshell.agent.events import (
    Event,
    FailureKind,
    Notice,
    PermissionReply,
    PermissionRequested,
    ReasoningDelta,
    TextDelta,
    ToolStarted,
    TurnFailed,
    TurnFinished,
)
from qshell.cancel import CancelToken
from qshell.llm.messages import Usage
from qshell.ui.driver import drive
from qshell.ui.live import FRAME_S
from qshell.ui.render_rich import RichRenderer
from tests.ui.test_live import DOC, WIDTH, Clock, Terminal, block_at_a_time, words

WAIT_S = 10  # upper bound for a blocked generator, only reached when a test is broken
DONE = TurnFinished("", Usage(prompt_tokens=10, completion_tokens=5), 1)


class Writes(io.StringIO):
    """A terminal's input that counts the writes it gets (one per frame)."""

    count = 0

    def write(self, text: str) -> int:
        self.count += 1
        return super().write(text)


class Screen(Terminal):
    def __init__(self, rows: int) -> None:
        super().__init__(rows)
        self.out: Writes = Writes()


def renderer_on_screen(rows: int = 24) -> tuple[RichRenderer, Screen, Clock]:
    screen, clock = Screen(rows), Clock()
    console = Console(
        file=screen.out, width=WIDTH, height=rows, force_terminal=True, _environ={}, emoji=False
    )
    return RichRenderer(console, clock=clock), screen, clock


def within_one_frame(events: list[Event], rows: int = 200) -> tuple[RichRenderer, Screen]:
    """The renderer after `events`, all arriving before the clock moves."""
    renderer, screen, _ = renderer_on_screen(rows)
    for event in events:
        renderer.event(event)
    return renderer, screen


def test_chunks_within_one_frame_are_drawn_as_one_redraw_at_the_next_frame() -> None:
    renderer, screen, clock = renderer_on_screen()
    renderer.event(TextDelta("first "))  # a frame has passed since nothing: drawn at once
    assert renderer.draws == 1 and screen.read() == ["first"]
    writes = screen.out.count
    for delta in words(" ".join(f"w{n}" for n in range(50))):
        renderer.event(delta)
    assert renderer.draws == 1 and screen.out.count == writes  # held: not even one byte
    assert screen.read() == ["first"]
    clock.now += FRAME_S
    renderer.event(TextDelta(" last"))
    assert renderer.draws == 2 and screen.out.count == writes + 1
    assert " ".join(screen.read()).split() == ["first", *(f"w{n}" for n in range(50)), "last"]


def test_blocks_finished_within_a_frame_are_settled_in_that_frame_as_one_write() -> None:
    renderer, screen, clock = renderer_on_screen(rows=200)
    events: list[Event] = words(DOC)
    renderer.event(events[0])
    writes = screen.out.count
    for event in events[1:-1]:  # headings, lists, a fence, a table: many blocks end
        renderer.event(event)
    assert screen.out.count == writes
    clock.now += FRAME_S
    renderer.event(events[-1])
    assert screen.out.count == writes + 1
    renderer.end_turn()
    assert screen.read() == block_at_a_time(events)


def test_the_turn_end_draws_the_whole_text_at_once() -> None:
    events: list[Event] = [*words(DOC), DONE]
    _, screen = within_one_frame(events)
    lines = screen.read()
    assert lines == block_at_a_time(events)
    assert "last paragraph" in lines[-3] and lines[-1].startswith("tokens: 10 in")


def test_a_tool_call_after_held_text_comes_below_the_text() -> None:
    events: list[Event] = [
        *words("Let me read the file."),
        ToolStarted("c1", "read", {"path": "a"}),
    ]
    _, screen = within_one_frame(events)
    assert screen.read() == block_at_a_time(events) == ["Let me read the file.", "", "● read(a)"]


def test_a_permission_question_after_held_text_comes_below_the_text() -> None:
    renderer, screen = within_one_frame(words("I will change it."))
    future: Future[PermissionReply] = Future()
    renderer.permission(PermissionRequested("c1", "edit", {"path": "a.txt"}, "edits ask", future))
    lines = screen.read()
    assert lines[0] == "I will change it." and lines[2] == "? edit(a.txt)"


def test_a_notice_or_reasoning_after_held_text_keeps_the_order_they_came_in() -> None:
    events: list[Event] = [
        *words("before the notice."),
        Notice("a notice"),
        *words("more text,"),
        ReasoningDelta("weighing it up"),
        *words("after the reasoning."),
    ]
    renderer, screen = within_one_frame(events)
    renderer.end_turn()
    lines = screen.read()
    assert lines == block_at_a_time(events)
    assert lines.index("a notice") < lines.index("before the notice. more text,")
    folded = next(n for n, line in enumerate(lines) if line.startswith("∴ weighing it up"))
    assert (
        lines.index("before the notice. more text,") < folded < lines.index("after the reasoning.")
    )


def test_a_cancelled_turn_shows_the_text_that_was_held() -> None:
    events: list[Event] = [*words("half an answer"), TurnFailed(FailureKind.CANCELLED, "x")]
    _, screen = within_one_frame(events)
    assert screen.read() == ["half an answer", "", "cancelled"]


def test_the_turn_ending_without_an_event_still_draws_the_held_text() -> None:
    """What the driver does after a second Ctrl-C: no event comes, the turn just ends."""
    renderer, screen = within_one_frame(words("cut short here"))
    renderer.end_turn()
    assert screen.read() == ["cut short here"]


def never_ask(request: PermissionRequested) -> PermissionReply:
    raise AssertionError("no question expected")


class CtrlCWhenIdle(RichRenderer):
    """The rich renderer whose first idle tick presses Ctrl-C."""

    pressed = False

    def waiting(self, elapsed_s: float) -> None:
        if not self.pressed:
            self.pressed = True
            signal.raise_signal(signal.SIGINT)
        super().waiting(elapsed_s)


def test_ctrl_c_through_the_driver_shows_what_arrived_then_cancelled() -> None:
    screen, clock, cancel = Screen(24), Clock(), CancelToken()
    console = Console(file=screen.out, width=WIDTH, height=24, force_terminal=True, _environ={})
    renderer = CtrlCWhenIdle(console, clock=clock)  # the clock never moves: all held

    def turn() -> Iterator[Event]:
        yield from words("every word that arrived before the key")
        if cancel.wait(WAIT_S):
            yield TurnFailed(FailureKind.CANCELLED, "cancelled")

    last = drive(turn(), renderer, never_ask, cancel)
    assert isinstance(last, TurnFailed) and last.kind is FailureKind.CANCELLED
    assert screen.read() == ["every word that arrived before the key", "", "cancelled"]
