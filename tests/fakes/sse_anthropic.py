"""Anthropic messages wire format for the fake LLM server.

Builds the `event: …` / `data: …` SSE stream (message_start, content blocks with
text_delta / input_json_delta, message_delta, message_stop, and pings), the non-stream
`message` body and Anthropic-shaped error bodies. It only builds values: it must not
write to sockets, sleep or keep state, so every handler thread may call it concurrently.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from tests.fakes.script import Fault, Reply
from tests.fakes.wire import Chunk, ReplyContext, ResolvedUsage, dumps, new_id, split_tokens

ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}

MALFORMED = Chunk(
    b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,'
    b'"delta":{"type":"text_delta","text":"x\n\n'
)


def sse(value: dict[str, Any]) -> bytes:
    return f"event: {value['type']}\ndata: {dumps(value)}\n\n".encode()


PING = Chunk(sse({"type": "ping"}))


def _start_usage(usage: ResolvedUsage) -> dict[str, Any]:
    body: dict[str, Any] = {"input_tokens": usage.prompt_tokens}
    if usage.cache_creation_tokens is not None:
        body["cache_creation_input_tokens"] = usage.cache_creation_tokens
    if usage.cached_tokens is not None:
        body["cache_read_input_tokens"] = usage.cached_tokens
    return body


def _input_of(arguments: str) -> Any:
    try:
        return json.loads(arguments or "{}")
    except ValueError:
        return {"_unparsed": arguments}


def stream_chunks(
    reply: Reply, ctx: ReplyContext, ids: list[str], usage: ResolvedUsage
) -> list[Chunk]:
    """The full, successful stream of `reply`, ending with `message_stop`."""
    message: dict[str, Any] = {
        "id": new_id("msg_"),
        "type": "message",
        "role": "assistant",
        "model": ctx.model,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {**_start_usage(usage), "output_tokens": 1},
    }
    chunks = [Chunk(sse({"type": "message_start", "message": message})), PING]
    index = 0
    if reply.content or not reply.calls:
        block: dict[str, Any] = {"type": "text", "text": ""}
        chunks.append(
            Chunk(sse({"type": "content_block_start", "index": index, "content_block": block}))
        )
        for piece in split_tokens(reply.content):
            delta = {"type": "text_delta", "text": piece}
            chunks.append(
                Chunk(sse({"type": "content_block_delta", "index": index, "delta": delta}), 1)
            )
        chunks.append(Chunk(sse({"type": "content_block_stop", "index": index})))
        index += 1
        if reply.calls:
            chunks.append(PING)
    for number, (call, call_id) in enumerate(zip(reply.calls, ids, strict=True)):
        block = {"type": "tool_use", "id": call_id, "name": call.name, "input": {}}
        chunks.append(
            Chunk(sse({"type": "content_block_start", "index": index, "content_block": block}), 1)
        )
        for position, piece in enumerate(["", *split_tokens(call.arguments_json)]):
            delta = {"type": "input_json_delta", "partial_json": piece}
            made = Chunk(
                sse({"type": "content_block_delta", "index": index, "delta": delta}),
                1 if piece else 0,
            )
            chunks.append(replace(made, pause_before_s=call.pause_s) if position == 1 else made)
        stop = Chunk(sse({"type": "content_block_stop", "index": index}), completes=number)
        chunks.append(stop)
        index += 1
    ending = {"stop_reason": reply.neutral_stop_reason, "stop_sequence": None}
    chunks.append(
        Chunk(
            sse(
                {
                    "type": "message_delta",
                    "delta": ending,
                    "usage": {"output_tokens": usage.completion_tokens},
                }
            )
        )
    )
    chunks.append(Chunk(sse({"type": "message_stop"})))
    return chunks


def completion_body(
    reply: Reply, ctx: ReplyContext, ids: list[str], usage: ResolvedUsage
) -> dict[str, Any]:
    """The non-stream `message` object of `reply`."""
    content: list[dict[str, Any]] = []
    if reply.content:
        content.append({"type": "text", "text": reply.content})
    for call, call_id in zip(reply.calls, ids, strict=True):
        content.append(
            {
                "type": "tool_use",
                "id": call_id,
                "name": call.name,
                "input": _input_of(call.arguments_json),
            }
        )
    return {
        "id": new_id("msg_"),
        "type": "message",
        "role": "assistant",
        "model": ctx.model,
        "content": content,
        "stop_reason": reply.neutral_stop_reason,
        "stop_sequence": None,
        "usage": {**_start_usage(usage), "output_tokens": usage.completion_tokens},
    }


def error_body(kind: str, message: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": kind, "message": message}}


def auth_error(provided: str | None) -> dict[str, Any]:
    return error_body("authentication_error", "invalid x-api-key")


def model_not_found(model: str) -> dict[str, Any]:
    return error_body("not_found_error", f"model: {model}")


def bad_request(message: str) -> dict[str, Any]:
    return error_body("invalid_request_error", message)


def server_error(message: str) -> dict[str, Any]:
    return error_body("api_error", message)


def fault_response(fault: Fault, ctx: ReplyContext) -> tuple[int, dict[str, Any]]:
    """Status and body of a fault that is answered with an HTTP error."""
    if fault.kind == "rate_limited":
        message = fault.message or "Number of request tokens has exceeded your rate limit."
        return 429, error_body("rate_limit_error", message)
    if fault.kind == "usage_limit":
        if fault.status == 402:
            return 402, error_body("billing_error", "There is an issue with your billing.")
        message = (
            "Your credit balance is too low to access the Anthropic API. Please go to "
            "Plans & Billing to upgrade or purchase credits."
        )
        return fault.status or 400, error_body("invalid_request_error", message)
    if fault.kind == "context_too_long":
        asked = max(ctx.prompt_tokens, fault.max_context + 1)
        return 400, bad_request(f"prompt is too long: {asked} tokens > {fault.max_context} maximum")
    kind = ERROR_TYPES.get(
        fault.status, "api_error" if fault.status >= 500 else "invalid_request_error"
    )
    return fault.status, error_body(
        kind, fault.message or ("Overloaded" if fault.status == 529 else "Internal server error")
    )
