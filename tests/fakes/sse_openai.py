"""OpenAI chat-completions wire format for the fake LLM server.

Builds the `chat.completion.chunk` SSE stream, the non-stream `chat.completion` body and
OpenAI-shaped error bodies from script values. It only builds values: it must not write
to sockets, sleep or keep state, so every handler thread may call it concurrently.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from tests.fakes.script import Fault, Reply
from tests.fakes.wire import Chunk, ReplyContext, ResolvedUsage, dumps, new_id, split_tokens

FINISH_REASONS = {"end_turn": "stop", "tool_use": "tool_calls", "max_tokens": "length"}


def sse(value: dict[str, Any]) -> bytes:
    return f"data: {dumps(value)}\n\n".encode()


DONE = b"data: [DONE]\n\n"
MALFORMED = Chunk(b'data: {"id":"chatcmpl-broken","choices":[{"index":0,"delta":{"content":"x\n\n')


def finish_reason(reply: Reply) -> str:
    if reply.legacy_function_call and reply.stop_reason is None:
        return "function_call"
    reason = reply.neutral_stop_reason
    return FINISH_REASONS.get(reason, reason)


def usage_json(usage: ResolvedUsage) -> dict[str, Any]:
    body: dict[str, Any] = {
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
        "total_tokens": usage.prompt_tokens + usage.completion_tokens,
    }
    if usage.cached_tokens is not None:
        body["prompt_tokens_details"] = {"cached_tokens": usage.cached_tokens}
    return body


def _tool_deltas(reply: Reply, ids: list[str]) -> list[list[dict[str, Any]]]:
    """Per call, the `tool_calls[]` entries of its deltas (first one names the call)."""
    per_call = []
    for index, (call, call_id) in enumerate(zip(reply.calls, ids, strict=True)):
        head = {"index": index, "id": call_id, "type": "function"}
        entries: list[dict[str, Any]] = [{**head, "function": {"name": call.name, "arguments": ""}}]
        for piece in split_tokens(call.arguments_json):
            if reply.repeat_id_and_name:
                entries.append({**head, "function": {"name": call.name, "arguments": piece}})
            else:
                entries.append({"index": index, "function": {"arguments": piece}})
        per_call.append(entries)
    return per_call


def _ordered(per_call: list[list[dict[str, Any]]], interleave: bool) -> list[dict[str, Any]]:
    if not interleave:
        return [entry for entries in per_call for entry in entries]
    merged: list[dict[str, Any]] = []
    for position in range(max((len(e) for e in per_call), default=0)):
        merged.extend(entries[position] for entries in per_call if position < len(entries))
    return merged


def _call_chunks(reply: Reply, ids: list[str], chunk: Callable[..., Chunk]) -> list[Chunk]:
    """The tool-call chunks: call i is complete at the first chunk of call i + 1, and each
    call's `pause_s` comes before its first argument piece (not when interleaved)."""
    per_call = _tool_deltas(reply, ids)
    if reply.interleave:
        return [chunk({"tool_calls": [entry]}, tokens=1) for entry in _ordered(per_call, True)]
    out: list[Chunk] = []
    for index, entries in enumerate(per_call):
        for position, entry in enumerate(entries):
            made = chunk({"tool_calls": [entry]}, tokens=1)
            if position == 0 and index > 0:
                made = replace(made, completes=index - 1)
            if position == 1:
                made = replace(made, pause_before_s=reply.calls[index].pause_s)
            out.append(made)
    return out


