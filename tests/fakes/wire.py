"""Shared pieces of the fake server's two wire formats: stream plans, tokens, usage.

A reply becomes a `StreamPlan`, a list of `Chunk`s (already-encoded SSE events, each
marked with how many content tokens it carries) and `Pause`s; the server writes it and
applies latency, holds and stalls. This module builds values only: no sockets, no sleeping,
no shared state, so any thread may call it.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from typing import Any

from tests.fakes.script import Fault, Reply, Usage

TOKEN_CHARS = 4


@dataclass(frozen=True, slots=True)
class Chunk:
    """Bytes to write as one flush. `tokens > 0` marks a content chunk (paced, holdable);
    `completes` is the tool call this chunk makes complete; `pause_before_s` is silence."""

    data: bytes
    tokens: int = 0
    completes: int | None = None
    pause_before_s: float = 0.0


@dataclass(frozen=True, slots=True)
class Pause:
    """Go silent for `seconds` (cut short by release_all, stop or a client hang-up)."""

    seconds: float


Step = Chunk | Pause


@dataclass
class StreamPlan:
    """The steps of one streamed response; `complete=False` leaves the body unterminated."""

    steps: list[Step] = field(default_factory=list)
    complete: bool = True

    @property
    def first_content_index(self) -> int:
        for index, step in enumerate(self.steps):
            if isinstance(step, Chunk) and step.tokens > 0:
                return index
        return 0

    def hold_index(self, after_call: int | None) -> int:
        """Where a late hold waits: after the chunk completing `after_call`, else after the
        first content chunk (a call the plan never completes: after the last step)."""
        if after_call is None:
            return self.first_content_index
        for index, step in enumerate(self.steps):
            if isinstance(step, Chunk) and step.completes == after_call:
                return index
        return len(self.steps) - 1


@dataclass(frozen=True)
class ReplyContext:
    """Request facts an encoder needs: echoed model, prompt size, usage opt-in."""

    model: str
    prompt_tokens: int
    include_usage: bool = False
    cached_tokens: int | None = None  # from a modelled prompt cache; a reply's usage wins


@dataclass(frozen=True)
class ResolvedUsage:
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int | None
    cache_creation_tokens: int | None


def split_tokens(text: str, size: int = TOKEN_CHARS) -> list[str]:
    """Cut text into ~4-character "tokens" (the unit of deltas and pacing)."""
    return [text[i : i + size] for i in range(0, len(text), size)]


def new_id(prefix: str) -> str:
    return prefix + uuid.uuid4().hex[:24]


def dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def estimate_prompt_tokens(raw: bytes) -> int:
    return max(1, len(raw) // TOKEN_CHARS)


def resolve_usage(reply: Reply, ctx: ReplyContext, emitted_tokens: int) -> ResolvedUsage:
    if reply.usage is not None:
        usage = Usage.coerce(reply.usage)
    elif ctx.cached_tokens is not None:
        usage = Usage(cached_tokens=ctx.cached_tokens)
    else:
        usage = Usage()
    return ResolvedUsage(
        prompt_tokens=ctx.prompt_tokens if usage.prompt_tokens is None else usage.prompt_tokens,
        completion_tokens=(
            emitted_tokens if usage.completion_tokens is None else usage.completion_tokens
        ),
        cached_tokens=usage.cached_tokens,
        cache_creation_tokens=usage.cache_creation_tokens,
    )


def call_ids(reply: Reply, prefix: str) -> list[str]:
    return [call.id or new_id(prefix) for call in reply.calls]


def reply_tokens(reply: Reply) -> int:
    """Completion tokens a reply emits: its text pieces, plus name and argument pieces."""
    total = len(split_tokens(reply.content))
    for call in reply.calls:
        total += 1 + len(split_tokens(call.arguments_json))
    return total


def apply_fault(chunks: list[Chunk], fault: Fault | None, malformed: Chunk) -> StreamPlan:
    """Turn a full reply stream into the stream a streaming fault sends."""
    if fault is None:
        return StreamPlan(list(chunks))
    if fault.kind == "stall":
        first = StreamPlan(list(chunks)).first_content_index
        head: list[Step] = list(chunks[:first]) if first else list(chunks[:1])
        tail: list[Step] = list(chunks[len(head) :]) if fault.reply is not None else []
        return StreamPlan([*head, Pause(fault.seconds), *tail], complete=fault.reply is not None)
    content_positions = [i for i, chunk in enumerate(chunks) if chunk.tokens > 0]
    wanted = min(fault.after_chunks, len(content_positions))
    if wanted > 0:
        end = content_positions[wanted - 1] + 1
    else:
        end = content_positions[0] if content_positions else 1
    kept: list[Step] = list(chunks[:end])
    if fault.kind == "malformed_json":
        return StreamPlan([*kept, malformed], complete=True)
    return StreamPlan(kept, complete=fault.clean_close)
