"""Providers from settings: the one place a resolved configuration becomes a `Provider`.

`resolve_provider` picks which provider a run uses (the explicit setting, else the OpenAI or
Anthropic variables, else the embedded model) as a `ProviderConfig`; `provider_config` does so
with the `local` extra's availability. `build_provider` gives the wire-format provider
(OpenAI-compatible or Anthropic) with the timeouts, retries and request options of the
settings, or starts the embedded model's server for `local` (progress through `notify`).
Part of composition (compose.py uses it, and doctor.py); front-ends never call it. No
threads of its own; the local server's child process is owned by its provider.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from qshell.config import BUNDLED_MODEL_NAME, ProviderName, Settings, small_local_model
from qshell.dirs import Dirs
from qshell.errors import ConfigError
from qshell.extras import install_command
from qshell.llm.base import Provider

if TYPE_CHECKING:
    from qshell.llm.http import Timeouts

Notify = Callable[[str], None]

DEFAULT_OPENAI_BASE_URL = "https://api.openai.com/v1"
DEFAULT_ANTHROPIC_BASE_URL = "https://api.anthropic.com"
DEFAULT_OPENAI_MODEL = "gpt-4.1"
DEFAULT_ANTHROPIC_MODEL = "claude-sonnet-4-5"

LOCAL_FIRST_TOKEN_S = 900.0
"""The embedded model answers rounds with tools in one piece, after a prefill that runs at
a few hundred tokens a second on a small machine: the first-token watchdog waits longer."""


@dataclass(frozen=True, slots=True)
class ProviderConfig:
    """Which backend to call, where, and with which key. `repr` never shows the key."""

    name: ProviderName
    base_url: str
    model: str
    api_key: str | None
    key_env: str
    chosen_by_default: bool = False  # the embedded model, because nothing was configured

    def __repr__(self) -> str:
        key = "set" if self.api_key else "none"
        return f"ProviderConfig(name={self.name}, base_url={self.base_url!r}, model={self.model!r}, key={key})"


def resolve_provider(
    settings: Settings,
    environ: Mapping[str, str],
    *,
    local_available: Callable[[], bool] = lambda: False,
) -> ProviderConfig:
    """Pick the provider: explicit setting, else OpenAI variables, else Anthropic's, else
    the embedded model when `local_available()` says the `local` extra is installed."""
    openai_base = environ.get("OPENAI_BASE_URL") or environ.get("OPENAI_API_BASE")
    name = settings.provider
    chosen_by_default = False
    if name is ProviderName.AUTO:
        if environ.get("OPENAI_API_KEY") or openai_base:
            name = ProviderName.OPENAI
        elif environ.get("ANTHROPIC_API_KEY"):
            name = ProviderName.ANTHROPIC
        else:
            if not local_available():
                raise ConfigError(
                    "no model provider is configured: set OPENAI_API_KEY (and OPENAI_BASE_URL "
                    "for an OpenAI-compatible server such as vLLM, Ollama or llama.cpp) or "
                    "ANTHROPIC_API_KEY, or install the offline model with "
                    + install_command("local")
                )
            name = ProviderName.LOCAL
            chosen_by_default = True
    if name is ProviderName.LOCAL:
        return ProviderConfig(
            name=name,
            base_url="",
            model=settings.model or local_model_name(settings),
            api_key=None,
            key_env="",
            chosen_by_default=chosen_by_default,
        )
    if name is ProviderName.OPENAI:
        return ProviderConfig(
            name=name,
            base_url=(settings.base_url or openai_base or DEFAULT_OPENAI_BASE_URL).rstrip("/"),
            model=settings.model or environ.get("OPENAI_MODEL") or DEFAULT_OPENAI_MODEL,
            api_key=environ.get("OPENAI_API_KEY") or None,
            key_env="OPENAI_API_KEY",
        )
    api_key = environ.get("ANTHROPIC_API_KEY") or None
    if api_key is None:
        raise ConfigError("provider 'anthropic' needs ANTHROPIC_API_KEY to be set")
    return ProviderConfig(
        name=name,
        base_url=(
            settings.base_url or environ.get("ANTHROPIC_BASE_URL") or DEFAULT_ANTHROPIC_BASE_URL
        ).rstrip("/"),
        model=settings.model or environ.get("ANTHROPIC_MODEL") or DEFAULT_ANTHROPIC_MODEL,
        api_key=api_key,
        key_env="ANTHROPIC_API_KEY",
    )


def local_model_name(settings: Settings) -> str:
    """The name the embedded model goes by: the GGUF's file name, or the bundled model's."""
    if settings.local.model_path:
        return Path(settings.local.model_path).stem
    return BUNDLED_MODEL_NAME


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
        chat_template=local.chat_template,
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
    return resolve_provider(settings, environ, local_available=_local_available)


def _local_available() -> bool:
    """llm/local.py's answer, imported only when asked (it loads httpx: start-up cost)."""
    from qshell.llm.local import local_available

    return local_available()
