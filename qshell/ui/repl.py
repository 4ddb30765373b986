"""The full-screen-free prompt_toolkit REPL for real terminals.

The main thread runs the prompt (persistent history, Alt-Enter for a newline, Ctrl-X
Ctrl-E for $EDITOR, Tab completion of slash commands and @paths (completer.py), a bottom
toolbar with model, approval mode and token use); each turn runs in a worker through
the shared driver while the rich renderer prints above. While a turn runs the terminal is quiet
(terminal.py): keys typed then are kept and appear in the next input line, and they are
set aside while a permission question is open so they can never answer it; one key answers
a question (keyed.py), and the Enter a habit adds after it never submits a line. Ctrl-C cancels
a turn; Ctrl-C twice on an empty prompt, or Ctrl-D, exits. When a turn reaches a summary
round that may stream in background (`SummaryStarted`, D3) the prompt comes back at once
and the summary goes on rendering above it (in `in_terminal` blocks of the prompt's event
loop, at most once a frame); its end is the turn's end (suggestions only then). Enter on a
message (or `/compact`, `/exit`) cancels the summary, whose text leaves the screen, and
runs the line once the turn has stopped; other slash commands run once it has finished;
Ctrl-C cancels just the summary; a permission question takes the rest of the turn back
to the foreground. The same goes, from `PredictionStarted`, for the answer's hidden
next-prompt line: the prompt is back once the visible answer is whole, and a line entered
meanwhile (message or command) runs when the turn has ended, without cancelling it. Main
thread only.
"""

from __future__ import annotations

import asyncio
import enum
import functools
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, TextIO, TypeVar

from prompt_toolkit import PromptSession
from prompt_toolkit.application import in_terminal
from prompt_toolkit.auto_suggest import Suggestion
from prompt_toolkit.buffer import Buffer
from prompt_toolkit.formatted_text import HTML
from prompt_toolkit.history import FileHistory, InMemoryHistory
from prompt_toolkit.patch_stdout import patch_stdout
from prompt_toolkit.styles import Style
from prompt_toolkit.utils import get_cwidth
from rich.console import Console

from qshell import __version__
from qshell.agent.conversation import Conversation
from qshell.agent.events import (
    ApplyChoice,
    ApplyRequested,
    Event,
    PermissionAnswer,
    PermissionReply,
    PermissionRequested,
    SummaryStarted,
    ToolStarted,
    TurnFailed,
    TurnFinished,
)
from qshell.errors import ControlSignal
from qshell.ui.completer import QshellCompleter
from qshell.ui.driver import RunningTurn, follow, start
from qshell.ui.keyed import Reason, after_keyed_answer, ask_by_key
from qshell.ui.keys import key_bindings, key_hint, recognise_alt_keys
from qshell.ui.line_loop import FollowupHooks, opening_lines, run_loop
from qshell.ui.live import FRAME_S
from qshell.ui.questions import (
    APPLY_KEYS,
    PERMISSION_KEYS,
    REASON_KEY,
    REASON_PROMPT,
    apply_question,
    denied_because,
    question_text,
)
from qshell.ui.render_rich import RichRenderer
from qshell.ui.slash import ALIASES, is_slash
from qshell.ui.terminal import quiet_input, take_typeahead, typeahead_text

if TYPE_CHECKING:
    from qshell.followup.followup import FollowupFactory

T = TypeVar("T")
PROMPT = "> "
KEYS_HELP = (
    "Keys: Alt-Enter inserts a newline · Ctrl-X Ctrl-E edits in $EDITOR · "
    "Tab completes /commands and @paths · Ctrl-C twice on an empty line exits · "
    "a suggestion: Tab fills it, Alt-] / Alt-[ show its alternatives, Esc dismisses it · "
    "a question: one key answers it (y, a, n; t tells the model why not), no Enter"
)


ESCAPE_TIMEOUT_S = 0.05  # a lone Esc is a key of its own after this long, not a prefix
GHOST_STYLE = Style.from_dict({"auto-suggestion": "#808080 italic"})  # italic: NO_COLOR too


# slash commands that cancel a summary streaming in background, as a message does (the
# others wait for it to finish)
CANCELS_SUMMARY = frozenset({"/compact", "/exit"})
SUMMARY_JOIN_S = 5.0
WAITING_HINT = "runs when the answer is complete"


class AfterSummary(enum.Enum):
    """What the prompt does once the summary streaming above it has ended."""

    SUBMIT = "submit"  # accept the line typed
    EXIT = "exit"  # Ctrl-D: leave


