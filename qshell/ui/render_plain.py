"""The plain renderer: turn output as plain lines for TERM=dumb, Emacs M-x shell and pipes.

It writes the model's text as it streams, exactly as sent minus control characters, and
everything else as whole lines with ASCII markers (`*` for a tool call, `->` for its
status, the model's reasoning folded to one `∴` line once it ends). It never writes an
escape code or a carriage return, never animates: when a turn has shown nothing for ten
seconds it prints one `... still thinking (25s)` line (the time since the turn started),
and one more for every ten seconds more of silence. It
does not ask the permission question; the front-end reads the answer its own way. Not
thread-safe: the front-end's main thread owns it.
"""

from __future__ import annotations

from typing import TextIO

from qshell.agent.events import (
    ApplyProgress,
    ApplyRequested,
    Event,
    FailureKind,
    HistoryCompacted,
    Notice,
    PermissionRequested,
    ReasoningDelta,
    RoundFinished,
    SpeculationAccepted,
    TextDelta,
    TextWithdrawn,
    ToolFinished,
    ToolStarted,
    TurnFailed,
    TurnFinished,
)
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
    truncate,
    usage_line,
)

STILL_WORKING_EVERY_S = 10.0
ELLIPSIS = "..."
STATUS_INDENT = "     "  # under the text after "  -> "
PREVIEW_INDENT = "    "


