"""Cache-safe forks: side requests that reuse the prompt cache of the main conversation.

`CacheSafeParams` is the last successful main request exactly as it was sent, plus the
assistant reply it produced. A fork (a suggestion now, a speculation later) is that request
with the reply and one new user message appended — same model (unless a fast model is
asked for), system prompt, tools, sampling parameters and every earlier message — so its
serialized prefix is byte-identical to what the provider has just cached. Tools are never
removed (that would change the cache key); callers ignore tool calls in fork replies
instead. The whole history is kept: a truncated history is a different prefix. This is the
only code that builds a fork prefix. Values only; thread-safe.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass

from qshell.llm.messages import ChatRequest, Message, ToolSpec


def params_version(system: str, tools: Sequence[ToolSpec]) -> str:
    """A short fingerprint of what, besides the messages, makes up the cached prefix."""
    payload = json.dumps(
        {"system": system, "tools": [t.model_dump() for t in tools]}, sort_keys=True
    )
    return hashlib.sha256(payload.encode()).hexdigest()[:16]


@dataclass(frozen=True, slots=True)
class CacheSafeParams:
    """The last main request as sent, and its assistant reply."""

    request: ChatRequest
    reply: Message
    version: str

    @classmethod
    def capture(cls, request: ChatRequest, reply: Message) -> CacheSafeParams:
        return cls(request, reply, params_version(request.system, request.tools))

    def fork(self, user_text: str, *, model: str | None = None) -> ChatRequest:
        """The main request + its reply + `user_text` as a new user message."""
        messages = [*self.request.messages, self.reply, Message.user(user_text)]
        update: dict[str, object] = {"messages": messages}
        if model:
            update["model"] = model
        return self.request.model_copy(update=update)
