"""ChunkState: one Chat Completions stream's chunks assembled into an assistant message.

What the OpenAI-compatible servers really send, each read where it is: text as a string
`content` or as a list of content parts (Mistral's `text` and `thinking` parts), a
`refusal` (shown as the answer, and the round's stop reason), reasoning as
`reasoning_content` (DeepSeek, Qwen, Grok, Moonshot) or `reasoning` (vLLM, Ollama, Groq,
OpenRouter), tool-call deltas accumulated by index across parallel calls (tolerating
servers that repeat ids and names, omit the index, or still send the legacy
`function_call`), the fields a server puts on a call beyond id, type, index and function
(Gemini's `extra_content.google.thought_signature`, kept whole as `ToolCall.extra`),
OpenRouter's `reasoning_details` (each streamed fragment merged into the entry of its
`index` and `type`), each call's completion (`completed`: a later call has begun and its
arguments are a whole JSON object, so they will not change), the finish reason, Perplexity's
`citations`, and usage with cache reads (`prompt_tokens_details`
or DeepSeek's `prompt_cache_hit_tokens`), cache writes and reasoning tokens (xAI counts
them outside `completion_tokens`; the total says which). A round cut by the output limit
keeps its calls with `complete=False` when their arguments are not whole. Pure: no I/O;
one instance per stream, so concurrent streams never share it.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from qshell.errors import StreamBroken
from qshell.llm.base import StreamDone, StreamToolCall
from qshell.llm.messages import FINISHED_STOPS, Message, ReasoningBlock, StopReason, ToolCall, Usage

# Finish reasons of an answer that did not finish; any other value is a normal end.
_UNFINISHED: dict[str, StopReason] = {
    "length": "max_tokens",
    "max_tokens": "max_tokens",
    "model_length": "max_tokens",
    "content_filter": "content_filter",
    "sensitive": "content_filter",  # GLM
    "safety": "content_filter",
    "refusal": "refusal",
    "network_error": "other",  # GLM
    "insufficient_system_resource": "other",  # DeepSeek
    "error": "other",
}
REASONING_FIELDS = ("reasoning_content", "reasoning")
_CALL_FIELDS = frozenset({"index", "id", "type", "function"})
"""A call delta's fields of the wire format itself; any other is the server's own (`extra`)."""
_DETAIL_TEXTS = frozenset({"text", "summary", "data", "signature"})
"""The fields of a `reasoning_details` entry that its streamed fragments continue."""


class _CallSlot:
    """One tool call being assembled from deltas."""

    def __init__(self) -> None:
        self.id = ""
        self.name = ""
        self.arguments: list[str] = []
        self.index: int | None = None  # the `index` the server gave it first
        self.extra: dict[str, Any] = {}  # fields of its own the server put on the call
        self._fallback_id = ""

    def call_id(self) -> str:
        """The server's id, or one made up once (the same for StreamToolCall and StreamDone)."""
        if self.id:
            return self.id
        self._fallback_id = self._fallback_id or f"call_{uuid.uuid4().hex[:24]}"
        return self._fallback_id

    def joined(self) -> str:
        return "".join(self.arguments).strip()

    def made(self, *, complete: bool = True, origin: str | None = None) -> ToolCall:
        """The call as assembled so far; `origin` is the base URL its `extra` came from."""
        arguments = self.joined()
        return ToolCall(
            id=self.call_id(),
            name=self.name,
            arguments=arguments or "{}",
            complete=complete,
            extra=dict(self.extra) or None,
            origin=origin if self.extra else None,
        )


