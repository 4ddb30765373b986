"""Composition: build the sessions, controllers and plugins a front-end runs.

This is where settings become the objects each front-end drives. Sessions themselves are
made by sessions.py (`SessionOpener`: the provider, tools, tool context, options and
transcript); this module adds the rest. `open_router` builds the Router that routes and
logs the rounds of a conversation's or `--print` run's turns (D2's settings and the
decision log). `open_interactive` builds what an interactive front-end drives — the
Conversation, the factory of its next-prompt suggestions (with local telemetry), the
prompt's private history file — after sweeping the speculation overlays dead processes
left; `open_print` builds the one session and non-interactive ToolRunner of `--print`,
after the same sweep; `open_acp` the conversation of each ACP session (no suggestions,
the client's files when it offers them: tools/client_view.py). `open_plugins` loads the
run's gate plugins (with the run's telemetry, which they observe) into the PluginHost
every session's tool context carries, and their tools join the built-in ones. Front-ends
never construct providers, tools, runners, plugins or telemetry themselves. No threads;
terminal output only through the `notify` callback.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from itertools import chain
from pathlib import Path
from typing import TYPE_CHECKING, Any

from qshell.agent.conversation import Conversation
from qshell.agent.events import Event
from qshell.agent.session import (
    Session,
    SessionFactory,
    SessionRequest,
)
from qshell.cancel import CancelToken
from qshell.config import (
    Settings,
    assemble_settings,
)
from qshell.dirs import PRIVATE_FILE_MODE, Dirs, ensure_private_dir
from qshell.latency.decisions import DecisionLog
from qshell.latency.router import Router
from qshell.latency.routing import Routing
from qshell.permissions.runner import MainToolRunner
from qshell.plugins import PluginHost, PluginRequest, open_host
from qshell.sessions import SessionOpener
from qshell.telemetry import Telemetry
from qshell.tools.client_view import ClientView, ReadText, WriteText

if TYPE_CHECKING:
    from qshell.followup.followup import FollowupFactory

log = logging.getLogger(__name__)


def open_plugins(
    settings: Settings,
    request: PluginRequest,
    *,
    root: Path,
    environ: Mapping[str, str],
    notes: Sequence[str] = (),
) -> PluginHost:
    """The gate plugins of a run in `root`, configured from `plugins.options`, observing
    the run's telemetry (the state directory's events file; texts only with
    `telemetry.logText`). `notes` (what of the project's settings was not applied) join the
    host's startup notes, which every front-end says once at start."""
    state = Dirs.from_environ(environ).state
    telemetry = Telemetry.for_state_dir(state, log_text=settings.telemetry.log_text)
    host = open_host(
        request, environ=environ, cwd=root, options=settings.plugins.options, telemetry=telemetry
    )
    host.startup_notes = (*notes, *host.startup_notes)
    return host


def open_router(settings: Settings, environ: Mapping[str, str]) -> Router:
    """How the rounds of a conversation's (or a `--print` run's) turns are routed (D2:
    `summaryTierStrategy`, `fastModel`, `leanSummaryRounds`) and where their decisions
    are logged (the state directory's `decisions.jsonl`; prompts only with
    `telemetry.logText`)."""
    state = Dirs.from_environ(environ).state
    return Router(
        Routing(settings.summary_tier_strategy, settings.fast_model, settings.lean_summary_rounds),
        DecisionLog.for_state_dir(state, log_text=settings.telemetry.log_text),
    )


@dataclass(frozen=True, slots=True)
class Interactive:
    """What an interactive front-end drives: the conversation, the factory of its
    next-prompt suggestions (given the front-end's `on_change`), and `history()`, which
    creates the REPL's private input-history file and returns its path (the plain line
    mode keeps none)."""

    conversation: Conversation
    followup: FollowupFactory
    history: Callable[[], Path]


def open_interactive(
    settings: Settings,
    request: SessionRequest,
    *,
    open_session: SessionFactory,
    environ: Mapping[str, str],
    telemetry: Telemetry | None = None,
) -> Interactive:
    """The conversation for `request`, its suggestions and speculation, and the prompt
    history; stale speculation overlays are swept first. `telemetry` is the run's (the
    one its plugins observe), else the state directory's."""
    from qshell.followup.followup import Followup

    conversation = Conversation(
        open_session,
        replace(request, predict_next=True, background_summary=True, summary_ahead=True),
        fast_model=settings.fast_model,
        show_reasoning=settings.show_reasoning,
        router=open_router(settings, environ),
    )
    _sweep_stale_overlays(conversation.session.project_root)
    state = Dirs.from_environ(environ).state
    events = telemetry or Telemetry.for_state_dir(state)

    def followup(on_change: Callable[[str | None], None]) -> Followup:
        return Followup(conversation, settings, on_change=on_change, telemetry=events)

    return Interactive(conversation, followup, lambda: _prompt_history(state))


def open_acp(
    settings: Settings,
    request: SessionRequest,
    *,
    opener: SessionOpener,
    flags: Mapping[str, Any] | None = None,
) -> Callable[..., Conversation]:
    """How `qshell --acp` opens the conversation of each ACP session: in the client's
    `root`, under that project's settings (with the command line's `flags`, as a qshell
    started there would load them), resumed when `resume_id` is given, its file contents
    read and written through the client's `read` / `write` when it offers them
    (tools/client_view.py). Answers ask for no next-prompt line and nothing speculates:
    an editor shows no ghost text."""

    def open_conversation(
        root: Path,
        *,
        resume_id: str | None = None,
        read: ReadText | None = None,
        write: WriteText | None = None,
    ) -> Conversation:
        view = ClientView(read=read, write=write) if read or write else None
        here = settings if root == opener.root else _project_settings(root, opener, flags)

        def factory(wanted: SessionRequest) -> Session:
            return opener.open_at(wanted, root, view, here)

        return Conversation(
            factory,
            replace(
                request,
                resume_id=resume_id,
                continue_latest=False,
                predict_next=False,
                summary_ahead=True,
            ),
            fast_model=here.fast_model,
            show_reasoning=here.show_reasoning,
            router=open_router(here, opener.environ),
        )

    return open_conversation


def _project_settings(
    root: Path, opener: SessionOpener, flags: Mapping[str, Any] | None
) -> Settings:
    """The settings of an ACP session in another project; what of that project's file was
    not applied is logged (stderr), as the run's own project's notes are at start."""
    loaded = assemble_settings(project_root=root, environ=opener.environ, flags=flags)
    for note in loaded.notes:
        log.warning("%s: %s", root, note)
    return loaded.settings


def _sweep_stale_overlays(root: Path) -> None:
    """Remove speculation overlays that dead qshell processes left behind, after finishing
    or rolling back any apply into `root` they were in the middle of (another project's
    interrupted apply is left for a qshell started there)."""
    from qshell.overlay import OverlayUnavailable, sweep_stale

    try:
        removed = sweep_stale(root=root)
    except (OverlayUnavailable, OSError) as exc:
        log.debug("no stale-overlay sweep: %s", exc)
        return
    if removed:
        log.debug("removed %d stale speculation overlays", removed)


def _prompt_history(state: Path) -> Path:
    """The REPL's input history file, created 0600 in the private state directory."""
    history = ensure_private_dir(state) / "history"
    os.close(os.open(history, os.O_WRONLY | os.O_CREAT | os.O_APPEND, PRIVATE_FILE_MODE))
    os.chmod(history, PRIVATE_FILE_MODE)
    return history


@dataclass(frozen=True, slots=True)
class PrintRun:
    """The one session of `qshell -p`, its non-interactive ToolRunner (tools that need
    approval are denied unless the approval mode allows them) and the Router of its turn."""

    session: Session
    runner: MainToolRunner
    router: Router

    @property
    def session_id(self) -> str:
        return self.session.id

    @property
    def model(self) -> str:
        return self.session.model

    def turn(self, prompt: str, cancel: CancelToken, *, piped: str = "") -> Iterator[Event]:
        """One turn: the typed `prompt`'s @mentions attached (and a small model's files),
        as in the REPL; `piped` data goes first and attaches nothing (it may be anyone's
        text: an `@/path` in a log must not send that file)."""
        from qshell.agent.conversation import attach
        from qshell.agent.events import Notice
        from qshell.agent.loop import run_turn
        from qshell.agent.plugin_events import observed

        expanded, redacted = attach(self.session, prompt) if prompt else (None, [])
        typed = expanded.text if expanded is not None else ""
        text = f"{piped}\n\n{typed}" if piped and typed else piped or typed
        problems = [Notice(p) for p in expanded.problems] if expanded is not None else []
        turn = run_turn(self.session, text, self.runner, cancel, router=self.router)
        return observed(chain(problems, redacted, turn), self.session.tool_context.plugins)

    def close(self) -> None:
        self.session.close()


def open_print(
    settings: Settings,
    request: SessionRequest,
    *,
    open_session: SessionFactory,
    environ: Mapping[str, str],
) -> PrintRun:
    """The session for `request` and the runner of a `--print` turn; like an interactive
    start, it finishes or rolls back the applies into this project that qshell processes
    which died left half done, before the turn runs."""
    session = open_session(request)
    _sweep_stale_overlays(session.project_root)
    runner = MainToolRunner(settings.approval_mode, interactive=False)
    return PrintRun(session, runner, open_router(settings, environ))
