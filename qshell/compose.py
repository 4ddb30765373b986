"""Composition: build the provider, tools and session a front-end runs.

This is where settings become objects: the provider for the resolved configuration,
the tool context with its path resolver and limits, the system prompt (built once), and
a new or resumed session with its transcript. Front-ends receive what this builds and
never construct providers or tools themselves. No threads, no terminal I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from qshell import __version__
from qshell.agent import transcript as transcripts
from qshell.agent.prompt import build_system_prompt
from qshell.agent.session import Session, SessionRequest, new_session_id
from qshell.config import ProviderConfig, ProviderName, Settings, resolve_provider
from qshell.dirs import Dirs
from qshell.llm.base import Provider
from qshell.tools import default_tools
from qshell.tools.base import ToolContext
from qshell.tools.paths import PathResolver


def build_provider(config: ProviderConfig, settings: Settings) -> Provider:
    """The provider for `config`, with the timeouts and retries from settings."""
    from qshell.llm.http import RetryPolicy, Timeouts

    timeouts = Timeouts(
        connect_s=settings.timeouts.connect_s,
        first_token_s=settings.timeouts.first_token_s,
        idle_s=settings.timeouts.idle_s,
    )
    retry = RetryPolicy(max_attempts=settings.max_retries + 1)
    if config.name is ProviderName.ANTHROPIC:
        from qshell.llm.anthropic import AnthropicProvider

        return AnthropicProvider(config.base_url, config.api_key, timeouts=timeouts, retry=retry)
    from qshell.llm.openai import OpenAIProvider

    return OpenAIProvider(config.base_url, config.api_key, timeouts=timeouts, retry=retry)


def open_session(
    settings: Settings,
    request: SessionRequest,
    *,
    root: Path,
    environ: Mapping[str, str],
    provider: Provider | None = None,
) -> Session:
    """A new or resumed session for `root`, with its transcript open for appending."""
    dirs = Dirs.from_environ(environ)
    config = resolve_provider(settings, environ)
    directory = transcripts.transcripts_dir(dirs.state, root)
    context = ToolContext(
        paths=PathResolver(
            root,
            home=Path(environ.get("HOME") or Path.home()),
            extra_secret_patterns=settings.secret_patterns,
        ),
        environ=dict(environ),
        shell_timeout_s=settings.shell_timeout_s,
    )
    history = []
    last_prompt_tokens = 0
    if request.continue_latest or request.resume_id:
        loaded = transcripts.load(transcripts.find(directory, request.resume_id))
        session_id, system_prompt, history = (
            loaded.session_id,
            loaded.system_prompt,
            loaded.messages,
        )
        last_prompt_tokens = loaded.last_prompt_tokens
        transcript = transcripts.Transcript(directory / f"{session_id}.jsonl")
    else:
        session_id = new_session_id()
        system_prompt = build_system_prompt(root, extra=request.append_system_prompt)
        transcript = transcripts.Transcript.create(
            directory,
            session_id,
            {"cwd": str(root), "version": __version__, "system_prompt": system_prompt},
        )
    return Session(
        provider=provider or build_provider(config, settings),
        model=config.model,
        system_prompt=system_prompt or build_system_prompt(root),
        tools=default_tools(),
        tool_context=context,
        approval_mode=settings.approval_mode,
        max_turns=settings.max_turns,
        max_tokens=settings.max_tokens,
        session_id=session_id,
        transcript=transcript,
        history=history,
        context_window=settings.context_window,
        compact_threshold=settings.compact_threshold,
        last_prompt_tokens=last_prompt_tokens,
    )