class Foreground(ControlSignal):
    """The summary's turn asks a question: the prompt closes, the turn takes the screen."""


def cancels_summary(line: str) -> bool:
    """Whether submitting `line` cancels a summary streaming in background: a message
    or a command that starts a turn or leaves."""
    if not is_slash(line):
        return True
    name = line.split()[0]
    return ALIASES.get(name, name) in CANCELS_SUMMARY


class Repl(FollowupHooks):
    """The interactive loop on a real terminal."""

    def __init__(
        self,
        conversation: Conversation,
        *,
        history_path: Path | None,
        environ: Mapping[str, str],
        stdin: TextIO | None = None,
        stdout: TextIO | None = None,
        followup: FollowupFactory | None = None,
    ) -> None:
        self.conversation = conversation
        self.stdin = stdin or sys.stdin
        self.stdout = stdout or sys.stdout
        self.fd = self.stdin.fileno()
        console = Console(
            file=self.stdout, force_terminal=True, no_color="NO_COLOR" in environ, highlight=False
        )
        self.renderer = RichRenderer(console=console, show_reasoning=conversation.show_reasoning)
        self.console = console
        history = FileHistory(str(history_path)) if history_path else InMemoryHistory()
        recognise_alt_keys()
        self.session: PromptSession[str] = PromptSession(
            history=history,
            completer=QshellCompleter(conversation),
            complete_while_typing=False,
            key_bindings=key_bindings(self),
            enable_open_in_editor=True,
            bottom_toolbar=self._toolbar,
            rprompt=self._rprompt,
            tempfile_suffix=".md",
            style=GHOST_STYLE,
        )
        self.session.app.ttimeoutlen = ESCAPE_TIMEOUT_S
        self.typeahead = ""
        self.keys_help = KEYS_HELP
        self.followup = followup(self.on_suggestion) if followup else None
        if self.followup is not None:
            self.session.default_buffer.on_text_changed += self._buffer_changed
        # D3: the turn whose summary streams above the prompt, and what Enter/Ctrl-D asked
        # for meanwhile
        self.summary: RunningTurn | None = None
        self._after: AfterSummary | None = None
        self._keyed = False  # a question was answered by a key since the last input line

    # -- next-prompt suggestion (ghost text) --------------------------------------------

    def _buffer_changed(self, buffer: Buffer) -> None:
        if self.followup is not None:
            self.followup.user_typed(buffer.text)
            self._apply_suggestion(self.followup.visible_text)  # the rest of what is typed

    def ghost_visible(self) -> bool:
        """A suggestion is on screen after the cursor (on an empty line, or after its own
        first characters typed)."""
        buffer = self.session.default_buffer
        at_end = buffer.document.is_cursor_at_the_end
        return bool(self.followup and buffer.suggestion and buffer.suggestion.text and at_end)

    def on_suggestion(self, text: str | None) -> None:
        """Called from a background thread: hop to the prompt's event loop to show it."""
        app = self.session.app
        loop = app.loop if app.is_running else None
        if loop is not None:
            loop.call_soon_threadsafe(self._apply_suggestion, text)

    def _apply_suggestion(self, text: str | None) -> None:
        buffer = self.session.default_buffer
        rest = text[len(buffer.text) :] if text and text.startswith(buffer.text) else ""
        marker = self.followup.marker(text) if rest and self.followup else ""
        buffer.suggestion = Suggestion(f"{rest}  {marker}" if marker else rest) if rest else None
        self.session.app.invalidate()

    def _seed_suggestion(self) -> None:
        if self.followup is not None and self.followup.visible_text:
            self._apply_suggestion(self.followup.visible_text)

    def fill_suggestion(self, buffer: Buffer, method: str) -> None:
        text = self.followup.fill(method) if self.followup else None
        buffer.suggestion = None
        if text:
            buffer.insert_text(text[len(buffer.text) :] if text.startswith(buffer.text) else text)

    def cycle_suggestion(self, step: int) -> None:
        """Alt-] / Alt-[: show the suggestion's next or previous candidate."""
        text = self.followup.cycle(step) if self.followup else None
        if text:
            self._apply_suggestion(text)

    def dismiss_suggestion(self, buffer: Buffer) -> None:
        if self.followup is not None:
            self.followup.dismiss()
        buffer.suggestion = None

    def _rprompt(self) -> str:
        """The key hint while a ghost is shown; never on a line left behind (the final
        render after Enter, Ctrl-C or Ctrl-D), where the keys no longer do anything."""
        if self.session.app.is_done:
            return ""
        if self._after is AfterSummary.SUBMIT:
            return WAITING_HINT
        if not self.ghost_visible():
            return ""
        texts, index = self.followup.choices if self.followup else ((), 0)
        buffer = self.session.default_buffer
        fitting = [
            i for i, text in enumerate(texts) if text.startswith(buffer.text)
        ]  # Alt-] cycles these
        at = fitting.index(index) + 1 if index in fitting else 1
        ghost = buffer.suggestion.text if buffer.suggestion else ""
        line = get_cwidth(PROMPT + buffer.document.current_line + ghost)
        free = self.session.app.output.get_size().columns - line
        return key_hint(at, len(fitting), free)

    def _toolbar(self) -> HTML:
        """Model, mode and the session's token use (a resumed one's from its start); the
        cached share only when the server says it, no figures before the first round."""
        c = self.conversation
        stats = c.session.stats
        usage = stats.usage
        tokens = ""
        if stats.rounds:
            cached = "" if usage.cached_tokens is None else f" ({usage.cached_tokens:,} cached)"
            tokens = (
                f"tokens {usage.prompt_tokens:,} in{cached} · {usage.completion_tokens:,} out · "
            )
        return HTML(f" <b>{_xml(c.model)}</b> · {c.approval_mode} · {tokens}/help ")

    def ask(self, request: PermissionRequested) -> PermissionReply:
        no_answer = PermissionReply(PermissionAnswer.DENY, "no answer")
        reason = Reason(REASON_KEY, REASON_PROMPT, denied_because)
        question = question_text(request, keyed=True)
        return self._ask(question, PERMISSION_KEYS, no_answer, reason=reason)

    def confirm(self, request: ApplyRequested) -> ApplyChoice:
        return self._ask(apply_question(keyed=True), APPLY_KEYS, ApplyChoice.DISCARD)

    @functools.cached_property
    def questions(self) -> PromptSession[str]:
        """The prompt permission and apply questions are read with, made when first asked."""
        return PromptSession()

    def _ask(
        self,
        question: str,
        keys: Mapping[str, tuple[str, T]],
        at_end: T,
        *,
        reason: Reason[T] | None = None,
    ) -> T:
        """One key answers (keyed.py); what was typed before the question never does."""
        self.typeahead += typeahead_text(take_typeahead(self.fd))
        try:
            answer = ask_by_key(self.questions, question, keys, reason=reason)
        except EOFError:
            return at_end
        self._keyed = True
        return answer

    def read_line(self) -> str:
        while True:
            if self._keyed:  # the Enter a habit typed after the key never submits a line
                self._keyed = False
                self.typeahead += after_keyed_answer(self.session.app.input, self.fd)
            default, self.typeahead = self.typeahead, ""
            try:
                with patch_stdout(raw=True):
                    return self.session.prompt(PROMPT, default=default, pre_run=self._pre_run)
            except Foreground:
                self._foreground()
            except EOFError:
                self._settle_summary(cancel=True)  # the input ended under the summary
                raise
            finally:
                self.session.app.erase_when_done = False

    def _pre_run(self) -> None:
        self._seed_suggestion()
        if self.summary is not None:
            self.session.app.create_background_task(self._follow_summary(self.summary))

    def say(self, text: str) -> None:
        self.renderer.say(text)

    def drive(self, events: Iterator[Event]) -> Event | None:
        """Render a turn; at its SummaryStarted (D3) the turn goes on in background and
        this returns None: the summary's end reports the turn's end (`_summary_ended`)."""
        with quiet_input(self.fd):
            cancel = self.conversation.cancel_token
            running = start(events, cancel)
            outcome = follow(
                running, self.renderer, self.ask, confirm=self.confirm, detach_on_summary=True
            )
        if isinstance(outcome, RunningTurn):
            self.summary, self._after = outcome, None
            return None
        return outcome

    def submitted(self, line: str) -> str | None:
        cancel = cancels_summary(line) and self._tail_cancels()
        self._settle_summary(cancel=cancel)  # a line the Enter binding missed
        return super().submitted(line)

    def turn_ended(self, last: Event | None) -> None:
        if self.summary is None:  # else it has not ended: the summary is still streaming
            super().turn_ended(last)

    # -- a summary streaming above the prompt (D3) ----------------------------------------

    def summarizing(self) -> bool:
        return self.summary is not None

    def _tail_cancels(self) -> bool:
        """Whether a message cancels what streams under the prompt: a summary (D3) yes;
        the hidden prediction line no (the answer is complete; the line waits for it)."""
        return self.summary is not None and isinstance(self.summary.detached_by, SummaryStarted)

    def submit_during_summary(self, text: str) -> None:
        """Enter while the summary streams: the line runs once the turn has stopped — at
        once for a message (the summary is cancelled), after it for most slash commands."""
        if not text.strip() or self.summary is None:
            return  # an empty line would leave a blank prompt among the summary's lines
        self._after = AfterSummary.SUBMIT
        if cancels_summary(text) and self._tail_cancels():
            self.summary.cancel.cancel()
        self.session.app.invalidate()

    def leave_after_summary(self) -> None:
        """Ctrl-D on an empty line while the summary streams: leave once it has ended."""
        self.cancel_summary(then=AfterSummary.EXIT)

    def line_empty(self) -> bool:
        return not self.session.default_buffer.text

    def cancel_summary(self, *, then: AfterSummary | None = None) -> None:
        """Ctrl-C (or Ctrl-D) while the summary streams: cancel just the summary. Under
        the prediction line only Ctrl-D acts, once the turn has ended: nothing is lost by
        waiting for a line that takes a fraction of a second, and its answer stands."""
        if self.summary is not None:
            self._after = then or self._after
            if self._tail_cancels():
                self.summary.cancel.cancel()

    async def _follow_summary(self, running: RunningTurn) -> None:
        """Render what the summary's turn yields above the prompt, once a frame, until
        it ends or asks a question."""
        last: Event | None = None
        while self.summary is running:
            items = running.take()
            if items or running.ended or self.renderer.redraw_due:
                async with in_terminal():
                    rest = self._render_background(items)
                    if running.ended and not rest:
                        self.renderer.end_turn()
                last = next((e for e in reversed(items) if _is_end(e)), last)
                if rest:
                    running.put_back(rest)
                    self.typeahead = self.session.default_buffer.text
                    self.session.app.erase_when_done = True
                    self.session.app.exit(exception=Foreground())
                    return
                if running.ended:
                    self._summary_ended(running, last)
                    return
            await asyncio.sleep(FRAME_S)

    def _render_background(self, items: list[Event]) -> list[Event]:
        """Render `items` up to a question or a tool call (the round was not the summary
        it was predicted to be: the rest of the turn is the foreground's); returns those
        from there on."""
        for index, item in enumerate(items):
            if isinstance(item, PermissionRequested | ApplyRequested | ToolStarted):
                return items[index:]
            self.renderer.event(item)
        self.renderer.tick()
        return []

    def _summary_ended(self, running: RunningTurn, last: Event | None) -> None:
        """The summary's turn is over: it is the turn's end (suggestions start now,
        unless a line waits to run), then the line waiting runs or Ctrl-D leaves."""
        running.join(SUMMARY_JOIN_S)
        self.summary, after, self._after = None, self._after, None
        super().turn_ended(None if after else last)
        if after is AfterSummary.SUBMIT:
            self.session.default_buffer.validate_and_handle()
        elif after is AfterSummary.EXIT:
            self.session.app.exit(exception=EOFError())
        else:
            self.session.app.invalidate()

    def _settle_summary(self, *, cancel: bool) -> None:
        """Make sure no summary runs under the next line: cancelled, or followed to its end."""
        if self.summary is not None:
            if cancel:
                self.summary.cancel.cancel()
            self._foreground()

    def _foreground(self) -> None:
        """The summary's turn asked a question (or a line came in under it): follow the
        rest of it here, as a turn."""
        running, self.summary = self.summary, None
        if running is None:
            return
        with quiet_input(self.fd):
            last = follow(running, self.renderer, self.ask, confirm=self.confirm)
        assert not isinstance(last, RunningTurn)
        super().turn_ended(last)

    def run(self, first: str = "") -> int:
        """The loop; `first` is a prompt from the command line, run as the first turn."""
        c = self.conversation
        self.console.print(
            f"[bold]qshell[/bold] {__version__} · {c.model} · {c.approval_mode} mode · "
            "/help for commands, Ctrl-D to exit",
            highlight=False,
        )
        for line in opening_lines(c):
            self.say(line)
        try:
            return run_loop(self, c, first=first)
        finally:
            self.close_followup()


def _is_end(event: Event) -> bool:
    return isinstance(event, TurnFinished | TurnFailed)


def _xml(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
