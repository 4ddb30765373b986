"""What the provider tests share: a `ChatRequest` with their defaults, and the `StreamDone`
that ends a stream's events."""

from __future__ import annotations

from typing import Any

from qshell.llm.base import StreamDone, StreamEvent
from qshell.llm.messages import ChatRequest, Message


def chat_request(model: str, system: str, /, **overrides: Any) -> ChatRequest:
    """A request for `model` with `system`, the user saying "hi", then `overrides`."""
    fields: dict[str, Any] = {"model": model, "system": system, "messages": [Message.user("hi")]}
    fields.update(overrides)
    return ChatRequest(**fields)


def done_of(events: list[StreamEvent]) -> StreamDone:
    """The last event, which must be the `StreamDone`."""
    last = events[-1]
    assert isinstance(last, StreamDone)
    return last
