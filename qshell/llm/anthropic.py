"""AnthropicProvider: the Messages API wire format with prompt caching.

It converts a `ChatRequest` into a `/v1/messages` body — the system prompt as a cached
text block, tools with a cache breakpoint on the last one, tool calls as `tool_use` and
results as `tool_result` blocks, consecutive same-role messages merged, a cache
breakpoint on the last block of the last message, and `tool_choice: none` for a round
that may call no tool (never a `thinking` field: see `build_body`); signed thinking blocks go back
unchanged, as tool-use turns require, so do server tools' calls and results (`WireBlock`s,
which a `pause_turn` continues from), and a call cut off by the output limit is left out
with its result — and streams the events through `EventState` (llm/anthropic_events.py)
as text, reasoning and one `StreamDone`. An `event: error` ends the stream with the
server's message, whatever its data's own `type` says (llama.cpp's says `server_error`). Transport, retries, timeouts, cancellation and error translation live in
`http.py`, not here. The key goes only into the `x-api-key` header, never into a message,
log line or repr. Thread-safe: concurrent `stream` calls keep their parse state local.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from httpx_sse import ServerSentEvent

from qshell.llm.anthropic_events import EventState
from qshell.llm.base import StreamEvent, StreamReasoning, StreamText, ending
from qshell.llm.errors_map import error_from_payload
from qshell.llm.http import (
    StreamCut,
    StreamProgress,
)
from qshell.llm.messages import (
    ChatRequest,
    ContentBlock,
    Message,
    ReasoningBlock,
    TextBlock,
    ToolCall,
    WireBlock,
    without_cut_calls,
)
from qshell.llm.rejections import Knob
from qshell.llm.sse_provider import SSEProvider

ANTHROPIC_VERSION = "2023-06-01"
DEFAULT_BASE_URL = "https://api.anthropic.com"
_EPHEMERAL: dict[str, str] = {"type": "ephemeral"}
THINKING_TYPES = ("thinking", "redacted_thinking")
WIRE = "anthropic"  # the `WireBlock.wire` of the blocks this format keeps as they came


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

    def _body(self, request: ChatRequest, dropped: frozenset[Knob] = frozenset()) -> dict[str, Any]:
        return build_body(request)  # it places no wire knob

    def _parse(
        self, events: Iterator[ServerSentEvent], progress: StreamProgress, model: str
    ) -> Iterator[StreamEvent]:
        state = EventState()
        for event in events:
            if not event.data.strip():
                continue
            data = self._decode(event.data, "an event")
            kind = "error" if event.event == "error" else data.get("type") or event.event
            if kind == "error":
                raise error_from_payload(data, self._endpoint, model, in_stream=True)
            if kind == "message_stop":
                yield from ending(state.finish(self.base_url), state.announced)
                return
            text, reasoning = state.feed(kind, data)
            if state.content_seen:
                progress.mark_content()
            if reasoning:
                yield StreamReasoning(reasoning)
            if text:
                yield StreamText(text)
            yield from state.completed()
        raise StreamCut(f"the stream from {self.base_url} ended before message_stop")


def build_body(request: ChatRequest) -> dict[str, Any]:
    """The `/v1/messages` JSON body for `request`, with cache breakpoints placed.

    `no_tool_calls` sends `tool_choice: {"type": "none"}` with the tools still listed;
    Anthropic documents that a changed `tool_choice` invalidates the cached message blocks
    (system and tools stay cached), so such a round re-reads its messages. `reasoning_off`
    sends nothing: qshell never enables extended thinking, and a request without `thinking`
    has it off, so off needs no field, and leaving it out keeps the prefix of a request
    that is not off byte-identical (a changed `thinking` also invalidates cached messages)."""
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
        if request.no_tool_calls:
            body["tool_choice"] = {"type": "none"}
        elif request.tool_choice:
            body["tool_choice"] = {"type": "tool", "name": request.tool_choice}
    if request.temperature is not None:
        body["temperature"] = request.temperature
    return body


def _messages(messages: list[Message]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for message in without_cut_calls(messages):
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
    if out and out[-1]["content"][-1]["type"] not in THINKING_TYPES:
        out[-1]["content"][-1]["cache_control"] = dict(_EPHEMERAL)
    return out


def _block(block: ContentBlock) -> dict[str, Any] | None:
    if isinstance(block, TextBlock):
        return {"type": "text", "text": block.text} if block.text else None
    if isinstance(block, ReasoningBlock):
        return _thinking(block)
    if isinstance(block, ToolCall):
        try:
            arguments = block.parsed_arguments()
        except ValueError:
            arguments = {}
        return {"type": "tool_use", "id": block.id, "name": block.name, "input": arguments}
    if isinstance(block, WireBlock):  # a server tool's call or result, as it came
        return dict(block.data) if block.wire == WIRE else None
    return {
        "type": "tool_result",
        "tool_use_id": block.tool_call_id,
        "content": block.content,
        "is_error": block.is_error,
    }


def _thinking(block: ReasoningBlock) -> dict[str, Any] | None:
    """A thinking block as Anthropic signed it, unchanged; reasoning it did not sign (another
    provider's, or a server that signs nothing) cannot be verified and is not sent."""
    if block.redacted is not None:
        return {"type": "redacted_thinking", "data": block.redacted}
    if block.source != "thinking" or not block.signature:
        return None
    return {"type": "thinking", "thinking": block.text, "signature": block.signature}
