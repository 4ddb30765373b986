"""`qshell -p`: open (or resume) a session, run one turn, print it, and exit.

It wires the non-interactive ToolRunner (tools needing approval are denied unless the
approval mode allows them), turns Ctrl-C into a cancel of the running turn (a second
Ctrl-C interrupts at once), and hands the events to the Printer, whose exit code it
returns. Main thread only: it installs a SIGINT handler while the turn runs.
"""

from __future__ import annotations

import argparse
import signal
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TextIO

from qshell.agent.loop import run_turn
from qshell.agent.policy import MainToolRunner
from qshell.cancel import CancelToken
from qshell.compose import SessionRequest, open_session
from qshell.config import Settings
from qshell.ui.printer import OutputFormat, Printer


@contextmanager
def sigint_cancels(cancel: CancelToken) -> Iterator[None]:
    """While active, the first SIGINT cancels `cancel`; a second raises KeyboardInterrupt."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: object) -> None:
        if cancel.cancelled:
            raise KeyboardInterrupt
        cancel.cancel()

    previous = signal.signal(signal.SIGINT, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def run_print(
    args: argparse.Namespace,
    settings: Settings,
    prompt: str,
    *,
    root: Path,
    environ: Mapping[str, str],
    stdout: TextIO,
    stderr: TextIO,
) -> int:
    session = open_session(
        settings,
        root=root,
        environ=environ,
        request=SessionRequest(
            continue_latest=args.continue_latest,
            resume_id=args.resume,
            append_system_prompt=args.append_system_prompt,
        ),
    )
    runner = MainToolRunner(settings.approval_mode, interactive=False)
    cancel = CancelToken()
    printer = Printer(
        OutputFormat(args.output_format),
        stdout=stdout,
        stderr=stderr,
        session_id=session.id,
        model=session.model,
    )
    try:
        with sigint_cancels(cancel):
            return int(printer.run(run_turn(session, prompt, runner, cancel)))
    finally:
        session.close()
