"""EventState: one Messages API stream's events assembled into an assistant message.

Blocks are kept in the order of their stream index: `text` blocks (their `text_delta`s),
`thinking` blocks (their `thinking_delta`s and the `signature_delta` that signs them),
`redacted_thinking` blocks (opaque `data`), and client `tool_use` blocks (their
`input_json_delta`s). Any other block — a server tool's call (`server_tool_use`, its input
from `input_json_delta`s) or result (`web_search_tool_result`, code-execution results, …) —
ran at the provider and is no call for qshell to run: it is kept whole as a `WireBlock`,
to go back as it came when a paused turn (`pause_turn`) continues; citations and other
deltas carry nothing the answer needs. The stop reason is the server's
(`max_tokens`, `refusal`, `pause_turn`, … are never turned into `tool_use`), and a call of
an unfinished round whose JSON is not whole is kept with `complete=False`; a `tool_use`
block's `content_block_stop` makes its call complete (`completed`). Usage counts
the prompt including cache reads and writes. Pure: no I/O; one instance per stream.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from qshell.errors import StreamBroken
from qshell.llm.base import StreamDone, StreamToolCall
from qshell.llm.messages import (
    FINISHED_STOPS,
    Message,
    ReasoningBlock,
    StopReason,
    TextBlock,
    ToolCall,
    Usage,
    WireBlock,
)
from qshell.llm.openai_chunks import is_json_object

_STOP_REASONS: dict[str, StopReason] = {
    "end_turn": "end_turn",
    "stop_sequence": "end_turn",
    "tool_use": "tool_use",
    "max_tokens": "max_tokens",
    "model_context_window_exceeded": "max_tokens",
    "refusal": "refusal",
    "pause_turn": "pause_turn",
}


class _Block:
    """One content block being assembled: its kind and what its deltas brought."""

    def __init__(self, kind: str, *, call_id: str = "", name: str = "", initial: str = ""):
        self.kind = kind  # text | thinking | redacted | tool_use | wire
        self.id = call_id
        self.name = name
        self.initial = initial
        self.parts: list[str] = []
        self.signature: str | None = None
        if kind == "tool_use" and not self.id:  # made up once, the same in every event
            self.id = f"toolu_{uuid.uuid4().hex[:24]}"

    def arguments(self) -> str:
        return "".join(self.parts).strip() or self.initial


class EventState:
    """The assistant message being assembled from one stream's events."""

    def __init__(self) -> None:
        self.blocks: dict[int, _Block] = {}
        self.stop_reason: str | None = None
        self.input_tokens = 0
        self.output_tokens = 0
        self.cache_read: int | None = None
        self.cache_creation: int | None = None
        self.content_seen = False
        self.announced = 0  # tool calls already given out by `completed`
        self._ready: list[StreamToolCall] = []

    def feed(self, kind: str, data: dict[str, Any]) -> tuple[str, str]:
        """Absorb one event; return its (text, reasoning) deltas (possibly empty)."""
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
        elif kind == "content_block_stop":
            self._stop_block(data.get("index"))
        return "", ""  # ping, content_block_stop and unknown future events carry no text

    def completed(self) -> list[StreamToolCall]:
        """The calls whose `tool_use` block stopped since the last look, in index order."""
        ready, self._ready = self._ready, []
        return ready

    def _stop_block(self, index: Any) -> None:
        """A stopped tool_use block is a complete call, when it is the next one in order."""
        block = self.blocks.get(index) if isinstance(index, int) else None
        if block is None or block.kind != "tool_use" or not block.name:
            return
        position = sum(1 for i, b in self.blocks.items() if b.kind == "tool_use" and i < index)
        arguments = block.arguments()
        if position != self.announced or not is_json_object(arguments or "{}"):
            return
        call = ToolCall(id=block.id, name=block.name, arguments=arguments or "{}")
        self._ready.append(StreamToolCall(position, call))
        self.announced += 1

    def _start_block(self, data: dict[str, Any]) -> tuple[str, str]:
        index = data.get("index")
        block = data.get("content_block") or {}
        if not isinstance(index, int) or not isinstance(block, dict):
            return "", ""
        kind = block.get("type")
        if kind == "tool_use":
            self.content_seen = True
            initial = block.get("input")
            call_id = str(block.get("id") or "")
            used = {b.id for i, b in self.blocks.items() if b.kind == "tool_use" and i != index}
            self.blocks[index] = _Block(
                "tool_use",
                # an id an earlier call of this message has is made up anew: results pair
                # with calls by id, and a history with one id twice is one no server takes
                call_id="" if call_id in used else call_id,
                name=str(block.get("name") or ""),
                initial=json.dumps(initial) if isinstance(initial, dict) and initial else "",
            )
        elif kind == "text":
            self.blocks[index] = _Block("text")
            return self._add(index, block.get("text")), ""
        elif kind == "thinking":
            self.blocks[index] = _Block("thinking")
            self._sign(index, block.get("signature"))
            return "", self._add(index, block.get("thinking"))
        elif kind == "redacted_thinking":
            self.blocks[index] = _Block("redacted", initial=str(block.get("data") or ""))
            self.content_seen = True
        elif isinstance(kind, str):  # a server tool's call or result
            self.blocks[index] = _Block("wire", initial=json.dumps(block))
            self.content_seen = True
        return "", ""

    def _delta(self, data: dict[str, Any]) -> tuple[str, str]:
        delta = data.get("delta") or {}
        index = data.get("index")
        if not isinstance(index, int) or not isinstance(delta, dict):
            return "", ""
        block = self.blocks.get(index)
        kind = delta.get("type")
        if kind == "text_delta":
            if block is None:  # a delta without its start: a text block all the same
                self.blocks[index] = block = _Block("text")
            return (self._add(index, delta.get("text")), "") if block.kind == "text" else ("", "")
        if block is None:
            return "", ""
        if kind == "thinking_delta" and block.kind == "thinking":
            return "", self._add(index, delta.get("thinking"))
        if kind == "signature_delta" and block.kind == "thinking":
            self._sign(index, delta.get("signature"))
        elif kind == "input_json_delta" and block.kind in ("tool_use", "wire"):
            self.content_seen = True
            block.parts.append(str(delta.get("partial_json") or ""))
        return "", ""

    def _add(self, index: int, text: Any) -> str:
        if not isinstance(text, str) or not text:
            return ""
        self.blocks[index].parts.append(text)
        self.content_seen = True
        return text

    def _sign(self, index: int, signature: Any) -> None:
        if isinstance(signature, str) and signature:
            block = self.blocks[index]
            block.signature = (block.signature or "") + signature

    def _absorb_usage(self, usage: dict[str, Any]) -> None:
        if isinstance(usage.get("input_tokens"), int):
            self.input_tokens = usage["input_tokens"]
        if isinstance(usage.get("output_tokens"), int):
            self.output_tokens = usage["output_tokens"]
        if isinstance(usage.get("cache_read_input_tokens"), int):
            self.cache_read = usage["cache_read_input_tokens"]
        if isinstance(usage.get("cache_creation_input_tokens"), int):
            self.cache_creation = usage["cache_creation_input_tokens"]

    def stop(self) -> StopReason:
        """The server's stop reason; a finished round is `tool_use` exactly when it has calls."""
        stop = _STOP_REASONS.get(self.stop_reason or "end_turn", "other")
        if stop in FINISHED_STOPS:
            return (
                "tool_use"
                if any(b.kind == "tool_use" for b in self.blocks.values())
                else "end_turn"
            )
        return stop

    def finish(self, base_url: str) -> StreamDone:
        stop = self.stop()
        content: list[TextBlock | ReasoningBlock | ToolCall | WireBlock] = []
        for _, block in sorted(self.blocks.items()):
            made = _made(block, stop, base_url)
            if made is not None:
                content.append(made)
        usage = Usage(
            prompt_tokens=self.input_tokens + (self.cache_read or 0) + (self.cache_creation or 0),
            completion_tokens=self.output_tokens,
            cached_tokens=self.cache_read,
            cache_creation_tokens=self.cache_creation,
        )
        return StreamDone(
            message=Message(role="assistant", content=list(content)),
            usage=usage,
            stop_reason=stop,
            native_stop=self.stop_reason,
        )


