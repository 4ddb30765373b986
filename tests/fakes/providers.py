"""The real HTTP providers pointed at the scripted server: the one place a test turns a
protocol name into the OpenAI or the Anthropic provider on that server's address."""

from __future__ import annotations

from typing import Any

from qshell.llm.anthropic import AnthropicProvider
from qshell.llm.openai import OpenAIProvider
from qshell.llm.sse_provider import SSEProvider
from tests.fakes.llm_server import ScriptedLLMServer


def provider_for(server: ScriptedLLMServer, protocol: str, **options: Any) -> SSEProvider:
    """The `protocol` ("openai" or "anthropic") provider on `server`, made with `options`
    (retry, sleep, timeouts, …)."""
    if protocol == "openai":
        return OpenAIProvider(server.openai_base_url, server.api_key, **options)
    return AnthropicProvider(server.anthropic_base_url, server.api_key, **options)
