"""Composition: build the provider, tools, sessions and controllers a front-end runs.

This is where settings become objects: the provider for the resolved configuration
(providers.py; starting the embedded model's server for `local`), the tool context with its path
resolver and limits, the system prompt (built once), and a new or resumed session with
its transcript (its settings one `SessionOptions`), and the Router that routes and logs
the rounds of a conversation's or `--print` run's turns (`open_router`: D2's settings and
the decision log). `SessionOpener` is the session factory of one run: it builds the provider
once and shares it between the sessions of that run (`/clear` must not start a second
model server), and `close()` releases it. `open_interactive` builds what an interactive
front-end drives — the Conversation, the factory of its next-prompt suggestions (with
local telemetry), the prompt's private history file — after sweeping the speculation
overlays dead processes left; `open_print` builds the one session and non-interactive
ToolRunner of `--print`, after the same sweep; `open_acp` the conversation of each ACP
session (no suggestions, the client's files when it offers them: tools/client_view.py). `open_plugins` loads the run's gate plugins
(with the run's telemetry, which they observe) into the PluginHost every session's tool
context carries, and their tools join the built-in ones. Front-ends never construct
providers, tools, runners, plugins or telemetry themselves. No threads; terminal output
only through the `notify` callback.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from qshell import __version__
from qshell.agent import transcript as transcripts
from qshell.agent.conversation import Conversation
from qshell.agent.events import Event
from qshell.agent.prompt import build_system_prompt
from qshell.agent.session import (
    Session,
    SessionFactory,
    SessionOptions,
    SessionRequest,
    SessionStats,
    new_session_id,
)
from qshell.cancel import CancelToken
from qshell.config import (
    ProviderName,
    Settings,
    assemble_settings,
    small_local_model,
)
from qshell.dirs import PRIVATE_FILE_MODE, Dirs, ensure_private_dir
from qshell.latency.decisions import DecisionLog
from qshell.latency.directives import Directives
from qshell.latency.router import Router
from qshell.latency.routing import Routing
from qshell.llm.base import Provider
from qshell.llm.messages import Message
from qshell.permissions.confine import confinement
from qshell.permissions.runner import MainToolRunner
from qshell.plugins import NO_PLUGINS, PluginHost, PluginRequest, open_host
from qshell.providers import Notify, ProviderConfig, build_provider, provider_config
from qshell.telemetry import Telemetry
from qshell.tools import default_tools
from qshell.tools.base import Tool, ToolContext
from qshell.tools.client_view import ClientView, ReadText, WriteText
from qshell.tools.fileview import FileView
from qshell.tools.paths import PathResolver
from qshell.tools.registered import registered_tools

if TYPE_CHECKING:
    from qshell.followup.followup import FollowupFactory

log = logging.getLogger(__name__)


class SessionOpener:
    """The session factory of one run: every session shares one provider, built on first
    use (for `local`, one model server); `close()` releases it."""

    def __init__(
        self,
        settings: Settings,
        *,
        root: Path,
        environ: Mapping[str, str],
        notify: Notify | None = None,
        plugins: PluginHost = NO_PLUGINS,
    ) -> None:
        self.settings = settings
        self.root = root
        self.environ = environ
        self._notify = notify
        self.plugins = plugins
        self.provider: Provider | None = None

    def __call__(self, request: SessionRequest) -> Session:
        return self.open_at(request, self.root)

    def open_at(
        self,
        request: SessionRequest,
        root: Path,
        view: FileView | None = None,
        settings: Settings | None = None,
    ) -> Session:
        """A session of this run in `root` (an ACP client's cwd) under `settings` (that
        project's; the run's when not given; the provider is the run's either way); its
        tools see files through `view` when given (tools/client_view.py), else on disk."""
        config = provider_config(self.settings, self.environ)
        if self.provider is None:
            if config.chosen_by_default and self._notify is not None:
                self._notify(
                    f"no provider is configured, so using the small offline model {config.model}; "
                    "for real work set OPENAI_API_KEY or ANTHROPIC_API_KEY"
                )
            self.provider = build_provider(
                config, self.settings, environ=self.environ, notify=self._notify
            )
        session = open_session(
            settings or self.settings,
            request,
            root=root,
            environ=self.environ,
            provider=self.provider,
            config=config,
            plugins=self.plugins,
        )
        if view is not None:
            session.tool_context = replace(session.tool_context, view=view)
        return session

    def close(self) -> None:
        """Release the provider (stop the local server); a later session builds a new one."""
        provider, self.provider = self.provider, None
        close = getattr(provider, "close", None)
        if close is not None:
            close()


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


def session_tools(plugins: PluginHost) -> list[Tool]:
    """The built-in tools, then those the plugins registered (names must not clash)."""
    tools = default_tools()
    return tools + registered_tools(plugins, (t.name for t in tools))


def tool_context(
    settings: Settings,
    *,
    root: Path,
    environ: Mapping[str, str],
    plugins: PluginHost = NO_PLUGINS,
) -> ToolContext:
    """What the tools of a session in `root` may use: the path resolver with the secret and
    protected patterns from settings, the environment, the shell timeout, the sandbox the
    commands qshell runs on its own start in (permissions/confine.py), and the gate plugins."""
    paths = PathResolver(
        root,
        home=Path(environ.get("HOME") or Path.home()),
        extra_secret_patterns=settings.secret_patterns,
        protected_patterns=settings.protected_paths,
    )
    cache = Dirs.from_environ(environ).cache
    confined = confinement(
        settings.sandbox.enabled, paths, environ, cache, settings=settings.sandbox
    )
    return ToolContext(
        paths=paths,
        environ=dict(environ),
        shell_timeout_s=settings.shell_timeout_s,
        sandbox=confined.launcher,
        sandbox_missing=confined.missing,
        sandbox_mode=confined.mode,
        sandbox_note=confined.note,
        plugins=plugins,
    )


def folds_prediction(settings: Settings, provider: str) -> bool:
    """Whether an interactive session's answers carry the next-prompt prediction
    (`suggestions.fold`, with suggestions on for this provider)."""
    from qshell.followup.guards import background_enabled

    enabled = background_enabled(settings.suggestions.enabled, provider)
    return enabled and settings.suggestions.fold


def open_session(
    settings: Settings,
    request: SessionRequest,
    *,
    root: Path,
    environ: Mapping[str, str],
    provider: Provider | None = None,
    config: ProviderConfig | None = None,
    plugins: PluginHost = NO_PLUGINS,
) -> Session:
    """A new or resumed session for `root`, with its transcript open for appending;
    `provider` and its `config` are built from the settings when not given."""
    dirs = Dirs.from_environ(environ)
    config = config or provider_config(settings, environ)
    tiny = config.name is ProviderName.LOCAL and small_local_model(settings)
    directory = transcripts.transcripts_dir(dirs.state, root)
    context = tool_context(settings, root=root, environ=environ, plugins=plugins)
    opened = _open_transcript(settings, request, root, directory, tiny=tiny, provider=config.name)
    return Session(
        provider=provider or build_provider(config, settings, environ=environ),
        model=config.model,
        system_prompt=opened.system_prompt
        or build_system_prompt(root, compact=tiny, concise=settings.concise_replies),
        tools=session_tools(plugins),
        tool_context=context,
        options=session_options(settings, request, config, predict=opened.predict, tiny=tiny),
        approval_mode=settings.approval_mode,
        session_id=opened.session_id,
        transcript=opened.transcript,
        history=opened.history,
        stats=SessionStats(last_prompt_tokens=opened.last_prompt_tokens),
    )


def session_options(
    settings: Settings,
    request: SessionRequest,
    config: ProviderConfig,
    *,
    predict: bool,
    tiny: bool,
) -> SessionOptions:
    """A session's options from the settings: a small local model (`tiny`) gets its own
    round and token limits, compact tools offered by prompt and a toolless last round;
    `predict` is whether its system prompt asks for the next-prompt line."""
    return SessionOptions(
        max_turns=min(settings.max_turns, settings.local.max_rounds)
        if tiny
        else settings.max_turns,
        max_tokens=min(settings.max_tokens, settings.local.max_tokens)
        if tiny
        else settings.max_tokens,
        context_window=(
            settings.local.context_size
            if config.name is ProviderName.LOCAL
            else settings.context_window
        ),
        compact_threshold=settings.compact_threshold,
        compact_tools=tiny,
        final_round_without_tools=tiny,
        tools_by_prompt=tiny,
        predicts_next=predict,
        directives=Directives.of(
            always_summarize=settings.always_summarize,
            allowlist=settings.tool_post_exec_allowlist,
        ),
        background_reasoning=settings.background_reasoning,
        summarizes_in_background=request.background_summary and settings.summarize_in_background,
        stream_ahead=settings.stream_ahead_tools,
    )


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
class _Opened:
    """A session's transcript, new or resumed, and what it says of the session."""

    session_id: str
    system_prompt: str
    history: list[Message]
    last_prompt_tokens: int
    predict: bool
    transcript: transcripts.Transcript


def _open_transcript(
    settings: Settings,
    request: SessionRequest,
    root: Path,
    directory: Path,
    *,
    tiny: bool,
    provider: ProviderName,
) -> _Opened:
    """Resume the transcript the request names, or create a new one with its system prompt."""
    if request.continue_latest or request.resume_id:
        loaded = transcripts.load(transcripts.find(directory, request.resume_id))
        return _Opened(
            loaded.session_id,
            loaded.system_prompt,
            loaded.messages,
            loaded.last_prompt_tokens,
            loaded.predict_next,  # what its system prompt asks, whoever resumes it
            transcripts.Transcript(directory / f"{loaded.session_id}.jsonl"),
        )
    session_id = new_session_id()
    predict = request.predict_next and folds_prediction(settings, provider)
    system_prompt = build_system_prompt(
        root,
        extra=request.append_system_prompt,
        compact=tiny,
        predict_next=predict,
        concise=settings.concise_replies,
    )
    header = {"cwd": str(root), "version": __version__, "system_prompt": system_prompt}
    transcript = transcripts.Transcript.create(
        directory, session_id, {**header, "predict_next": predict}
    )
    return _Opened(session_id, system_prompt, [], 0, predict, transcript)


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
        replace(request, predict_next=True, background_summary=True),
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
            replace(request, resume_id=resume_id, continue_latest=False, predict_next=False),
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

    def turn(self, prompt: str, cancel: CancelToken) -> Iterator[Event]:
        from qshell.agent.loop import run_turn
        from qshell.agent.plugin_events import observed

        turn = run_turn(self.session, prompt, self.runner, cancel, router=self.router)
        return observed(turn, self.session.tool_context.plugins)

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