class PlainRenderer:
    """Writes a turn as plain text lines to `file`; lines are cut at `width` characters."""

    def __init__(
        self, file: TextIO, *, width: int = 100, height: int = 24, show_reasoning: bool = True
    ) -> None:
        if width < 20:
            raise ValueError(f"width must be at least 20, not {width!r}")
        self.file = file
        self.width = width
        self.height = height  # the screen's lines: a shell result is shown up to a screenful
        self._tools = ToolCalls(ellipsis=ELLIPSIS)
        self._reasoning = Reasoning(shown=show_reasoning)
        self._tail = ""  # the last two characters written this turn
        self._in_text = False  # the last thing written was model text
        # when the next "still" line is due (the turn's elapsed seconds); None: ten seconds
        # after the next wait, the first since something was shown
        self._next_notice_s: float | None = STILL_WORKING_EVERY_S
        self._last_wait_s = 0.0

    def event(self, event: Event) -> None:
        if isinstance(event, ReasoningDelta):
            self._reasoning.add(clean(event.text))
            return
        self._fold()
        self._next_notice_s = None  # the silence starts again
        match event:
            case TextDelta(text=text):
                self._text(clean(text))
            case ToolStarted():
                label = self._tools.start(event, width=self.width)
                self._line(f"* {label}")
                self._tools.header_shown = event.call_id
            case ToolFinished():
                self._finished(event)
            case PermissionRequested():
                self.permission(event)
            case ApplyRequested():
                self._apply_question(event)
            case HistoryCompacted():
                self.notice(compaction_line(event, arrow="->"))
            case Notice(text=text) | TextWithdrawn(text=text):  # plain text stays printed
                self.notice(text)
            case ApplyProgress():  # said by "... still applying" lines as the wait goes on
                self._tools.applying = event
            case SpeculationAccepted():
                self._tools.applying = None
                self.notice(speculation_line(event))
            case RoundFinished():
                pass
            case TurnFinished(usage=usage, rounds=rounds, note=note, citations=citations):
                for line in sources_lines(citations):
                    self._line(line)
                if note:
                    self._line(f"! {one_line(note)}")
                self.notice(usage_line(usage, rounds, sep=", "))
            case TurnFailed(kind=FailureKind.CANCELLED):
                self.notice("cancelled")
            case TurnFailed(message=message):
                self.error(message)
            case _:
                pass

    def permission(self, request: PermissionRequested) -> None:
        view = permission_view(request, ellipsis=ELLIPSIS, width=self.width)
        self._tools.asked(request, view)
        self._line(f"? {view.label}")
        if view.reason:
            self._line(f"  reason: {view.reason}")
        for line in view.preview:
            self._line(PREVIEW_INDENT + line, cut=False)
        if view.more:
            self._line(f"{PREVIEW_INDENT}{ELLIPSIS} {view.more} more lines")

    def _apply_question(self, request: ApplyRequested) -> None:
        view = apply_view(request)
        self._line(f"? {view.title}", cut=False)
        for line in view.commands:
            self._line(PREVIEW_INDENT + line, cut=False)
        self._line(view.summary)
        for line in view.files:
            self._line(PREVIEW_INDENT + line, cut=False)
        if view.more:
            self._line(f"{PREVIEW_INDENT}{ELLIPSIS} {view.more} more files")
        for line in view.warnings:
            self._line(line, cut=False)

    def notice(self, text: str) -> None:
        self._line(one_line(text))

    def say(self, text: str) -> None:
        self._line(clean(text))

    def error(self, text: str) -> None:
        self._line(f"error: {one_line(text)}")

    def waiting(self, elapsed_s: float) -> None:
        """Called about ten times a second while nothing arrives (the driver's tick): the
        first call after an event is the silence's start."""
        if elapsed_s < self._last_wait_s:  # the clock restarted: a question was answered
            self._next_notice_s = STILL_WORKING_EVERY_S
        self._last_wait_s = elapsed_s
        if self._next_notice_s is None:
            self._next_notice_s = elapsed_s + STILL_WORKING_EVERY_S
        if elapsed_s < self._next_notice_s:
            return
        self._line(f"... still {self._tools.waiting_label()} ({int(elapsed_s)}s)")
        self._next_notice_s += STILL_WORKING_EVERY_S

    def _fold(self) -> None:
        """The reasoning streamed so far, as one line (kept whole for /expand)."""
        folded = self._reasoning.fold()
        if folded is not None:
            self._line(folded.line(width=self.width, ellipsis=ELLIPSIS))
            self._tools.folded(folded)

    def end_turn(self) -> None:
        self._fold()
        self._tools.turn_ended()
        if self._tail and not self._tail.endswith("\n"):
            self._write("\n")
        self.file.flush()
        self._in_text = False
        self._tail = ""
        self._last_wait_s = 0.0
        self._next_notice_s = STILL_WORKING_EVERY_S

    def _finished(self, event: ToolFinished) -> None:
        self._show(*self._tools.finished(event, screen_lines=self.height))

    def expand(self) -> None:
        expanded = self._tools.expanded()
        if not expanded:
            self.notice(NOTHING_CUT)
        for shown in expanded:
            if isinstance(shown, Folded):
                self._line("reasoning:")
                for line in shown.lines():
                    self._line(PREVIEW_INDENT + line, cut=False)
            else:
                self._show(*shown, cut=False)

    def _show(self, header: str | None, shown: ToolOutcome, *, cut: bool = True) -> None:
        """A call's outcome, under its header unless that is the last line printed; lines
        are cut at the width if `cut`."""
        if header is not None:
            self._line(f"* {header}")
        status = "ok" if shown.ok else "error"
        first, *rest = shown.lines or [""]
        self._line(f"  -> {status}: {first}" if first else f"  -> {status}", cut=cut)
        for line in rest:
            self._line(STATUS_INDENT + line, cut=cut)
        if shown.more:
            self._line(f"{STATUS_INDENT}{ELLIPSIS} {shown.more} more lines - {EXPAND_HINT}")
        for line in shown.diff:
            self._line(STATUS_INDENT + line, cut=cut)
        if shown.diff_more:
            self._line(f"{STATUS_INDENT}{ELLIPSIS} {shown.diff_more} more lines - {EXPAND_HINT}")

    def _text(self, text: str) -> None:
        if not text:
            return
        if not self._in_text:
            self._gap()
            self._in_text = True
        self._write(text)

    def _line(self, text: str, *, cut: bool = True) -> None:
        """One whole line of renderer output after any model text, cut to the width if `cut`."""
        if self._in_text:
            self._gap()
            self._in_text = False
        self._tools.header_shown = None
        self._write((truncate(text, self.width, ELLIPSIS) if cut else text) + "\n")

    def _gap(self) -> None:
        """End the current line and leave a blank one between model text and the rest."""
        if not self._tail.endswith("\n") and self._tail:
            self._write("\n")
        if self._tail and self._tail != "\n\n":
            self._write("\n")

    def _write(self, text: str) -> None:
        self.file.write(text)
        self.file.flush()
        self._tail = (self._tail + text)[-2:]