class ChunkState:
    """The assistant message being assembled from one stream's chunks."""

    def __init__(self) -> None:
        self.text: list[str] = []
        self.reasoning: list[str] = []
        self.reasoning_source = ""
        self.details: list[dict[str, Any]] = []  # OpenRouter's reasoning_details, merged
        self.citations: list[str] = []
        self.refused = False
        self.slots: list[_CallSlot] = []
        self._by_index: dict[int, _CallSlot] = {}
        self._by_id: dict[str, _CallSlot] = {}
        self._legacy: _CallSlot | None = None
        self.finish_reason: str | None = None
        self.usage: dict[str, Any] | None = None
        self.content_seen = False
        self.announced = 0  # calls already given out by `completed`

    def feed(self, chunk: dict[str, Any]) -> tuple[str, str]:
        """Absorb one chunk; return its (text, reasoning) deltas."""
        self._absorb_usage(chunk)
        citations = chunk.get("citations")  # Perplexity repeats the list in every chunk
        if isinstance(citations, list) and citations:
            self.citations = [c for c in citations if isinstance(c, str)]
        text: list[str] = []
        reasoning: list[str] = []
        for choice in chunk.get("choices") or []:
            if not isinstance(choice, dict) or choice.get("index", 0) not in (0, None):
                continue
            # A server that answered with one whole completion sends `message`, not `delta`.
            delta = choice.get("delta") or choice.get("message") or {}
            if not isinstance(delta, dict):
                continue
            self._feed_reasoning(delta, reasoning)
            self._feed_details(delta.get("reasoning_details"))
            self._feed_content(delta.get("content"), text, reasoning)
            refusal = delta.get("refusal")
            if isinstance(refusal, str) and refusal:
                self.refused = True
                text.append(refusal)
            self._feed_calls(delta)
            if choice.get("finish_reason"):
                self.finish_reason = str(choice["finish_reason"])
        joined, thought = "".join(text), "".join(reasoning)
        if joined or thought:
            self.content_seen = True
        self.text.append(joined)
        self.reasoning.append(thought)
        return joined, thought

    def completed(self) -> list[StreamToolCall]:
        """The calls completed since the last look, in index order: a call is complete once
        a later call has begun and its own arguments are a whole JSON object (a server that
        interleaves parallel calls' deltas is thus never read too early), and every call is
        once the finish reason of a finished round has come."""
        ready: list[StreamToolCall] = []
        ended = self.finish_reason is not None and self.stop_reason(True) in FINISHED_STOPS
        while self.announced < len(self.slots) - (0 if ended else 1):
            slot = self.slots[self.announced]
            arguments = slot.joined()
            if not slot.name or not (ended or is_json_object(arguments)):
                break
            ready.append(StreamToolCall(self.announced, slot.made()))
            self.announced += 1
        return ready

    def _absorb_usage(self, chunk: dict[str, Any]) -> None:
        usage = chunk.get("usage")
        groq = chunk.get("x_groq")  # Groq's older place for the stream's usage
        if not isinstance(usage, dict) and isinstance(groq, dict):
            usage = groq.get("usage")
        if isinstance(usage, dict):
            self.usage = usage

    def _feed_reasoning(self, delta: dict[str, Any], out: list[str]) -> None:
        # A server that sends both fields sends the same text twice; read the first.
        for field in REASONING_FIELDS:
            value = delta.get(field)
            if isinstance(value, str) and value:
                out.append(value)
                self.reasoning_source = self.reasoning_source or field
                return

    def _feed_details(self, details: Any) -> None:
        """OpenRouter's `reasoning_details` fragments: one with the `index` and `type` of the
        last entry continues it (its strings appended: text, summary, data, signature),
        any other starts a new entry."""
        for detail in details if isinstance(details, list) else []:
            if not isinstance(detail, dict):
                continue
            self.content_seen = True
            last = self.details[-1] if self.details else None
            same = last is not None and all(
                last.get(key) == detail.get(key) for key in ("index", "type")
            )
            if last is None or not same or "index" not in detail:
                self.details.append(dict(detail))
                continue
            for key, value in detail.items():
                if key in _DETAIL_TEXTS and isinstance(value, str):
                    last[key] = (last.get(key) or "") + value
                elif last.get(key) is None:
                    last[key] = value

    def _feed_content(self, content: Any, text: list[str], reasoning: list[str]) -> None:
        if isinstance(content, str):
            text.append(content)
            return
        if not isinstance(content, list):
            return
        for part in content:  # content parts: Mistral's reasoning models
            if not isinstance(part, dict):
                continue
            if part.get("type") == "text" and isinstance(part.get("text"), str):
                text.append(part["text"])
            elif part.get("type") == "thinking":
                thought = _part_text(part.get("thinking"))
                if thought:
                    reasoning.append(thought)
                    self.reasoning_source = self.reasoning_source or "thinking"

    def _feed_calls(self, delta: dict[str, Any]) -> None:
        calls = delta.get("tool_calls") or []
        for call in calls if isinstance(calls, list) else []:
            if isinstance(call, dict):
                self._feed_call(call)
        # Some servers mirror tool_calls in the legacy field; it counts only on its own.
        legacy = delta.get("function_call")
        if isinstance(legacy, dict) and not calls and self._legacy_allowed():
            self._feed_legacy(legacy)

    def _feed_call(self, call: dict[str, Any]) -> None:
        self.content_seen = True
        index = call.get("index")
        call_id = call.get("id") if isinstance(call.get("id"), str) else ""
        slot = self._by_id.get(call_id) if call_id else None
        if slot is not None and isinstance(index, int) and slot.index not in (None, index):
            # a known id at another index: another call that repeats an id (a buggy or
            # hostile server); it gets an id of its own, since results pair by id
            slot, call_id = self._by_index.get(index), ""
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
            slot.index = index if slot.index is None else slot.index
        if call_id and not slot.id:
            slot.id = call_id
            self._by_id[call_id] = slot
        for key, value in call.items():
            if key not in _CALL_FIELDS and value is not None:
                slot.extra[key] = value
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

    def stop_reason(self, has_calls: bool) -> StopReason:
        """The round's stop reason: an unfinished one as the server said, else `tool_use`
        when it asked for calls (some servers say `stop` then) and `end_turn` otherwise."""
        unfinished = _UNFINISHED.get((self.finish_reason or "").lower())
        if unfinished is not None:
            return unfinished
        if self.refused:
            return "refusal"
        return "tool_use" if has_calls else "end_turn"

    def finish(self, base_url: str) -> StreamDone:
        stop = self.stop_reason(bool(self.slots))
        calls: list[ToolCall] = []
        for slot in self.slots:
            if not slot.name:
                raise StreamBroken(f"malformed stream from {base_url}: a tool call has no name")
            whole = stop in FINISHED_STOPS or is_json_object(slot.joined())
            calls.append(slot.made(complete=whole, origin=base_url))
        thought = "".join(self.reasoning)
        reasoning = []
        if thought or self.details:
            block = ReasoningBlock(
                text=thought,
                source=self.reasoning_source or "reasoning_details",
                details=self.details or None,
                origin=base_url if self.details else None,
            )
            reasoning.append(block)
        return StreamDone(
            message=Message.assistant("".join(self.text), calls, reasoning=reasoning),
            usage=usage_of(self.usage),
            stop_reason=stop,
            native_stop=self.finish_reason,
            citations=tuple(self.citations),
        )


