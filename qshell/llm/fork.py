"""Cache-safe forks: side requests that reuse the prompt cache of the main conversation.

`CacheSafeParams` is the last successful main request exactly as it was sent, plus the
assistant reply it produced. A fork is that request with the reply and new messages
appended — same model (unless a fast model is asked for), system prompt, tools, sampling
parameters and every earlier message — so its serialized prefix is byte-identical to what
the provider has just cached. `fork(text)` is a suggestion request (one new user message);
`continued(messages)` is any round of a forked session (a speculation), whose history
starts with the main request's messages and reply. Tools are never removed to forbid them
(that would change the cache key); callers ignore or refuse tool calls instead. The whole
history is kept: a truncated history is a different prefix. This is the only code that
builds a fork request, and it marks each one `background` (llm/background.py: one retry,
a pause after a 429), a flag no wire format sends. Values only; thread-safe.
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

    @property
    def prefix(self) -> list[Message]:
        """The messages every fork starts with: the main request's, then its reply."""
        return [*self.request.messages, self.reply]

    def fork(self, user_text: str, *, model: str | None = None) -> ChatRequest:
        """The main request + its reply + `user_text` as a new user message."""
        return self.continued([*self.prefix, Message.user(user_text)], model=model)

    def continued(
        self,
        messages: Sequence[Message],
        *,
        model: str | None = None,
        tools: Sequence[ToolSpec] | None = None,
    ) -> ChatRequest:
        """The main request's parameters around `messages` (a history that extends
        `prefix`); `model` replaces the model, and `tools` the tool list only where the
        caller must send none (a toolless last round), at the price of that prefix. The result
        is marked `background` (llm/background.py), which changes nothing on the wire."""
        update: dict[str, object] = {"messages": list(messages), "background": True}
        if model:
            update["model"] = model
        if tools is not None:
            update["tools"] = list(tools)
        return self.request.model_copy(update=update)
