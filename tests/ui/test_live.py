"""The rich renderer's live block, read off an emulated terminal screen (pyte).

A user watching a long reply must see it grow; once it is settled, the screen must hold
exactly what block-at-a-time printing leaves, whatever the cuts between deltas, frames,
spinner ticks and notices in between, also when the reply is taller than the screen.
"""

from __future__ import annotations

import io
import itertools

import pyte
from hypothesis import given, settings
from hypothesis import strategies as st
from rich.console import Console
from rich.text import Text

from qshell.agent.events import Event, Notice, TextDelta, ToolStarted
from qshell.ui.live import FRAME_S, LiveBlock
from qshell.ui.render_rich import RichRenderer

WIDTH = 60
PARAGRAPH = " ".join(f"w{n}" for n in range(400))  # about 40 lines at this width
DOC = (
    "# Title\n\nSome *intro* text that runs on for a while, " * 3
    + "\n\n- one\n- two\n  still two\n\n```python\ndef f():\n\n    return 1\n```\n\n"
    + "| a | b |\n|---|---|\n| 1 | 2 |\n\nlast paragraph\n"
)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class Terminal:
    """An emulated terminal fed with everything a renderer writes."""

    def __init__(self, rows: int) -> None:
        self.screen = pyte.HistoryScreen(WIDTH, rows, history=1000)
        self.stream = pyte.Stream(self.screen)
        self.out = io.StringIO()
        self.fed = 0

    def read(self) -> list[str]:
        """Every line written so far, scrolled-off ones first, right-trimmed, with the
        blank lines under the cursor left out."""
        text = self.out.getvalue()
        self.stream.feed(text[self.fed :].replace("\n", "\r\n"))
        self.fed = len(text)
        history = ["".join(line[x].data for x in range(WIDTH)) for line in self.screen.history.top]
        lines = [line.rstrip() for line in [*history, *self.screen.display]]
        while lines and not lines[-1]:
            lines.pop()
        return lines


def live_renderer(rows: int) -> tuple[RichRenderer, Terminal, Clock]:
    term, clock = Terminal(rows), Clock()
    console = Console(
        file=term.out, width=WIDTH, height=rows, force_terminal=True, _environ={}, emoji=False
    )
    return RichRenderer(console, clock=clock), term, clock


def live(rows: int, events: list[Event]) -> list[str]:
    """What the renderer leaves on a terminal of `rows` lines, one frame per event."""
    renderer, term, clock = live_renderer(rows=rows)
    for event in events:
        clock.now += FRAME_S
        renderer.event(event)
    renderer.end_turn()
    return term.read()


def block_at_a_time(events: list[Event]) -> list[str]:
    """What the renderer leaves when it cannot draw live (a file, not a terminal)."""
    term = Terminal(1000)
    renderer = RichRenderer(file=term.out, width=WIDTH, environ={})
    for event in events:
        renderer.event(event)
    renderer.end_turn()
    return term.read()


def words(text: str) -> list[Event]:
    return [TextDelta(word + " ") for word in text.split(" ")]


def test_a_long_paragraph_is_on_screen_while_it_streams_in() -> None:
    renderer, term, clock = live_renderer(rows=24)
    for n, delta in enumerate(words(PARAGRAPH)):
        clock.now += FRAME_S
        renderer.event(delta)
        if n % 50 == 49:
            assert f"w{n}" in " ".join(term.read()).split()
    renderer.end_turn()
    assert " ".join(term.read()).split() == PARAGRAPH.split()  # each word once, in order


def test_a_redraw_waits_for_the_next_frame() -> None:
    clock = Clock()
    console = Console(file=io.StringIO(), width=WIDTH, height=24, force_terminal=True)
    live = LiveBlock(console, Text, clock=clock)
    live.open(gap=False)
    for n in range(100):
        live.update(f"text {n}")
    assert live.draws == 1
    live.tick()
    assert live.draws == 1 and live.due is False
    clock.now += FRAME_S
    assert live.due
    live.tick()
    assert live.draws == 2
    live.tick()
    assert live.draws == 2


def test_a_renderer_waiting_draws_the_text_held_back_for_the_frame() -> None:
    renderer, term, clock = live_renderer(rows=24)
    renderer.event(TextDelta("first "))
    renderer.event(TextDelta("second"))  # same frame: not drawn yet
    assert "second" not in " ".join(term.read())
    clock.now += FRAME_S
    renderer.waiting(0.1)
    assert term.read()[0] == "first second"


def test_settled_output_is_what_block_at_a_time_printing_shows() -> None:
    events: list[Event] = [*words(DOC), ToolStarted("c", "ls", {}), *words("done now")]
    assert live(200, events) == block_at_a_time(events)


def test_a_reply_taller_than_the_screen_scrolls_without_repeating_a_line() -> None:
    events: list[Event] = [*words(PARAGRAPH), TextDelta("\n\n"), *words("after it")]
    assert live(10, events) == block_at_a_time(events)


def test_a_notice_in_mid_block_goes_above_the_block_not_into_it() -> None:
    events: list[Event] = [*words("one two three"), Notice("a notice"), *words("four five")]
    assert (
        live(24, events) == block_at_a_time(events) == ["a notice", "", "one two three four five"]
    )


@settings(max_examples=60, deadline=None)
@given(
    cuts=st.lists(st.integers(min_value=1, max_value=len(DOC) - 1), max_size=40),
    steps=st.lists(st.sampled_from(["frame", "same", "tick", "notice"]), min_size=1),
    rows=st.sampled_from([6, 200]),
)
def test_any_cuts_frames_ticks_and_notices_settle_to_the_block_at_a_time_screen(
    cuts: list[int], steps: list[str], rows: int
) -> None:
    bounds = sorted({0, *cuts, len(DOC)})
    renderer, term, clock = live_renderer(rows=rows)
    events: list[Event] = []
    for n, (start, end) in enumerate(itertools.pairwise(bounds)):
        step = steps[n % len(steps)]
        clock.now += FRAME_S if step != "same" else 0.0
        if step == "tick":
            renderer.waiting(clock.now)
        if step == "notice" and rows > 6:  # a notice splits a block taller than the screen
            events.append(Notice(f"notice {n}"))
            renderer.event(events[-1])
        events.append(TextDelta(DOC[start:end]))
        renderer.event(events[-1])
    renderer.end_turn()
    assert term.read() == block_at_a_time(events)
