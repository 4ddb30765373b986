"""The rich renderer: turn output for a real terminal, with Markdown, colours and a spinner.

Model text is printed one finished Markdown block at a time (a block is done once the
next one has begun, so a fenced code block or a list is never split); on a terminal the
block still arriving is shown as it grows (live.py) and settled in place when it is
done, when a tool starts or when the turn ends; elsewhere it waits until then (the
Markdown itself, its parser and where a block ends, is model_markdown.py's). On a
terminal, text that comes within a frame (live.py's FRAME_S) is held and taken in whole
at the next frame, before anything else is drawn, and at the turn's end or cancel: a
frame's parsing and drawing cost the same however many chunks it carries, and it is one
terminal write. Tool calls show as a compact group with coloured diffs for edits. Model
and tool text is cleaned of control characters and never parsed as rich markup, so it
cannot inject escape sequences or styles. `NO_COLOR` (read from the injected environ)
keeps formatting but drops colour. After a `SummaryStarted` (D3) or a `TentativeText` (a
fast-model round, D2) the text stays one live block until the turn ends, so a failed or
cancelled summary, or a withdrawn fast answer, leaves the screen whole for one dim line. It does not ask the permission question. Not
thread-safe: the front-end's main thread owns it, and `waiting()` must be called from
that thread too.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from typing import TextIO

from rich.console import Console, RenderableType
from rich.control import Control
from rich.segment import ControlType
from rich.text import Text

from qshell.agent.events import (
    ApplyProgress,
    ApplyRequested,
    Event,
    FailureKind,
    HistoryCompacted,
    Notice,
    PermissionRequested,
    PredictionStarted,
    ReasoningDelta,
    RoundFinished,
    SpeculationAccepted,
    SummaryStarted,
    TentativeText,
    TextDelta,
    TextWithdrawn,
    ToolFinished,
    ToolStarted,
    TurnFailed,
    TurnFinished,
)
from qshell.ui.live import FRAME_S, LiveBlock
from qshell.ui.render import (
    EXPAND_HINT,
    NOTHING_CUT,
    Folded,
    Reasoning,
    ToolCalls,
    ToolOutcome,
    apply_view,
    clean,
    compaction_line,
    one_line,
    permission_view,
    sources_lines,
    speculation_line,
    usage_line,
)

SPINNER_FRAMES = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"
SPINNER_FRAMES_PER_S = 10
INDENT = "    "
# events that end a run of model text: pending text is printed before them
_TEXT_ENDS = (
    ToolStarted,
    ToolFinished,
    PermissionRequested,
    HistoryCompacted,
    RoundFinished,
    TurnFinished,
    TurnFailed,
)
SUMMARY_DROPPED = "answer dropped (cancelled); the tool results above stay"
_CLEAR_LINE = Control((ControlType.CARRIAGE_RETURN,), (ControlType.ERASE_IN_LINE, 2))


class RichRenderer:
    """Writes a turn through a rich Console: the given one, or one built for `file`."""

    def __init__(
        self,
        console: Console | None = None,
        *,
        file: TextIO | None = None,
        width: int | None = None,
        environ: Mapping[str, str] | None = None,
        force_terminal: bool | None = None,
        clock: Callable[[], float] = time.monotonic,
        show_reasoning: bool = True,
    ) -> None:
        if console is None:
            console = Console(
                file=file,  # None: rich writes to whatever sys.stdout is then
                width=width,
                force_terminal=force_terminal,
                highlight=False,
                emoji=False,
                _environ=dict(os.environ if environ is None else environ),
            )
        self.console = console
        self._tools = ToolCalls(ellipsis="…")
        self._reasoning = Reasoning(shown=show_reasoning)
        self._held: list[str] = []  # model text that came within the frame, not taken in yet
        self._pending = ""  # model text not printed yet
        self._in_text = False  # the last thing printed was model text
        self._started = False  # anything printed this turn
        self._spinning = False
        live = console.is_terminal and not console.is_dumb_terminal
        self._live = LiveBlock(console, _markdown, clock=clock) if live else None
        self._clock = clock
        self._spun_at: tuple[float, float] | None = None  # (clock, elapsed) of the last spin
        self._live_open = False  # the live block's lines (or their gap) are on screen
        # a summary streaming in background (D3): its text stays one live block until the
        # turn ends, so a cancel can take it off the screen whole
        self._holding = False

    @property
    def draws(self) -> int:
        """Frames the live block has drawn so far (0 off a terminal), for benchmarks."""
        return self._live.draws if self._live is not None else 0

    def event(self, event: Event) -> None:
        if isinstance(event, TextDelta):
            self._held.append(event.text)
            if self._live is None or self._live.ready:
                self._take_held()
            return
        self._take_held()
        if isinstance(event, ReasoningDelta):
            self._reasoning.add(clean(event.text))
            self._keep_spinning()
            return
        self._fold()
        dropped = self._holding and isinstance(event, TurnFailed)
        if dropped:
            self._drop_held()  # the summary is not in the history: not on screen either
        if isinstance(event, _TEXT_ENDS):
            self._flush_text(len(self._pending))
        match event:
            case ToolStarted():
                label = self._tools.start(event, width=self.console.width)
                self._print(self._header(label))
                self._tools.header_shown = event.call_id
            case ToolFinished():
                self._finished(event)
            case PermissionRequested():
                self.permission(event)
            case ApplyRequested():
                self._apply_question(event)
            case HistoryCompacted():
                self.notice(compaction_line(event, arrow="→"))
            case Notice(text=text):
                self.notice(text)
            case ApplyProgress():
                self._tools.applying = event
                self._keep_spinning()
            case SpeculationAccepted():
                self._tools.applying = None
                self.notice(speculation_line(event))
            case TurnFinished(usage=usage, rounds=rounds, note=note, citations=citations):
                for line in sources_lines(citations):
                    self._print(Text(line, style="dim"))
                if note:
                    self._print(Text(f"! {one_line(note)}", style="bold yellow"))
                self.notice(usage_line(usage, rounds, sep=" · "))
            case SummaryStarted() | TentativeText():
                self._clear_spinner()
                self._holding = True
            case PredictionStarted():  # the visible answer is whole: settle it now
                self._take_held()
                self._flush_text(len(self._pending))
                self._clear_spinner()
            case TextWithdrawn(text=text):  # a fast round's text, redone on the main model
                self._drop_held()
                self.notice(text)
            case TurnFailed(kind=FailureKind.CANCELLED):
                self.notice(SUMMARY_DROPPED if dropped else "cancelled")
            case TurnFailed(message=message):
                self.error(message)
            case _:
                pass

    def permission(self, request: PermissionRequested) -> None:
        self._take_held()
        self._flush_text(len(self._pending))
        view = permission_view(request, width=self.console.width)
        self._tools.asked(request, view)
        self._print(Text.assemble(("? ", "bold yellow"), (view.label, "bold")))
        if view.reason:
            self._print(Text(f"  {view.reason}", style="dim"))
        for line in view.preview:
            style = _diff_style(line) if view.preview_is_diff else ""
            self._print(Text(INDENT + line, style=style), wrap=True)
        if view.more:
            self._print(Text(f"{INDENT}… {view.more} more lines", style="dim"))

    def _apply_question(self, request: ApplyRequested) -> None:
        self._flush_text(len(self._pending))
        self._clear_spinner()
        view = apply_view(request)
        self._print(Text.assemble(("? ", "bold yellow"), (view.title, "bold")), wrap=True)
        for line in view.commands:
            self._print(Text(INDENT + line), wrap=True)
        self._print(Text(view.summary, style="dim"))
        for index, line in enumerate(view.files):
            style = "bold red" if index < view.marked else _diff_style(line)
            self._print(Text(INDENT + line, style=style), wrap=True)
        if view.more:
            self._print(Text(f"{INDENT}… {view.more} more files", style="dim"))
        for line in view.warnings:
            self._print(Text(line, style="bold red"), wrap=True)

    def notice(self, text: str) -> None:
        self._take_held()
        self._print(Text(one_line(text), style="dim"))

    def say(self, text: str) -> None:
        self._take_held()
        self._print(Text(clean(text)), wrap=True)

    def error(self, text: str) -> None:
        self._take_held()
        self._print(Text(f"error: {one_line(text)}", style="bold red"))

    def waiting(self, elapsed_s: float) -> None:
        if not self.console.is_terminal or self.console.is_dumb_terminal:
            return
        live = self._live
        if live is not None and live.ready and (self._held or live.due):
            self._clear_spinner()
            self._take_held()
            live.tick()
        self._spin(elapsed_s)

    @property
    def redraw_due(self) -> bool:
        """The live block has a redraw or held text waiting whose frame has come."""
        live = self._live
        return live is not None and live.ready and (bool(self._held) or live.due)

    def tick(self) -> None:
        """Draw the held text and the live block's redraw whose frame has come, and no
        spinner (for a summary streaming above a prompt)."""
        if self.redraw_due:
            assert self._live is not None
            self._take_held()
            self._live.tick()

    def _drop_held(self) -> None:
        """Take a background summary's text off the screen (the lines still reachable)
        and forget it."""
        if self._live is not None and self._live_open:
            self._live.hide()
            self._live_open = False
        self._pending = ""
        self._holding = False

    def _spin(self, elapsed_s: float) -> None:
        """Draw the spinner line: what the turn waits for, and for how long."""
        frame = SPINNER_FRAMES[int(elapsed_s * SPINNER_FRAMES_PER_S) % len(SPINNER_FRAMES)]
        label = self._tools.waiting_label()
        if self._reasoning.words:
            label += f" · {self._reasoning.words:,} words of reasoning"
        line = Text.assemble((frame, "cyan"), f" {label} {elapsed_s:.1f}s", style="dim")
        self.console.control(_CLEAR_LINE)
        self.console.print(line, end="", no_wrap=True, overflow="crop")
        self._spinning = True
        self._spun_at = (self._clock(), elapsed_s)

    def _keep_spinning(self) -> None:
        """Reasoning (or a large apply's progress) streams in as events, so no wait is
        reported: keep the spinner going, at most once a frame, counting the words of
        reasoning (they show folded once it ends)."""
        if not self.console.is_terminal or self.console.is_dumb_terminal:
            return
        now = self._clock()
        if self._spun_at is None:  # no wait was reported this turn: start it now
            self._spin(0.0)
            return
        last_clock, last_elapsed = self._spun_at
        if now - last_clock >= FRAME_S:
            self._spin(last_elapsed + now - last_clock)

    def _fold(self) -> None:
        """The reasoning streamed so far, as one dim line (kept whole for /expand), below
        the text that came before it."""
        folded = self._reasoning.fold()
        if folded is not None:
            self._flush_text(len(self._pending))
            line = folded.line(width=self.console.width, ellipsis="…")
            self._print(Text(line, style="dim italic"))
            self._tools.folded(folded)

    def end_turn(self) -> None:
        self._take_held()
        self._holding = False
        self._spun_at = None
        self._fold()
        self._tools.turn_ended()
        self._flush_text(len(self._pending))
        self._clear_spinner()
        self._in_text = self._started = False

    def _finished(self, event: ToolFinished) -> None:
        self._show(*self._tools.finished(event, screen_lines=self.console.height))

    def expand(self) -> None:
        self._take_held()
        expanded = self._tools.expanded()
        if not expanded:
            self.notice(NOTHING_CUT)
        for shown in expanded:
            if isinstance(shown, Folded):
                self._print(Text("∴ reasoning", style="dim bold"))
                for line in shown.lines():
                    self._print(Text(INDENT + line, style="dim italic"), wrap=True)
            else:
                self._show(*shown, wrap=True)

    def _show(self, header: str | None, shown: ToolOutcome, *, wrap: bool = False) -> None:
        """A call's outcome, under its header unless that is the last line printed."""
        if header is not None:
            self._print(self._header(header))
        status = Text("  ⎿ ")
        status.append("ok" if shown.ok else "error", style="green" if shown.ok else "bold red")
        first, *rest = shown.lines or [""]
        if first:
            status.append(f": {first}")
        self._print(status, wrap=wrap)
        for line in rest:
            self._print(Text(INDENT + line), wrap=wrap)
        if shown.more:
            self._print(Text(f"{INDENT}… {shown.more} more lines · {EXPAND_HINT}", style="dim"))
        for line in shown.diff:
            self._print(Text(INDENT + line, style=_diff_style(line)), wrap=wrap)
        if shown.diff_more:
            hint = f"{INDENT}… {shown.diff_more} more lines · {EXPAND_HINT}"
            self._print(Text(hint, style="dim"))

    @staticmethod
    def _header(label: str) -> Text:
        return Text.assemble(("● ", "bold cyan"), (label, "bold"))

    def _take_held(self) -> None:
        """Take in the model text held back since the last frame: settle the blocks it
        finishes and show the one still arriving, as one frame (one terminal write)."""
        if not self._held:
            return
        text, self._held = "".join(self._held), []
        with self.console:
            self._fold()
            self._clear_spinner()
            self._pending += clean(text)
            if "\n" in text and not self._holding:
                self._flush_text(_finished_blocks(self._pending))
            self._show_pending()

    def _flush_text(self, length: int) -> None:
        """Print the first `length` characters of pending model text as Markdown."""
        markup, self._pending = self._pending[:length], self._pending[length:]
        if not markup.strip():
            return  # blank lines between blocks: the gap below stands in for them
        self._clear_spinner()
        if self._live is not None and self._live_open:
            self._live.settle(markup.strip("\n"))
            self._live_open = False
        else:
            if self._started:
                self.console.line()
            self.console.print(_markdown(markup))
        self._in_text = self._started = True
        self._tools.header_shown = None

    def _show_pending(self) -> None:
        """On a terminal, show the block still arriving (at most once per frame)."""
        if self._live is None or not self._pending.strip():
            return
        if not self._live_open:
            self._clear_spinner()
            self._live.open(gap=self._started)
            self._live_open = self._started = True
            self._tools.header_shown = None
        self._live.update(self._pending.strip("\n"))

    def _print(self, renderable: RenderableType, *, wrap: bool = False) -> None:
        """One line of renderer output; pending model text stays pending (it may be mid-fence)
        and leaves the screen until more of it arrives."""
        self._clear_spinner()
        if self._live is not None and self._live_open:
            self._live.hide()
        if self._in_text:
            self.console.line()
            self._in_text = False
        if wrap:
            self.console.print(renderable)
        else:
            self.console.print(renderable, no_wrap=True, overflow="ellipsis")
        self._started = True
        self._tools.header_shown = None

    def _clear_spinner(self) -> None:
        if self._spinning:
            self.console.control(_CLEAR_LINE)
            self._spinning = False


def _diff_style(line: str) -> str:
    if line.startswith(("+++ ", "--- ")):
        return "bold"
    if line.startswith("+"):
        return "green"
    if line.startswith("-"):
        return "red"
    if line.startswith("@@"):
        return "cyan"
    return ""


# Markdown (rich's, markdown-it, pygments for code) loads with the first answer, not with
# the first prompt: model_markdown.py builds its classes at import
def _markdown(markup: str) -> RenderableType:
    from qshell.ui.model_markdown import model_markdown

    return model_markdown(markup)


def _finished_blocks(text: str) -> int:
    from qshell.ui.model_markdown import finished_blocks

    return finished_blocks(text)
