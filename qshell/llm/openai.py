"""OpenAIProvider: the Chat Completions wire format (OpenAI and compatible local servers).

It converts a `ChatRequest` into a `/chat/completions` body (tool results become `tool`
role messages) and parses the streamed chunks back: text deltas, tool-call deltas
accumulated by index across parallel calls (tolerating servers that repeat ids and names,
omit the index, or still send the legacy `function_call`), finish reason and usage.
Transport, retries, timeouts, cancellation and error translation are not its business:
they live in `http.py`. The API key goes only into the Authorization header and never
into a message, log line or repr. Thread-safe: concurrent `stream` calls share one
`HttpStreamer` and keep their parse state local.
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

DONE_SENTINEL = "[DONE]"
_FINISH_TO_STOP: dict[str, StopReason] = {
    "stop": "end_turn",
    "length": "max_tokens",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
}


class OpenAIProvider(SSEProvider):
    """A `Provider` for `POST {base_url}/chat/completions` with `stream: true`."""

    name = "openai"

    path = "/chat/completions"
    key_env = "OPENAI_API_KEY"
    model_env = "OPENAI_MODEL"
    default_base_url = ""

    def _headers(self) -> dict[str, str]:
        return {"authorization": f"Bearer {self._api_key}"} if self._api_key else {}

    def _body(self, request: ChatRequest) -> dict[str, Any]:
        return build_body(request)

    def _parse(
        self, events: Iterator[ServerSentEvent], progress: StreamProgress, model: str
    ) -> Iterator[StreamEvent]:
        state = _ChunkState()
        done = False
        for event in events:
            data = event.data.strip()
            if not data:
                continue
            if data == DONE_SENTINEL:
                done = True
                break
            chunk = self._decode(data, "a chunk")
            if chunk.get("error"):
                raise error_from_payload(chunk, self._endpoint, model)
            text = state.feed(chunk)
            if state.content_seen:
                progress.mark_content()
            if text:
                yield StreamText(text)
        if not done and state.finish_reason is None:
            raise StreamCut(f"the stream from {self.base_url} ended before the answer was complete")
        yield state.finish(self.base_url)


def build_body(request: ChatRequest) -> dict[str, Any]:
    """The `/chat/completions` JSON body for `request`."""
    body: dict[str, Any] = {
        "model": request.model,
        "messages": _messages(request),
        "stream": True,
        "stream_options": {"include_usage": True},
        "max_tokens": request.max_tokens,
    }
    if request.tools:
        body["tools"] = [
            {
                "type": "function",
                "function": {
                    "name": tool.name,
                    "description": tool.description,
                    "parameters": tool.parameters,
                },
            }
            for tool in request.tools
        ]
        if request.tool_choice:
            body["tool_choice"] = {"type": "function", "function": {"name": request.tool_choice}}
    if request.temperature is not None:
        body["temperature"] = request.temperature
    return body


def _messages(request: ChatRequest) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    if request.system:
        out.append({"role": "system", "content": request.system})
    for message in request.messages:
        if message.role == "assistant":
            out.append(_assistant(message))
            continue
        for block in message.content:
            if isinstance(block, ToolResultBlock):
                out.append(
                    {"role": "tool", "tool_call_id": block.tool_call_id, "content": block.content}
                )
        texts = [b.text for b in message.content if isinstance(b, TextBlock)]
        if texts:
            out.append({"role": "user", "content": "".join(texts)})
    return out


def _assistant(message: Message) -> dict[str, Any]:
    calls = message.tool_calls
    entry: dict[str, Any] = {"role": "assistant", "content": message.text or None}
    if calls:
        entry["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": call.arguments or "{}"},
            }
            for call in calls
        ]
    elif entry["content"] is None:
        entry["content"] = ""
    return entry


class _CallSlot:
    """One tool call being assembled from deltas."""

    def __init__(self) -> None:
        self.id = ""
        self.name = ""
        self.arguments: list[str] = []


class _ChunkState:
    """The assistant message being assembled from one stream's chunks."""

    def __init__(self) -> None:
        self.text: list[str] = []
        self.slots: list[_CallSlot] = []
        self._by_index: dict[int, _CallSlot] = {}
        self._by_id: dict[str, _CallSlot] = {}
        self._legacy: _CallSlot | None = None
        self.finish_reason: str | None = None
        self.usage: dict[str, Any] | None = None
        self.content_seen = False

    def feed(self, chunk: dict[str, Any]) -> str:
        """Absorb one chunk; return its text delta."""
        if isinstance(chunk.get("usage"), dict):
            self.usage = chunk["usage"]
        text: list[str] = []
        for choice in chunk.get("choices") or []:
            if not isinstance(choice, dict) or choice.get("index", 0) not in (0, None):
                continue
            # A server that answered with one whole completion sends `message`, not `delta`.
            delta = choice.get("delta") or choice.get("message") or {}
            content = delta.get("content")
            if isinstance(content, str) and content:
                text.append(content)
                self.content_seen = True
            calls = delta.get("tool_calls") or []
            for call in calls:
                if isinstance(call, dict):
                    self._feed_call(call)
            # Some servers mirror tool_calls in the legacy field; it counts only on its own.
            legacy = delta.get("function_call")
            if isinstance(legacy, dict) and not calls and self._legacy_allowed():
                self._feed_legacy(legacy)
            if choice.get("finish_reason"):
                self.finish_reason = str(choice["finish_reason"])
        joined = "".join(text)
        self.text.append(joined)
        return joined

    def _feed_call(self, call: dict[str, Any]) -> None:
        self.content_seen = True
        index = call.get("index")
        call_id = call.get("id") if isinstance(call.get("id"), str) else ""
        slot = self._by_id.get(call_id) if call_id else None
        if slot is None and isinstance(index, int):
            current = self._by_index.get(index)
            # Same index but a new id: a server that numbers every call 0.
            if current is not None and not (call_id and current.id and current.id != call_id):
                slot = current
        if slot is None and index is None and not call_id and self.slots:
            slot = self.slots[-1]
        if slot is None:
            slot = _CallSlot()
            self.slots.append(slot)
        if isinstance(index, int):
            self._by_index[index] = slot
        if call_id and not slot.id:
            slot.id = call_id
            self._by_id[call_id] = slot
        function = call.get("function") or {}
        self._absorb(slot, function)

    def _legacy_allowed(self) -> bool:
        return self._legacy is not None or not self.slots

    def _feed_legacy(self, function: dict[str, Any]) -> None:
        self.content_seen = True
        if self._legacy is None:
            self._legacy = _CallSlot()
            self.slots.append(self._legacy)
        self._absorb(self._legacy, function)

    @staticmethod
    def _absorb(slot: _CallSlot, function: dict[str, Any]) -> None:
        name = function.get("name")
        if isinstance(name, str) and name and not slot.name:
            slot.name = name  # a repeated name is the same name, never a suffix
        arguments = function.get("arguments")
        if isinstance(arguments, str):
            slot.arguments.append(arguments)
        elif isinstance(arguments, dict):  # a few servers send the object itself
            slot.arguments = [json.dumps(arguments)]

    def finish(self, base_url: str) -> StreamDone:
        calls: list[ToolCall] = []
        for slot in self.slots:
            if not slot.name:
                raise StreamBroken(f"malformed stream from {base_url}: a tool call has no name")
            arguments = "".join(slot.arguments).strip() or "{}"
            call_id = slot.id or f"call_{uuid.uuid4().hex[:24]}"
            calls.append(ToolCall(id=call_id, name=slot.name, arguments=arguments))
        stop: StopReason = (
            "tool_use" if calls else _FINISH_TO_STOP.get(self.finish_reason or "stop", "other")
        )
        if stop == "tool_use" and not calls:
            stop = "end_turn"
        return StreamDone(
            message=Message.assistant("".join(self.text), calls),
            usage=_usage(self.usage),
            stop_reason=stop,
        )


def _usage(raw: dict[str, Any] | None) -> Usage:
    if not raw:
        return Usage(known=False)
    details = raw.get("prompt_tokens_details")
    cached = details.get("cached_tokens") if isinstance(details, dict) else None
    return Usage(
        prompt_tokens=_int(raw.get("prompt_tokens")),
        completion_tokens=_int(raw.get("completion_tokens")),
        cached_tokens=cached if isinstance(cached, int) else None,
    )


def _int(value: Any) -> int:
    return value if isinstance(value, int) else 0
