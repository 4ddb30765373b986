"""The live tail of the rich renderer: the Markdown block still streaming in, redrawn in place.

A block of model text is only known to be finished once the next one begins, but a long
paragraph can take many seconds to arrive. `LiveBlock` shows the unfinished block as it
grows: each redraw renders it whole and rewrites, in place, only the screen lines from the
first one that changed (a growing paragraph rewrites its last line), at most once per
frame and never more often than twice the time a render takes. Lines that scroll above
the top of the screen cannot be reached again; they are left as drawn (`frozen`) and only
the lines below them stay live. `settle` draws the final rendering and lets go of the
lines. It owns the cursor between its first draw and `settle`/`hide`: its caller prints
nothing else meanwhile except on the row under it (the spinner), which it must clear
before the next draw. Terminal consoles only; not thread-safe (the renderer's thread).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from rich.console import Console, RenderableType
from rich.control import Control
from rich.segment import ControlType, Segment, Segments

FRAME_S = 1 / 20
_ERASE_LINE = Control((ControlType.CARRIAGE_RETURN,), (ControlType.ERASE_IN_LINE, 2))

Line = list[Segment]


class LiveBlock:
    """The block of model text at the bottom of the screen, drawn by `render(markup)`."""

    def __init__(
        self,
        console: Console,
        render: Callable[[str], RenderableType],
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.console = console
        self._render = render
        self._clock = clock
        self._drawn: list[Line] = []  # the block's lines on screen below the frozen ones
        self._frozen = 0  # lines of the block scrolled out of reach
        self._markup = ""  # what the screen should show
        self._gap = False  # a blank line goes above the block
        self._stale = False  # `_markup` is newer than the screen
        self._next_draw = 0.0  # no redraw before this clock reading
        self.draws = 0  # redraws done, for tests and benchmarks

    @property
    def ready(self) -> bool:
        """The frame has come: a redraw would be drawn now."""
        return self._clock() >= self._next_draw

    @property
    def due(self) -> bool:
        """A redraw is waiting and its frame has come."""
        return self._stale and self.ready

    def open(self, *, gap: bool) -> None:
        """A new block begins; with `gap`, a blank line separates it from what is above."""
        self._reset()
        self._gap = gap

    def update(self, markup: str) -> None:
        """The block is now `markup`: redraw if a frame has passed, else at the next tick."""
        self._markup, self._stale = markup, True
        self.tick()

    def tick(self) -> None:
        """Draw a redraw that waited for its frame, once the frame has passed."""
        if self.due:
            started = self._clock()
            self._draw(self._lines(self._markup))
            cost = self._clock() - started
            self._next_draw = started + max(FRAME_S, 2 * cost)

    def settle(self, markup: str) -> None:
        """Draw the block's final form for good; the screen below it is the caller's again."""
        self._draw(self._lines(markup))
        self._reset()

    def hide(self) -> None:
        """Erase the live lines (frozen ones stay) so the caller can print; the next
        `update` draws them again below what it printed (after a gap, if the whole
        block was erased)."""
        if self._drawn:
            with self.console:
                self._up(len(self._drawn))
                for _ in self._drawn:
                    self.console.control(_ERASE_LINE)
                    self.console.line()
                self._up(len(self._drawn))
            self._drawn = []
        self._gap = self._gap or not self._frozen
        self._stale = False

    def _reset(self) -> None:
        self._drawn, self._frozen, self._markup, self._stale, self._gap = [], 0, "", False, False

    def _lines(self, markup: str) -> list[Line]:
        options = self.console.options
        lines = self.console.render_lines(self._render(markup), options, pad=False)
        return [[], *lines] if self._gap else lines

    def _draw(self, lines: list[Line]) -> None:
        """Make the screen show `lines` (those below the frozen ones), rewriting only the
        lines from the first that differs."""
        lines = lines[self._frozen :]
        same = 0
        while same < min(len(lines), len(self._drawn)) and lines[same] == self._drawn[same]:
            same += 1
        removed = len(self._drawn) - len(lines)
        with self.console:
            self._up(len(self._drawn) - same)
            for line in lines[same:]:
                self.console.control(_ERASE_LINE)
                self.console.print(Segments([*line, Segment.line()]), no_wrap=True, overflow="crop")
            for _ in range(removed):
                self.console.control(_ERASE_LINE)
                self.console.line()
            self._up(removed)
        room = max(1, self.console.height - 1)  # lines the cursor can still move up over
        scrolled = max(0, len(lines) - room)
        self._frozen += scrolled
        self._drawn = lines[scrolled:]
        self._stale = False
        self.draws += 1

    def _up(self, count: int) -> None:
        if count > 0:
            self.console.control(
                Control((ControlType.CURSOR_UP, count), (ControlType.CARRIAGE_RETURN,))
            )