def stream_chunks(
    reply: Reply, ctx: ReplyContext, ids: list[str], usage: ResolvedUsage
) -> list[Chunk]:
    """The full, successful stream of `reply`, ending with `data: [DONE]`."""
    completion_id = new_id("chatcmpl-")
    created = int(time.time())

    def chunk(delta: dict[str, Any], finish: str | None = None, tokens: int = 0) -> Chunk:
        value: dict[str, Any] = {
            "id": completion_id,
            "object": "chat.completion.chunk",
            "created": created,
            "model": ctx.model,
            "system_fingerprint": "fp_fake",
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
        }
        if ctx.include_usage:
            value["usage"] = None
        return Chunk(sse(value), tokens)

    chunks = [chunk({"role": "assistant", "content": "", "refusal": None})]
    chunks.extend(chunk({"content": piece}, tokens=1) for piece in split_tokens(reply.content))
    if reply.legacy_function_call:
        call = reply.calls[0]
        chunks.append(chunk({"function_call": {"name": call.name, "arguments": ""}}, tokens=1))
        chunks.extend(
            chunk({"function_call": {"arguments": piece}}, tokens=1)
            for piece in split_tokens(call.arguments_json)
        )
    else:
        chunks.extend(_call_chunks(reply, ids, chunk))
    last = len(reply.calls) - 1 if reply.calls else None  # complete when the answer ends
    chunks.append(replace(chunk({}, finish_reason(reply)), completes=last))
    if ctx.include_usage:
        chunks.append(
            Chunk(
                sse(
                    {
                        "id": completion_id,
                        "object": "chat.completion.chunk",
                        "created": created,
                        "model": ctx.model,
                        "system_fingerprint": "fp_fake",
                        "choices": [],
                        "usage": usage_json(usage),
                    }
                )
            )
        )
    chunks.append(Chunk(DONE))
    return chunks


def completion_body(
    reply: Reply, ctx: ReplyContext, ids: list[str], usage: ResolvedUsage
) -> dict[str, Any]:
    """The non-stream `chat.completion` object of `reply`."""
    message: dict[str, Any] = {"role": "assistant", "content": reply.content or None}
    if reply.legacy_function_call:
        call = reply.calls[0]
        message["function_call"] = {"name": call.name, "arguments": call.arguments_json}
    elif reply.calls:
        message["tool_calls"] = [
            {
                "id": call_id,
                "type": "function",
                "function": {"name": call.name, "arguments": call.arguments_json},
            }
            for call, call_id in zip(reply.calls, ids, strict=True)
        ]
    message["refusal"] = None
    return {
        "id": new_id("chatcmpl-"),
        "object": "chat.completion",
        "created": int(time.time()),
        "model": ctx.model,
        "system_fingerprint": "fp_fake",
        "choices": [
            {
                "index": 0,
                "message": message,
                "logprobs": None,
                "finish_reason": finish_reason(reply),
            }
        ],
        "usage": usage_json(usage),
    }


def error_body(
    message: str, kind: str, code: str | None = None, param: str | None = None
) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


def mask_key(key: str) -> str:
    """Mask a key the way OpenAI echoes it: a few leading and trailing characters only."""
    if len(key) <= 8:
        return "*" * len(key)
    return f"{key[:5]}{'*' * min(len(key) - 7, 24)}{key[-2:]}"


def auth_error(provided: str | None) -> dict[str, Any]:
    if not provided:
        message = (
            "You didn't provide an API key. You need to provide your API key in an "
            "Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY)."
        )
    else:
        message = (
            f"Incorrect API key provided: {mask_key(provided)}. You can find your API key "
            "at https://platform.openai.com/account/api-keys."
        )
    return error_body(message, "invalid_request_error", "invalid_api_key")


def model_not_found(model: str) -> dict[str, Any]:
    message = f"The model `{model}` does not exist or you do not have access to it."
    return error_body(message, "invalid_request_error", "model_not_found")


def bad_request(message: str) -> dict[str, Any]:
    return error_body(message, "invalid_request_error")


def server_error(message: str) -> dict[str, Any]:
    return error_body(message, "server_error")


def fault_response(fault: Fault, ctx: ReplyContext) -> tuple[int, dict[str, Any]]:
    """Status and body of a fault that is answered with an HTTP error."""
    if fault.kind == "rate_limited":
        message = fault.message or "Rate limit reached for requests. Please try again later."
        return 429, error_body(message, "requests", "rate_limit_exceeded")
    if fault.kind == "usage_limit":
        message = "You exceeded your current quota, please check your plan and billing details."
        return fault.status or 429, error_body(message, "insufficient_quota", "insufficient_quota")
    if fault.kind == "context_too_long":
        asked = max(ctx.prompt_tokens, fault.max_context + 1)
        message = (
            f"This model's maximum context length is {fault.max_context} tokens. However, "
            f"your messages resulted in {asked} tokens. Please reduce the length of the "
            "messages."
        )
        return 400, error_body(
            message, "invalid_request_error", "context_length_exceeded", "messages"
        )
    if fault.status >= 500:
        message = fault.message or (
            "The server had an error while processing your request. Sorry about that!"
        )
        return fault.status, server_error(message)
    return fault.status, error_body(
        fault.message or f"HTTP {fault.status}", "invalid_request_error"
    )
