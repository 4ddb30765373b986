"""How a session is made: its provider, tools, tool context, options and transcript.

`open_session` turns settings and a `SessionRequest` into a new or resumed Session: the
tool context (the path resolver with the secret and protected patterns, the sandbox its
commands start in: permissions/confine.py, the gate plugins), the built-in tools and the
plugins' (`session_tools`), the system prompt (built once, or the resumed transcript's),
the `SessionOptions` the settings give (a small local model gets its own limits), and the
transcript open for appending. `SessionOpener` is the session factory of one run: it
builds the provider once and shares it between the run's sessions (`/clear` must not
start a second model server), and `close()` releases it. Composition (compose.py) hands
an opener to each front-end; front-ends never import this module. No threads; terminal
output only through the `notify` callback.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from qshell import __version__
from qshell.agent import transcript as transcripts
from qshell.agent.prompt import build_system_prompt
from qshell.agent.session import (
    Session,
    SessionOptions,
    SessionRequest,
    SessionStats,
    new_session_id,
)
from qshell.config import ProviderName, Settings, small_local_model
from qshell.dirs import Dirs
from qshell.latency.directives import Directives
from qshell.llm.base import Provider
from qshell.llm.messages import Message
from qshell.permissions.confine import confinement
from qshell.plugins import NO_PLUGINS, PluginHost
from qshell.providers import Notify, ProviderConfig, build_provider, provider_config
from qshell.tools import default_tools
from qshell.tools.base import Tool, ToolContext
from qshell.tools.fileview import FileView
from qshell.tools.paths import PathResolver
from qshell.tools.registered import registered_tools


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
        stats=opened.stats,
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
        files_by_prompt=tiny,
        predicts_next=predict,
        directives=Directives.of(
            always_summarize=settings.always_summarize,
            allowlist=settings.tool_post_exec_allowlist,
        ),
        background_reasoning=settings.background_reasoning,
        summarizes_in_background=request.background_summary and settings.summarize_in_background,
        stream_ahead=settings.stream_ahead_tools,
        summary_ahead=request.summary_ahead,
    )


@dataclass(frozen=True, slots=True)
class _Opened:
    """A session's transcript, new or resumed, and what it says of the session."""

    session_id: str
    system_prompt: str
    history: list[Message]
    stats: SessionStats  # a resumed session's counts go on from its transcript's
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
            SessionStats(
                usage=loaded.usage,
                rounds=loaded.rounds,
                last_prompt_tokens=loaded.last_prompt_tokens,
                position_usage=dict(loaded.position_usage),
            ),
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
    return _Opened(session_id, system_prompt, [], SessionStats(), predict, transcript)