def is_json_object(text: str) -> bool:
    """Whether `text` is a whole JSON object (the arguments of a call that was not cut)."""
    try:
        return isinstance(json.loads(text), dict)
    except (ValueError, RecursionError):
        return False


def _part_text(value: Any) -> str:
    """The text of a `thinking` part: a string, or a list of `text` parts."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "".join(
            p["text"] for p in value if isinstance(p, dict) and isinstance(p.get("text"), str)
        )
    return ""


def usage_of(raw: dict[str, Any] | None) -> Usage:
    """A stream's usage object as `Usage`; unknown when the server sent none."""
    if not raw:
        return Usage(known=False)
    prompt = _int(raw.get("prompt_tokens"))
    completion = _int(raw.get("completion_tokens"))
    details = _dict(raw.get("prompt_tokens_details"))
    out_details = _dict(raw.get("completion_tokens_details"))
    cached = _first_int(details, "cached_tokens")
    if cached is None:
        cached = _first_int(raw, "prompt_cache_hit_tokens", "cached_tokens")  # DeepSeek, Moonshot
    written = _first_int(details, "cache_write_tokens", "cache_creation_input_tokens")
    if written is None:
        written = _first_int(raw, "cache_creation_input_tokens", "cache_write_tokens")
    reasoning = _first_int(out_details, "reasoning_tokens")
    total = raw.get("total_tokens")
    if reasoning and isinstance(total, int) and total == prompt + completion + reasoning:
        completion += reasoning  # counted outside completion_tokens (xAI)
    return Usage(
        prompt_tokens=prompt,
        completion_tokens=completion,
        cached_tokens=cached,
        cache_creation_tokens=written,
        reasoning_tokens=reasoning,
    )


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _first_int(raw: dict[str, Any], *keys: str) -> int | None:
    for key in keys:
        value = raw.get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return None


def _int(value: Any) -> int:
    return value if isinstance(value, int) else 0
