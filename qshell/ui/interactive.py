"""Interactive start-up: choose the REPL or the plain line mode, then run it.

The plain line mode is chosen for `--simple-prompt`, a dumb or unknown `TERM`, inside
Emacs (`INSIDE_EMACS`), or when stdout is not a terminal; everything else gets the
prompt_toolkit REPL, which is imported only then. The conversation, its suggestion
factory and the history file come built (compose.open_interactive). Main thread.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from qshell import gcpause
from qshell.agent.conversation import Conversation
from qshell.ui.terminal import is_tty

if TYPE_CHECKING:
    from qshell.followup.followup import FollowupFactory

DUMB_TERMS = {"", "dumb", "unknown"}


def wants_plain(args: argparse.Namespace, environ: Mapping[str, str], stdout: TextIO) -> bool:
    if args.simple_prompt or environ.get("INSIDE_EMACS"):
        return True
    if environ.get("TERM", "").lower() in DUMB_TERMS:
        return True
    return not is_tty(stdout)


def run_interactive(
    args: argparse.Namespace,
    conversation: Conversation,
    *,
    followup: FollowupFactory,
    history: Callable[[], Path],
    environ: Mapping[str, str],
    stdin: TextIO,
    stdout: TextIO,
) -> int:
    """Run the chosen front-end; a prompt given on the command line (`qshell "question"`)
    is its first turn."""
    first = " ".join(getattr(args, "prompt", None) or []).strip()
    if wants_plain(args, environ, stdout):
        from qshell.ui.simple import SimpleFrontEnd

        front = SimpleFrontEnd(conversation, stdin=stdin, stdout=stdout, followup=followup)
        gcpause.resume()
        return front.run(first)
    from qshell.ui.repl import Repl

    repl = Repl(
        conversation,
        history_path=history(),
        environ=environ,
        stdin=stdin,
        stdout=stdout,
        followup=followup,
    )
    gcpause.resume()
    return repl.run(first)
