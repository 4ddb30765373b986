"""The plain line front-end: for TERM=dumb, Emacs `M-x shell`, or `--simple-prompt`.

It reads lines with plain reads of stdin and writes plain text: it never constructs a
prompt_toolkit session and never writes an escape sequence. Turns run through the same
driver as the REPL (a worker thread, Ctrl-C cancels), permission questions are plain
questions answered with a line, and the slash commands are the shared ones. A next-prompt
suggestion is printed as one plain hint line (on the waiting prompt's line, the prompt
written again under it); a line of just `.` uses it, and when it has
alternatives they are listed as `.1 .2 .3`, each line its own key; a key naming no
suggestion is answered with a note, never sent to the model. Main thread, except
the suggestion hint, which a background thread prints while the prompt waits.
"""

from __future__ import annotations

import re
import shutil
import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING, TextIO

from qshell import __version__
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
    APPLY_RETRY,
    apply_question,
    ask_until,
    parse_answer,
    parse_apply,
    question_text,
)
from qshell.ui.render_plain import PlainRenderer

if TYPE_CHECKING:
    from qshell.followup.followup import FollowupFactory

PROMPT = "> "
KEYS_HELP = (
    "A line of just . uses the suggestion shown (.2 or .3 one of its alternatives) · "
    "a question takes a line and Enter: y, a, or n followed by an optional reason"
)
USE_SUGGESTION = "."
NO_SUGGESTION = "(no suggestion {key} to use: type a prompt)"
_NUMBERED = re.compile(r"^\.([1-9])$")  # `.2`: the second candidate listed


class SimpleFrontEnd(FollowupHooks):
    """A read-eval-print loop over plain text streams."""

    def __init__(
        self,
        conversation: Conversation,
        *,
        stdin: TextIO,
        stdout: TextIO,
        followup: FollowupFactory | None = None,
    ) -> None:
        self.conversation = conversation
        self.stdin = stdin
        self.stdout = stdout
        self.renderer = PlainRenderer(
            stdout,
            height=shutil.get_terminal_size().lines,
            show_reasoning=conversation.show_reasoning,
        )
        self.keys_help = KEYS_HELP
        self._write_lock = threading.Lock()
        self._at_prompt = False  # the input prompt is written and its line not read yet
        self.followup = followup(self._show_suggestion) if followup else None

    def _show_suggestion(self, text: str | None) -> None:
        """Print a new suggestion as a hint line (background thread): on the line of the
        prompt waiting for input, which is then written again below it — never a line of
        a bare prompt left above the hint."""
        if not text or self.followup is None:
            return
        texts = self.followup.choices[0] or (text,)
        with self._write_lock:
            again = PROMPT if self._at_prompt else ""
            self.stdout.write(f"{self._hint(texts)}\n{again}")
            self.stdout.flush()

    def _hint(self, texts: tuple[str, ...]) -> str:
        """One line naming the suggestion (or each candidate, numbered) and its keys."""
        marked = [self._marked(text) for text in texts]
        if len(marked) == 1:
            return f"(suggestion: {marked[0]} — enter . to use it)"
        listed = " · ".join(f".{n} {text}" for n, text in enumerate(marked, 1))
        keys = ", ".join(f".{n}" for n in range(1, len(marked))) + f" or .{len(marked)}"
        return f"(suggestions: {listed} — enter {keys} to use one)"

    def _marked(self, text: str) -> str:
        marker = self.followup.marker(text) if self.followup else ""
        return f"{text} {marker}" if marker else text

    def _read(self, prompt: str, *, for_input: bool = False) -> str:
        """One line; EOFError at end of input. Ctrl-C raises KeyboardInterrupt; either ends
        the prompt's line first, before whatever is printed next. `for_input`: the input
        prompt, which a suggestion's hint line is written on."""
        with self._write_lock:
            self.stdout.write(prompt)
            self.stdout.flush()
            self._at_prompt = for_input
        try:
            line = self.stdin.readline()
        except KeyboardInterrupt:
            line = None
            raise
        finally:
            with self._write_lock:
                self._at_prompt = False
                if not line:
                    self.stdout.write("\n")
                    self.stdout.flush()
        if not line:
            raise EOFError
        return line.rstrip("\n")

    def read_line(self) -> str:
        """The next line to run; a suggestion key (`.`, `.2`) gives that suggestion, and
        one naming none is answered with a note and read again, never sent as a prompt."""
        while True:
            line = self._read(PROMPT, for_input=True)
            numbered = _NUMBERED.match(line.strip())
            chosen = line.strip() == USE_SUGGESTION or line == "\t" or numbered is not None
            if not chosen or self.followup is None:
                return line
            index = int(numbered.group(1)) - 1 if numbered else None
            text = self.followup.fill("dot", index)
            if text:
                self.say(f"{PROMPT}{text}")
                return text
            self.say(NO_SUGGESTION.format(key=numbered.group(0) if numbered else USE_SUGGESTION))

    def drive(self, events: Iterator[Event]) -> Event | None:
        cancel = self.conversation.cancel_token
        return drive(events, self.renderer, self.ask, cancel, confirm=self.confirm)

    def say(self, text: str) -> None:
        with self._write_lock:
            self.stdout.write(text + "\n")
            self.stdout.flush()

    def ask(self, request: PermissionRequested) -> PermissionReply:
        no_answer = PermissionReply(PermissionAnswer.DENY, "no answer (end of input)")
        question = question_text(request, keyed=False)
        return ask_until(
            self._read, self.say, question, parse_answer, retry=ANSWER_RETRY, at_end=no_answer
        )

    def confirm(self, request: ApplyRequested) -> ApplyChoice:
        return ask_until(
            self._read,
            self.say,
            apply_question(keyed=False),
            parse_apply,
            retry=APPLY_RETRY,
            at_end=ApplyChoice.DISCARD,
        )

    def run(self, first: str = "") -> int:
        """The loop; `first` is a prompt from the command line, run as the first turn."""
        c = self.conversation
        self.say(
            f"qshell {__version__} · model {c.model} · {c.approval_mode} mode · "
            "/help for commands, Ctrl-D to exit"
        )
        for line in opening_lines(c):
            self.say(line)
        try:
            return run_loop(self, c, first=first)
        finally:
            self.close_followup()
