"""The full-screen-free prompt_toolkit REPL for real terminals.

The main thread runs the prompt (persistent history, Alt-Enter for a newline, Ctrl-X
Ctrl-E for $EDITOR, Tab completion of slash commands and @paths, a bottom toolbar with
model, approval mode and token use); each turn runs in a worker through the shared
driver while the rich renderer prints above. While a turn runs the terminal is quiet
(terminal.py): keys typed then are kept and appear in the next input line, and they are
set aside while a permission question is open so they can never answer it. Ctrl-C cancels
a turn; Ctrl-C twice on an empty prompt, or Ctrl-D, exits. Main thread only.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO, TypeVar

from prompt_toolkit import PromptSession
from prompt_toolkit.auto_suggest import Suggestion
from prompt_toolkit.buffer import Buffer
from prompt_toolkit.completion import Completer, Completion
from prompt_toolkit.document import Document
from prompt_toolkit.filters import Condition
from prompt_toolkit.formatted_text import HTML
from prompt_toolkit.history import FileHistory, InMemoryHistory
from prompt_toolkit.input.ansi_escape_sequences import ANSI_SEQUENCES
from prompt_toolkit.key_binding import KeyBindings
from prompt_toolkit.keys import Keys
from prompt_toolkit.patch_stdout import patch_stdout
from prompt_toolkit.styles import Style
from rich.console import Console

from qshell import __version__
from qshell.agent.attachments import complete_mention
from qshell.agent.conversation import Conversation
from qshell.agent.events import (
    ApplyChoice,
    ApplyRequested,
    Event,
    PermissionAnswer,
    PermissionReply,
    PermissionRequested,
)
from qshell.ui.driver import drive
from qshell.ui.line_loop import FollowupHooks, opening_lines, run_loop
from qshell.ui.questions import (
    ANSWER_RETRY,
    APPLY_QUESTION,
    APPLY_RETRY,
    ask_until,
    parse_answer,
    parse_apply,
    question_text,
)
from qshell.ui.render_rich import RichRenderer
from qshell.ui.slash import COMMANDS
from qshell.ui.terminal import quiet_input, take_typeahead, typeahead_text

if TYPE_CHECKING:
    from qshell.followup.followup import FollowupFactory

T = TypeVar("T")
PROMPT = "> "
KEYS_HELP = (
    "Keys: Alt-Enter inserts a newline · Ctrl-X Ctrl-E edits in $EDITOR · "
    "Tab completes /commands and @paths · Ctrl-C twice on an empty line exits"
)


class QshellCompleter(Completer):
    """Slash commands and their first argument; `@path` mentions (gitignore-aware)."""

    def __init__(self, conversation: Conversation) -> None:
        self.conversation = conversation

    def get_completions(self, document: Document, complete_event: Any) -> Iterable[Completion]:
        before = document.text_before_cursor
        if before.startswith("/") and "\n" not in before:
            name, space, arg = before.partition(" ")
            if not space:
                for command in COMMANDS.values():
                    if command.name.startswith(name):
                        yield Completion(command.name, -len(name), display_meta=command.help)
                return
            chosen = COMMANDS.get(name)
            if chosen is not None and " " not in arg:
                for choice in chosen.arguments:
                    if choice.startswith(arg):
                        yield Completion(choice, -len(arg))
                return
        word = before.split()[-1] if before.split() and not before[-1].isspace() else ""
        if word.startswith("@"):
            paths = self.conversation.session.tool_context.paths
            for candidate in complete_mention(word[1:], paths):
                yield Completion(candidate, -(len(word) - 1))


ALT_ENTER = Keys.F24  # what the terminal's Alt-Enter (ESC CR in one write) is read as
ESCAPE_TIMEOUT_S = 0.05  # a lone Esc is a key of its own after this long, not a prefix
GHOST_STYLE = Style.from_dict({"auto-suggestion": "#808080 italic"})  # italic: NO_COLOR too


def _recognise_alt_enter() -> None:
    """Read ESC CR arriving together (Alt-Enter) as one key, so that a lone Esc can act at
    once and never pairs up with an Enter typed later."""
    for sequence in ("\x1b\r", "\x1b\n"):
        ANSI_SEQUENCES[sequence] = ALT_ENTER


def _key_bindings(repl: Repl) -> KeyBindings:
    bindings = KeyBindings()

    @bindings.add(ALT_ENTER)
    def _newline(event: Any) -> None:
        event.current_buffer.insert_text("\n")

    ghost = Condition(repl.ghost_visible)
    ghost_alone = Condition(lambda: repl.ghost_visible() and not repl.session.default_buffer.text)

    @bindings.add("tab", filter=ghost)
    @bindings.add("right", filter=ghost)
    @bindings.add("c-e", filter=ghost)
    @bindings.add("c-f", filter=ghost)
    @bindings.add("enter", filter=ghost_alone)  # Enter fills, never submits unseen text
    def _fill(event: Any) -> None:
        key = event.key_sequence[0].key
        method = {"c-i": "tab", "c-m": "enter"}.get(getattr(key, "value", key), "right")
        repl.fill_suggestion(event.current_buffer, method)

    @bindings.add("escape", filter=ghost, eager=True)  # no wait for a longer key sequence
    def _dismiss(event: Any) -> None:
        repl.dismiss_suggestion(event.current_buffer)

    return bindings


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
        _recognise_alt_enter()
        self.session: PromptSession[str] = PromptSession(
            history=history,
            completer=QshellCompleter(conversation),
            complete_while_typing=False,
            key_bindings=_key_bindings(self),
            enable_open_in_editor=True,
            bottom_toolbar=self._toolbar,
            rprompt=self._rprompt,
            tempfile_suffix=".md",
            style=GHOST_STYLE,
        )
        self.session.app.ttimeoutlen = ESCAPE_TIMEOUT_S
        self.questions: PromptSession[str] = PromptSession()
        self.typeahead = ""
        self.keys_help = KEYS_HELP
        self.followup = followup(self.on_suggestion) if followup else None
        if self.followup is not None:
            self.session.default_buffer.on_text_changed += self._buffer_changed

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
        buffer.suggestion = Suggestion(rest) if rest else None
        self.session.app.invalidate()

    def _seed_suggestion(self) -> None:
        if self.followup is not None and self.followup.visible_text:
            self._apply_suggestion(self.followup.visible_text)

    def fill_suggestion(self, buffer: Buffer, method: str) -> None:
        text = self.followup.fill(method) if self.followup else None
        buffer.suggestion = None
        if text:
            buffer.insert_text(text[len(buffer.text) :] if text.startswith(buffer.text) else text)

    def dismiss_suggestion(self, buffer: Buffer) -> None:
        if self.followup is not None:
            self.followup.dismiss()
        buffer.suggestion = None

    def _rprompt(self) -> str:
        """The key hint while a ghost is shown; never on a line left behind (the final
        render after Enter, Ctrl-C or Ctrl-D), where the keys no longer do anything."""
        if self.session.app.is_done or not self.ghost_visible():
            return ""
        return "⇥ Tab fills · Esc dismisses"

    def _toolbar(self) -> HTML:
        c = self.conversation
        usage = c.session.usage
        cached = "?" if usage.cached_tokens is None else f"{usage.cached_tokens:,}"
        return HTML(
            f" <b>{_xml(c.model)}</b> · {c.approval_mode} · tokens {usage.prompt_tokens:,} in "
            f"({cached} cached) · {usage.completion_tokens:,} out · /help "
        )

    def ask(self, request: PermissionRequested) -> PermissionReply:
        no_answer = PermissionReply(PermissionAnswer.DENY, "no answer")
        return self._ask(question_text(request), parse_answer, ANSWER_RETRY, no_answer)

    def confirm(self, request: ApplyRequested) -> ApplyChoice:
        return self._ask(APPLY_QUESTION, parse_apply, APPLY_RETRY, ApplyChoice.DISCARD)

    def _ask(self, question: str, parse: Callable[[str], T | None], retry: str, at_end: T) -> T:
        self.typeahead += typeahead_text(take_typeahead(self.fd))
        read = self.questions.prompt
        return ask_until(read, self.console.print, question, parse, retry=retry, at_end=at_end)

    def read_line(self) -> str:
        default, self.typeahead = self.typeahead, ""
        with patch_stdout(raw=True):
            return self.session.prompt(PROMPT, default=default, pre_run=self._seed_suggestion)

    def say(self, text: str) -> None:
        self.renderer.say(text)

    def drive(self, events: Iterator[Event]) -> Event | None:
        with quiet_input(self.fd):
            cancel = self.conversation.cancel_token
            return drive(events, self.renderer, self.ask, cancel, confirm=self.confirm)

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


def _xml(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