def _made(
    block: _Block, stop: StopReason, base_url: str
) -> TextBlock | ReasoningBlock | ToolCall | WireBlock | None:
    """The message block an assembled stream block becomes (None: nothing to keep)."""
    joined = "".join(block.parts)
    if block.kind == "wire":
        return _wire(block.initial, joined)
    if block.kind == "text":
        return TextBlock(text=joined) if joined else None
    if block.kind == "thinking":
        return ReasoningBlock(text=joined, source="thinking", signature=block.signature)
    if block.kind == "redacted":
        return ReasoningBlock(text="", source="thinking", redacted=block.initial)
    if not block.name:
        raise StreamBroken(f"malformed stream from {base_url}: a tool call has no name")
    arguments = block.arguments()
    return ToolCall(
        id=block.id,
        name=block.name,
        arguments=arguments or "{}",
        complete=stop in FINISHED_STOPS or is_json_object(arguments or "{}"),
    )


def _wire(start: str, input_json: str) -> WireBlock:
    """A server tool's block as its `content_block_start` gave it, with the input its
    `input_json_delta`s streamed (a call's input when whole, else as it began)."""
    data = json.loads(start)
    try:
        streamed = json.loads(input_json) if input_json.strip() else None
    except (ValueError, RecursionError):
        streamed = None
    if isinstance(streamed, dict):
        data["input"] = streamed
    return WireBlock(wire="anthropic", data=data)
