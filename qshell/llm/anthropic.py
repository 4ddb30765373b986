"""AnthropicProvider: the Messages API wire format with prompt caching.

It converts a `ChatRequest` into a `/v1/messages` body — the system prompt as a cached
text block, tools with a cache breakpoint on the last one, tool calls as `tool_use` and
results as `tool_result` blocks, consecutive same-role messages merged, and a cache
breakpoint on the last block of the last message — and parses the streamed events back
into text, tool calls, stop reason and usage (prompt tokens counted including cache reads
and writes). Transport, retries, timeouts, cancellation and error translation live in
`http.py`, not here. The key goes only into the `x-api-key` header, never into a message,
log line or repr. Thread-safe: concurrent `stream` calls keep their parse state local.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

from httpx_sse import ServerSentEvent

from qshell.errors import StreamBroken
from qshell.llm.base import StreamDone, StreamEvent, StreamText
from qshell.llm.errors_map import error_from_payload
from qshell.llm.http import (
    StreamCut,
    StreamProgress,
)
from qshell.llm.messages import (
    ChatRequest,
    Message,
    StopReason,
    TextBlock,
    ToolCall,
    ToolResultBlock,
    Usage,
)
from qshell.llm.sse_provider import SSEProvider

ANTHROPIC_VERSION = "2023-06-01"
DEFAULT_BASE_URL = "https://api.anthropic.com"
_EPHEMERAL: dict[str, str] = {"type": "ephemeral"}
_STOP_REASONS: dict[str, StopReason] = {
    "end_turn": "end_turn",
    "stop_sequence": "end_turn",
    "tool_use": "tool_use",
    "max_tokens": "max_tokens",
}


class AnthropicProvider(SSEProvider):
    """A `Provider` for `POST {base_url}/v1/messages` with `stream: true`."""

    name = "anthropic"

    path = "/v1/messages"
    key_env = "ANTHROPIC_API_KEY"
    model_env = "ANTHROPIC_MODEL"
    default_base_url = DEFAULT_BASE_URL

    def _headers(self) -> dict[str, str]:
        headers = {"anthropic-version": ANTHROPIC_VERSION}
        if self._api_key:
            headers["x-api-key"] = self._api_key
        return headers

    def _body(self, request: ChatRequest) -> dict[str, Any]:
        return build_body(request)

    def _parse(
        self, events: Iterator[ServerSentEvent], progress: StreamProgress, model: str
    ) -> Iterator[StreamEvent]:
        state = _EventState()
        for event in events:
            if not event.data.strip():
                continue
            data = self._decode(event.data, "an event")
            kind = data.get("type") or event.event
            if kind == "error":
                raise error_from_payload(data, self._endpoint, model)
            if kind == "message_stop":
                yield state.finish(self.base_url)
                return
            text = state.feed(kind, data)
            if state.content_seen:
                progress.mark_content()
            if text:
                yield StreamText(text)
        raise StreamCut(f"the stream from {self.base_url} ended before message_stop")


def build_body(request: ChatRequest) -> dict[str, Any]:
    """The `/v1/messages` JSON body for `request`, with cache breakpoints placed."""
    body: dict[str, Any] = {
        "model": request.model,
        "max_tokens": request.max_tokens,
        "stream": True,
        "messages": _messages(request.messages),
    }
    if request.system:
        body["system"] = [{"type": "text", "text": request.system, "cache_control": _EPHEMERAL}]
    if request.tools:
        tools: list[dict[str, Any]] = [
            {"name": t.name, "description": t.description, "input_schema": t.parameters}
            for t in request.tools
        ]
        tools[-1]["cache_control"] = dict(_EPHEMERAL)
        body["tools"] = tools
        if request.tool_choice:
            body["tool_choice"] = {"type": "tool", "name": request.tool_choice}
    if request.temperature is not None:
        body["temperature"] = request.temperature
    return body


def _messages(messages: list[Message]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for message in messages:
        blocks = [_block(b) for b in message.content]
        blocks = [b for b in blocks if b is not None]
        if not blocks:
            continue
        if out and out[-1]["role"] == message.role:
            out[-1]["content"].extend(blocks)  # Anthropic requires alternating roles
        else:
            out.append({"role": message.role, "content": blocks})
    for entry in out:
        if entry["role"] == "user":  # tool results must lead a user message
            entry["content"].sort(key=lambda b: b["type"] != "tool_result")
    if out:
        out[-1]["content"][-1]["cache_control"] = dict(_EPHEMERAL)
    return out


def _block(block: TextBlock | ToolCall | ToolResultBlock) -> dict[str, Any] | None:
    if isinstance(block, TextBlock):
        return {"type": "text", "text": block.text} if block.text else None
    if isinstance(block, ToolCall):
        try:
            arguments = block.parsed_arguments()
        except ValueError:
            arguments = {}
        return {"type": "tool_use", "id": block.id, "name": block.name, "input": arguments}
    return {
        "type": "tool_result",
        "tool_use_id": block.tool_call_id,
        "content": block.content,
        "is_error": block.is_error,
    }


class _ToolUse:
    """One tool_use block being assembled from its streamed JSON input."""

    def __init__(self, call_id: str, name: str, initial: str) -> None:
        self.id = call_id
        self.name = name
        self.initial = initial
        self.parts: list[str] = []


class _EventState:
    """The assistant message being assembled from one stream's events."""

    def __init__(self) -> None:
        self.tool_uses: dict[int, _ToolUse] = {}
        self.text: list[str] = []
        self.stop_reason: str | None = None
        self.input_tokens = 0
        self.output_tokens = 0
        self.cache_read: int | None = None
        self.cache_creation: int | None = None
        self.content_seen = False

    def feed(self, kind: str, data: dict[str, Any]) -> str:
        """Absorb one event; return its text delta (possibly empty)."""
        if kind == "message_start":
            message = data.get("message") or {}
            self._absorb_usage(message.get("usage") or {})
        elif kind == "content_block_start":
            return self._start_block(data)
        elif kind == "content_block_delta":
            return self._delta(data)
        elif kind == "message_delta":
            delta = data.get("delta") or {}
            if delta.get("stop_reason"):
                self.stop_reason = str(delta["stop_reason"])
            self._absorb_usage(data.get("usage") or {})
        return ""  # ping, content_block_stop and unknown future events carry nothing we need

    def _start_block(self, data: dict[str, Any]) -> str:
        index = data.get("index")
        block = data.get("content_block") or {}
        if not isinstance(index, int) or not isinstance(block, dict):
            return ""
        if block.get("type") == "tool_use":
            self.content_seen = True
            initial = block.get("input")
            self.tool_uses[index] = _ToolUse(
                str(block.get("id") or ""),
                str(block.get("name") or ""),
                json.dumps(initial) if isinstance(initial, dict) and initial else "",
            )
        elif block.get("type") == "text" and isinstance(block.get("text"), str):
            return self._text(block["text"])
        return ""  # thinking and other block types are not part of the answer

    def _delta(self, data: dict[str, Any]) -> str:
        delta = data.get("delta") or {}
        index = data.get("index")
        kind = delta.get("type")
        if kind == "text_delta" and isinstance(delta.get("text"), str):
            return self._text(delta["text"])
        target = self.tool_uses.get(index) if isinstance(index, int) else None
        if kind == "input_json_delta" and target is not None:
            self.content_seen = True
            target.parts.append(str(delta.get("partial_json") or ""))
        return ""

    def _text(self, text: str) -> str:
        if text:
            self.text.append(text)
            self.content_seen = True
        return text

    def _absorb_usage(self, usage: dict[str, Any]) -> None:
        if isinstance(usage.get("input_tokens"), int):
            self.input_tokens = usage["input_tokens"]
        if isinstance(usage.get("output_tokens"), int):
            self.output_tokens = usage["output_tokens"]
        if isinstance(usage.get("cache_read_input_tokens"), int):
            self.cache_read = usage["cache_read_input_tokens"]
        if isinstance(usage.get("cache_creation_input_tokens"), int):
            self.cache_creation = usage["cache_creation_input_tokens"]

    def finish(self, base_url: str) -> StreamDone:
        calls: list[ToolCall] = []
        for _, use in sorted(self.tool_uses.items()):
            if not use.name:
                raise StreamBroken(f"malformed stream from {base_url}: a tool call has no name")
            calls.append(
                ToolCall(
                    id=use.id or f"toolu_{uuid.uuid4().hex[:24]}",
                    name=use.name,
                    arguments="".join(use.parts).strip() or use.initial or "{}",
                )
            )
        if calls:
            stop: StopReason = "tool_use"
        else:
            stop = _STOP_REASONS.get(self.stop_reason or "end_turn", "other")
            if stop == "tool_use":
                stop = "end_turn"
        usage = Usage(
            prompt_tokens=self.input_tokens + (self.cache_read or 0) + (self.cache_creation or 0),
            completion_tokens=self.output_tokens,
            cached_tokens=self.cache_read,
            cache_creation_tokens=self.cache_creation,
        )
        return StreamDone(
            message=Message.assistant("".join(self.text), calls), usage=usage, stop_reason=stop
        )
