"""`qshell -p`: open (or resume) a session, run one turn, print it, and exit.

It wires the non-interactive ToolRunner (tools needing approval are denied unless the
approval mode allows them), makes Ctrl-C cancel the running turn (see signals.py), and
hands the events to the Printer, whose exit code it returns. Main thread only.
"""

from __future__ import annotations

import argparse
from typing import TextIO

from qshell.agent.loop import run_turn
from qshell.agent.policy import MainToolRunner
from qshell.agent.session import SessionFactory, SessionRequest
from qshell.cancel import CancelToken
from qshell.config import Settings
from qshell.ui.printer import OutputFormat, Printer
from qshell.ui.signals import sigint_cancels


def run_print(
    args: argparse.Namespace,
    settings: Settings,
    prompt: str,
    *,
    open_session: SessionFactory,
    stdout: TextIO,
    stderr: TextIO,
) -> int:
    session = open_session(
        SessionRequest(
            continue_latest=args.continue_latest,
            resume_id=args.resume,
            append_system_prompt=args.append_system_prompt,
        )
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
