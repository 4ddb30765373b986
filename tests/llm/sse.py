"""Tiny builders for server-sent-event bodies and scripted httpx.MockTransports.

Test helpers only: no assertions, no sockets. `Script` answers each request with the next
scripted reply (an `httpx.Response` or an exception to raise) and records the requests.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import Any

import httpx

SSE_HEADERS = {"content-type": "text/event-stream"}


def event(data: Any, name: str | None = None) -> str:
    """One SSE event; `data` is JSON-encoded unless it is already a string."""
    text = data if isinstance(data, str) else json.dumps(data)
    head = f"event: {name}\n" if name else ""
    return f"{head}data: {text}\n\n"


def chunk(
    content: str | None = None,
    *,
    tool_calls: list[dict[str, Any]] | None = None,
    function_call: dict[str, Any] | None = None,
    finish: str | None = None,
    usage: dict[str, Any] | None = None,
) -> str:
    """One OpenAI chat.completion.chunk event."""
    delta: dict[str, Any] = {}
    if content is not None:
        delta["content"] = content
    if tool_calls is not None:
        delta["tool_calls"] = tool_calls
    if function_call is not None:
        delta["function_call"] = function_call
    body: dict[str, Any] = {"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    if usage is not None:
        body["usage"] = usage
    return event(body)


def anthropic(kind: str, **fields: Any) -> str:
    """One Anthropic Messages stream event."""
    return event({"type": kind, **fields}, kind)


def sse_response(*events: str, status: int = 200) -> httpx.Response:
    return httpx.Response(status, headers=SSE_HEADERS, content="".join(events).encode())


def broken_response(*events: str) -> httpx.Response:
    """A 200 stream that sends `events` and then fails with a read error."""

    def body() -> Iterator[bytes]:
        for item in events:
            yield item.encode()
        raise httpx.ReadError("connection reset by peer")

    return httpx.Response(200, headers=SSE_HEADERS, content=body())


def json_response(
    status: int, payload: Any, headers: dict[str, str] | None = None
) -> httpx.Response:
    return httpx.Response(status, json=payload, headers=headers or {})


class Script:
    """A MockTransport that plays scripted replies in order and records every request."""

    def __init__(self, *replies: httpx.Response | Exception) -> None:
        self._replies = list(replies)
        self.requests: list[httpx.Request] = []
        self.first_request = threading.Event()
        self.transport = httpx.MockTransport(self._handle)

    @property
    def bodies(self) -> list[dict[str, Any]]:
        return [json.loads(r.content) for r in self.requests]

    def _handle(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        self.first_request.set()
        if not self._replies:
            raise AssertionError("the provider sent more requests than were scripted")
        reply = self._replies.pop(0)
        if isinstance(reply, Exception):
            raise reply
        return reply


class Sleeps:
    """An injected `sleep` that records the delays and never waits."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    def __call__(self, cancel: Any, seconds: float) -> bool:
        self.delays.append(seconds)
        return bool(cancel.cancelled)
