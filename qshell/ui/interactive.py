"""Interactive start-up: choose the REPL or the plain line mode, then run it.

The plain line mode is chosen for `--simple-prompt`, a dumb or unknown `TERM`, inside
Emacs (`INSIDE_EMACS`), or when stdout is not a terminal; everything else gets the
prompt_toolkit REPL, which is imported only then. Main thread.
"""

from __future__ import annotations

import argparse
import logging
import os
from collections.abc import Callable, Mapping
from typing import TextIO

from qshell.agent.conversation import Conversation
from qshell.agent.session import SessionFactory, SessionRequest
from qshell.config import Settings
from qshell.dirs import PRIVATE_FILE_MODE, Dirs, ensure_private_dir
from qshell.ui.line_loop import FollowupFactory
from qshell.ui.terminal import is_tty

log = logging.getLogger(__name__)

DUMB_TERMS = {"", "dumb", "unknown"}


def wants_plain(args: argparse.Namespace, environ: Mapping[str, str], stdout: TextIO) -> bool:
    if args.simple_prompt or environ.get("INSIDE_EMACS"):
        return True
    if environ.get("TERM", "").lower() in DUMB_TERMS:
        return True
    return not is_tty(stdout)


def _followup_factory(
    conversation: Conversation, settings: Settings, environ: Mapping[str, str]
) -> FollowupFactory:
    """Next-prompt suggestions for this conversation, logging outcomes to local telemetry."""
    from qshell.followup.followup import Followup
    from qshell.telemetry import Telemetry

    telemetry = Telemetry.for_state_dir(Dirs.from_environ(environ).state)

    def build(on_change: Callable[[str | None], None]) -> Followup:
        return Followup(conversation, settings, environ, on_change=on_change, telemetry=telemetry)

    return build


def _sweep_stale_overlays() -> None:
    """Remove speculation overlays that dead qshell processes left behind (after recovering
    any apply they were in the middle of)."""
    from qshell.overlay import OverlayUnavailable, sweep_stale

    try:
        removed = sweep_stale()
    except (OverlayUnavailable, OSError) as exc:
        log.debug("no stale-overlay sweep: %s", exc)
        return
    if removed:
        log.debug("removed %d stale speculation overlays", removed)


def run_interactive(
    args: argparse.Namespace,
    settings: Settings,
    *,
    open_session: SessionFactory,
    environ: Mapping[str, str],
    stdin: TextIO,
    stdout: TextIO,
) -> int:
    conversation = Conversation(
        open_session,
        SessionRequest(
            continue_latest=args.continue_latest,
            resume_id=args.resume,
            append_system_prompt=args.append_system_prompt,
        ),
        fast_model=settings.fast_model,
    )
    _sweep_stale_overlays()
    followup = _followup_factory(conversation, settings, environ)
    if wants_plain(args, environ, stdout):
        from qshell.ui.simple import SimpleFrontEnd

        return SimpleFrontEnd(conversation, stdin=stdin, stdout=stdout, followup=followup).run()
    from qshell.ui.repl import Repl

    history = ensure_private_dir(Dirs.from_environ(environ).state) / "history"
    os.close(os.open(history, os.O_WRONLY | os.O_CREAT | os.O_APPEND, PRIVATE_FILE_MODE))
    os.chmod(history, PRIVATE_FILE_MODE)
    repl = Repl(
        conversation,
        history_path=history,
        environ=environ,
        stdin=stdin,
        stdout=stdout,
        followup=followup,
    )
    return repl.run()
