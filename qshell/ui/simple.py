"""The plain line front-end: for TERM=dumb, Emacs `M-x shell`, or `--simple-prompt`.

It reads lines with plain reads of stdin and writes plain text: it never constructs a
prompt_toolkit session and never writes an escape sequence. Turns run through the same
driver as the REPL (a worker thread, Ctrl-C cancels), permission questions are plain
questions answered with a line, and the slash commands are the shared ones. Main thread.
"""

from __future__ import annotations

from typing import TextIO

from qshell import __version__
from qshell.agent.conversation import Conversation
from qshell.agent.events import PermissionAnswer, PermissionReply, PermissionRequested
from qshell.ui.driver import drive
from qshell.ui.questions import exit_text, parse_answer, question_text
from qshell.ui.render_plain import PlainRenderer
from qshell.ui.slash import Next, is_slash, run_slash

PROMPT = "> "
KEYS_HELP = "Permission questions take a line: y, a, or n followed by an optional reason"


class SimpleFrontEnd:
    """A read-eval-print loop over plain text streams."""

    def __init__(self, conversation: Conversation, *, stdin: TextIO, stdout: TextIO) -> None:
        self.conversation = conversation
        self.stdin = stdin
        self.stdout = stdout
        self.renderer = PlainRenderer(stdout)

    def _read(self, prompt: str) -> str:
        """One line; EOFError at end of input. Ctrl-C raises KeyboardInterrupt."""
        self.stdout.write(prompt)
        self.stdout.flush()
        line = self.stdin.readline()
        if not line:
            raise EOFError
        return line.rstrip("\n")

    def _say(self, text: str) -> None:
        self.stdout.write(text + "\n")
        self.stdout.flush()

    def ask(self, request: PermissionRequested) -> PermissionReply:
        while True:
            try:
                answer = parse_answer(self._read(question_text(request)))
            except EOFError:
                return PermissionReply(PermissionAnswer.DENY, "no answer (end of input)")
            if answer is not None:
                return answer
            self._say("please answer y, a or n (optionally followed by a reason)")

    def run(self) -> int:
        c = self.conversation
        self._say(
            f"qshell {__version__} · model {c.model} · {c.approval_mode} mode · "
            "/help for commands, Ctrl-D to exit"
        )
        interrupted = False
        while True:
            try:
                line = self._read(PROMPT)
            except EOFError:
                self._say("")
                break
            except KeyboardInterrupt:
                if interrupted:
                    break
                interrupted = True
                self._say("\n(press Ctrl-C again or Ctrl-D to exit)")
                continue
            interrupted = False
            if not line.strip():
                continue
            if is_slash(line):
                result = run_slash(line, c, keys_help=KEYS_HELP)
                if result.next is Next.EXIT:
                    break
                if result.events is not None:
                    drive(result.events, self.renderer, self.ask, c.cancel_token)
                for text in result.lines:
                    (self.renderer.error if result.error else self._say)(text)
                continue
            expanded_events = c.turn(line)
            for problem in c.last_expansion.problems if c.last_expansion else []:
                self.renderer.notice(problem)
            drive(expanded_events, self.renderer, self.ask, c.cancel_token)
        self._say(exit_text(c.close()))
        return 0
