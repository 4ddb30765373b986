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
a pause after a 429), a flag no wire format sends. Two knobs may differ from the main
request: under `backgroundReasoning: off` (the default) a fork asks for reasoning off
(`reasoning_off`), which the wire formats may send as a parameter outside the messages —
the price is in llm/background.py; under `inherit` it sends what the main request sent. A
speculation's round may call tools, so `continued` never asks for `no_tool_calls`, while a
suggestion (`fork`) keeps the main request's. Values only; thread-safe.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass

from qshell.config import DEFAULTS, BackgroundReasoning
from qshell.llm.messages import ChatRequest, Message, ToolSpec


def params_version(system: str, tools: Sequence[ToolSpec]) -> str:
    """A short fingerprint of what, besides the messages, makes up the cached prefix."""
    payload = json.dumps(
        {"system": system, "tools": [t.model_dump() for t in tools]}, sort_keys=True
    )
    return hashlib.sha256(payload.encode()).hexdigest()[:16]


@dataclass(frozen=True, slots=True)
class CacheSafeParams:
    """The last main request as sent, its assistant reply, and what forks do with reasoning."""

    request: ChatRequest
    reply: Message
    version: str
    background_reasoning: BackgroundReasoning = DEFAULTS.background_reasoning

    @classmethod
    def capture(
        cls,
        request: ChatRequest,
        reply: Message,
        *,
        background_reasoning: BackgroundReasoning = DEFAULTS.background_reasoning,
    ) -> CacheSafeParams:
        version = params_version(request.system, request.tools)
        return cls(request, reply, version, background_reasoning)

    @property
    def prefix(self) -> list[Message]:
        """The messages every fork starts with: the main request's, then its reply."""
        return [*self.request.messages, self.reply]

    def fork(self, user_text: str, *, model: str | None = None) -> ChatRequest:
        """The main request + its reply + `user_text` as a new user message."""
        messages = [*self.prefix, Message.user(user_text)]
        return self.continued(messages, model=model, no_tool_calls=self.request.no_tool_calls)

    def continued(
        self,
        messages: Sequence[Message],
        *,
        model: str | None = None,
        tools: Sequence[ToolSpec] | None = None,
        no_tool_calls: bool = False,
    ) -> ChatRequest:
        """The main request's parameters around `messages` (a history that extends
        `prefix`); `model` replaces the model, and `tools` the tool list only where the
        caller must send none (a toolless last round), at the price of that prefix. The result
        is marked `background` (llm/background.py), which changes nothing on the wire, and
        asks for reasoning off unless forks inherit the main request's reasoning."""
        reasoning_off = self.request.reasoning_off or (
            self.background_reasoning is BackgroundReasoning.OFF
        )
        update: dict[str, object] = {
            "messages": list(messages),
            "background": True,
            "reasoning_off": reasoning_off,
            "no_tool_calls": no_tool_calls,
        }
        if model:
            update["model"] = model
        if tools is not None:
            update["tools"] = list(tools)
        return self.request.model_copy(update=update)
