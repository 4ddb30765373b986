"""Providers from settings: the one place a resolved configuration becomes a `Provider`.

`build_provider` gives the wire-format provider (OpenAI-compatible or Anthropic) with the
timeouts, retries and request options of the settings, or starts the embedded model's
server for `local` (progress through `notify`); `provider_config` resolves which provider
a run uses. Part of composition (compose.py uses it, and doctor.py); front-ends never
call it. No threads of its own; the local server's child process is owned by its provider.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING

from qshell.config import (
    ProviderConfig,
    ProviderName,
    Settings,
    resolve_provider,
    small_local_model,
)
from qshell.dirs import Dirs
from qshell.llm.base import Provider

if TYPE_CHECKING:
    from qshell.llm.http import Timeouts

Notify = Callable[[str], None]

LOCAL_FIRST_TOKEN_S = 900.0
"""The embedded model answers rounds with tools in one piece, after a prefill that runs at
a few hundred tokens a second on a small machine: the first-token watchdog waits longer."""


def build_provider(
    config: ProviderConfig,
    settings: Settings,
    *,
    environ: Mapping[str, str] | None = None,
    notify: Notify | None = None,
) -> Provider:
    """The provider for `config`, with the timeouts and retries from settings. For `local`
    this starts the model server and reports progress through `notify`."""
    from qshell.llm.http import RetryPolicy, Timeouts

    timeouts = Timeouts.of(settings.timeouts)
    retry = RetryPolicy(max_attempts=settings.max_retries + 1)
    if config.name is ProviderName.LOCAL:
        return _local_provider(settings, environ or {}, notify, timeouts)
    if config.name is ProviderName.ANTHROPIC:
        from qshell.llm.anthropic import AnthropicProvider

        return AnthropicProvider(config.base_url, config.api_key, timeouts=timeouts, retry=retry)
    from qshell.llm.openai import OpenAIProvider

    return OpenAIProvider(
        config.base_url,
        config.api_key,
        timeouts=timeouts,
        retry=retry,
        dashscope_cache=settings.dashscope_cache,
    )


def _local_provider(
    settings: Settings, environ: Mapping[str, str], notify: Notify | None, timeouts: Timeouts
) -> Provider:
    from qshell.llm.http import RetryPolicy
    from qshell.llm.local import LocalModel, LocalServer
    from qshell.llm.local_provider import LocalProvider

    dirs = Dirs.from_environ(environ)
    local = settings.local
    model = LocalModel.choose(
        model_path=local.model_path,
        cache_dir=dirs.cache,
        n_ctx=local.context_size,
        threads=local.threads,
        convert=local.convert,
        chat_format=local.chat_format,
        start_timeout_s=local.start_timeout_s,
        small=small_local_model(settings),
    )
    server = LocalServer(model, log_dir=dirs.state)
    server.start(notify)
    return LocalProvider(
        server,
        timeouts=replace(
            timeouts,
            first_token_s=max(timeouts.first_token_s, LOCAL_FIRST_TOKEN_S),
            idle_s=max(timeouts.idle_s, LOCAL_FIRST_TOKEN_S),
        ),
        retry=RetryPolicy(max_attempts=1),  # a local server that failed will fail again
    )


def provider_config(settings: Settings, environ: Mapping[str, str]) -> ProviderConfig:
    """The resolved provider; the embedded model counts when its extra is installed."""
    from qshell.llm.local import local_available

    return resolve_provider(settings, environ, local_available=local_available)
