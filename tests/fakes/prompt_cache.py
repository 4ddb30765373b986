"""A provider-style prompt cache for the fake server: which part of a prompt is already cached.

Real providers bill the longest prefix of a prompt that an earlier request of the same model
already sent at a fraction of the price (OpenAI's `cached_tokens`, Anthropic's cache reads).
`PromptCache.admit` models that exactly and generously: a request's prompt — its tools, then
its system prompt and messages, serialized as sent with `cache_control` markers left out
(they mark where to cache, they are not content) and an OpenAI content list of text parts
read as its text (a chat template renders both forms to the same tokens; DashScope's
markers need the list form) — is compared with every earlier
prompt of the same model, and the longest common prefix, in characters, is the cached part.
The prompt joins the cache as soon as it arrives (a cancelled request was still read); a
reply never does, as with the providers, which cache prompts, not what they generate.
Tokens are characters / `TOKEN_CHARS`, the fake's unit everywhere. Values and one lock:
any handler thread may call `admit`.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from typing import Any

from tests.fakes.prefix import common_prefix
from tests.fakes.recording import Protocol
from tests.fakes.wire import TOKEN_CHARS


@dataclass(frozen=True, slots=True)
class CachedPrompt:
    """One prompt's size and the part of it an earlier prompt covered, in tokens."""

    prompt_tokens: int
    cached_tokens: int

    @property
    def uncached_tokens(self) -> int:
        return self.prompt_tokens - self.cached_tokens


def _without_markers(value: Any, *, join_text: bool) -> Any:
    """`value` without `cache_control` keys; with `join_text`, a message whose content is a
    list of text parts has that content as one string."""
    if isinstance(value, dict):
        content = value.get("content")
        if join_text and isinstance(content, list) and content and all(map(_text_part, content)):
            value = {**value, "content": "".join(part["text"] for part in content)}
        return {
            k: _without_markers(v, join_text=join_text)
            for k, v in value.items()
            if k != "cache_control"
        }
    if isinstance(value, list):
        return [_without_markers(v, join_text=join_text) for v in value]
    return value


def _text_part(part: Any) -> bool:
    return isinstance(part, dict) and part.get("type") == "text"


def prompt_text(protocol: Protocol, body: dict[str, Any]) -> str:
    """The prompt of a request body as the cache sees it: tools, system, then each message."""
    openai = protocol == "openai"
    parts = [json.dumps(_without_markers(body.get("tools"), join_text=openai))]
    if protocol == "anthropic":
        parts.append(json.dumps(_without_markers(body.get("system"), join_text=False)))
    parts.extend(
        json.dumps(_without_markers(m, join_text=openai)) for m in body.get("messages") or []
    )
    return "".join(parts)


def tokens(chars: int) -> int:
    return -(-chars // TOKEN_CHARS)


class PromptCache:
    """Every prompt seen so far, per model."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._prompts: dict[str, list[str]] = {}

    def admit(self, protocol: Protocol, body: dict[str, Any]) -> CachedPrompt:
        """Measure `body`'s prompt against the cache, then add it."""
        text = prompt_text(protocol, body)
        model = str(body.get("model") or "")
        with self._lock:
            earlier = list(self._prompts.get(model, ()))
            self._prompts.setdefault(model, []).append(text)
        shared = max((common_prefix(text, seen) for seen in earlier), default=0)
        size = tokens(len(text))
        return CachedPrompt(size, size if shared == len(text) else shared // TOKEN_CHARS)
