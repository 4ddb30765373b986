"""The read-eval-print loop both interactive front-ends share.

`run_loop(front, conversation)` reads a line, runs a slash command or a turn, and repeats
until `/exit`, Ctrl-D, or Ctrl-C twice on an empty line; then it closes the session and
prints how to resume it. A front-end supplies only how to read a line, drive a turn's
events, and print a line (`LineFrontEnd`). Main thread.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Protocol

from qshell.agent.conversation import Conversation
from qshell.agent.events import Event
from qshell.agent.prediction import split_prediction
from qshell.ui.questions import exit_text
from qshell.ui.render import Renderer
from qshell.ui.slash import Next, is_slash, run_slash

if TYPE_CHECKING:
    from qshell.followup.followup import Followup

EXIT_HINT = "(press Ctrl-C again or Ctrl-D to exit)"


class LineFrontEnd(Protocol):
    @property
    def renderer(self) -> Renderer:
        """What turns events and notices into output."""

    @property
    def keys_help(self) -> str:
        """The key help line `/help` shows."""

    def read_line(self) -> str:
        """The next input line; EOFError at the end, KeyboardInterrupt on Ctrl-C."""

    def drive(self, events: Iterator[Event]) -> Event | None:
        """Render a turn's (or a command's) events until they end; returns the last one."""

    def submitted(self, line: str) -> str | None:
        """The user submitted `line` (before it runs); returns the suggestion they had seen
        on screen, if any."""

    def turn_ended(self, last: Event | None) -> None:
        """A model turn ended with `last` (TurnFinished or TurnFailed, None if abandoned)."""

    def prepared(self) -> Iterator[Event] | None:
        """The turn for the line just submitted when it was prepared ahead (speculation)."""

    def say(self, text: str) -> None:
        """Print one plain line."""


def run_loop(front: LineFrontEnd, conversation: Conversation, *, first: str = "") -> int:
    """Read and run lines until the user leaves; `first` (the prompt given on the command
    line, as in `qshell "question"`) runs before the first read, as if typed."""
    interrupted = False
    pending = first
    while True:
        if pending.strip():
            line, pending = pending, ""
        else:
            try:
                line = front.read_line()
            except EOFError:
                break
            except KeyboardInterrupt:
                if interrupted:
                    break
                interrupted = True
                front.renderer.notice(EXIT_HINT)
                continue
            interrupted = False
            if not line.strip():
                continue
        if not _run_line(front, conversation, line):
            break
    front.say(exit_text(conversation.close()))
    return 0


def _run_line(front: LineFrontEnd, conversation: Conversation, line: str) -> bool:
    """Run one submitted line (a slash command or a turn); False when it asks to exit."""
    shown = front.submitted(line)
    if is_slash(line):
        result = run_slash(line, conversation, keys_help=front.keys_help)
        if result.next is Next.EXIT:
            return False
        if result.next is Next.EXPAND:
            front.renderer.expand()
        if result.events is not None:
            front.drive(result.events)
        for text in result.lines:
            (front.renderer.error if result.error else front.say)(text)
        return True
    events = front.prepared() or conversation.turn(line, shown_suggestion=shown)
    for problem in conversation.last_expansion.problems if conversation.last_expansion else []:
        front.renderer.notice(problem)
    last = front.drive(events)
    conversation.user_idle()  # the prompt comes back now (a summary may stream on, D3)
    front.turn_ended(last)
    return True


RESUME_EXCERPT_CHARS = 160


def opening_lines(conversation: Conversation) -> list[str]:
    """What a session shows under its banner: why there is no sandbox when the machine has
    none and which plugins did not load (said once, at start), and for a resumed session
    that it was resumed and its last exchange."""
    context = conversation.session.tool_context
    note = context.sandbox_note
    lines = [note] if note else []
    lines += context.plugins.startup_notes
    history = conversation.session.history
    if not history:
        return lines
    lines.append(f"resumed session {conversation.session.id} ({len(history)} messages)")
    asked = next((m.text for m in reversed(history) if m.role == "user" and m.text), "")
    answered = next((m.text for m in reversed(history) if m.role == "assistant" and m.text), "")
    if asked:
        lines.append(f"  you: {_excerpt(asked)}")
    if answered:
        lines.append(f"  qshell: {_excerpt(split_prediction(answered)[0])}")
    return lines


def _excerpt(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= RESUME_EXCERPT_CHARS else flat[: RESUME_EXCERPT_CHARS - 1] + "…"


class FollowupHooks:
    """The LineFrontEnd hooks that forward to an optional suggestion engine (`followup`)."""

    followup: Followup | None = None

    def submitted(self, line: str) -> str | None:
        return self.followup.submitted(line) if self.followup is not None else None

    def turn_ended(self, last: Event | None) -> None:
        if self.followup is not None:
            self.followup.turn_ended(last)

    def prepared(self) -> Iterator[Event] | None:
        return self.followup.prepared() if self.followup is not None else None

    def close_followup(self) -> None:
        if self.followup is not None:
            self.followup.close()
