"""`qshell -p`: run one turn of a built session, print it, and exit.

It receives the session and its non-interactive ToolRunner built (compose.open_print; tools
needing approval are denied unless the approval mode allows them), makes Ctrl-C cancel the
running turn (see signals.py), and hands the events to the Printer, whose exit code it
returns. Main thread only.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol, TextIO

from qshell.agent.events import Event
from qshell.cancel import CancelToken
from qshell.ui.printer import OutputFormat, Printer
from qshell.ui.signals import sigint_cancels


class OneTurn(Protocol):
    """The session a print-mode run answers in."""

    @property
    def session_id(self) -> str:
        """The id to resume it with."""

    @property
    def model(self) -> str:
        """The model it talks to."""

    def turn(self, prompt: str, cancel: CancelToken, *, piped: str = "") -> Iterator[Event]:
        """The events of one turn for `prompt` (what was typed), after `piped` (standard
        input's data, which attaches nothing)."""

    def close(self) -> None:
        """Close the session (its transcript)."""


def run_print(
    run: OneTurn,
    prompt: str,
    *,
    piped: str = "",
    output_format: str,
    stdout: TextIO,
    stderr: TextIO,
) -> int:
    cancel = CancelToken()
    printer = Printer(
        OutputFormat(output_format),
        stdout=stdout,
        stderr=stderr,
        session_id=run.session_id,
        model=run.model,
    )
    try:
        with sigint_cancels(cancel):
            return int(printer.run(run.turn(prompt, cancel, piped=piped)))
    finally:
        run.close()
