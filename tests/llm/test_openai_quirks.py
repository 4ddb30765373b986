"""What OpenAI-compatible local servers (llama.cpp above all) send that OpenAI does not:
ids and names repeated in every tool delta, a legacy `function_call` mirroring
`tool_calls`, no usage chunk, and a whole JSON completion instead of a stream."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from qshell.cancel import CancelToken
from qshell.errors import (
    AuthError,
    ContextTooLong,
    ModelNotFound,
    ProviderError,
    RateLimited,
    StreamBroken,
)
from qshell.llm import anthropic, openai, openai_chunks
from qshell.llm.base import StreamDone, StreamEvent, StreamText
from qshell.llm.http import RetryPolicy
from qshell.llm.messages import ChatRequest, Message, ToolCall, ToolSpec, Usage
from qshell.llm.openai import OpenAIProvider
from tests.llm.sse import Script, Sleeps, chunk, event, json_response, sse_response

BASE = "http://llm.test/v1"
TOOLS = [ToolSpec(name="read_file", description="Read a file.", parameters={"type": "object"})]


def provider(script: Script, attempts: int = 1) -> OpenAIProvider:
    return OpenAIProvider(
        BASE,
        "sk-test-key-0123456789",
        retry=RetryPolicy(max_attempts=attempts, seed=1),
        transport=script.transport,
        sleep=Sleeps(),
    )


def request(**overrides: Any) -> ChatRequest:
    fields: dict[str, Any] = {"model": "m", "system": "", "messages": [Message.user("hi")]}
    fields.update(overrides)
    return ChatRequest(**fields)


def run(*replies: httpx.Response) -> list[StreamEvent]:
    return list(provider(Script(*replies)).stream(request(tools=TOOLS), CancelToken()))


def done_of(events: list[StreamEvent]) -> StreamDone:
    assert isinstance(events[-1], StreamDone)
    assert sum(isinstance(e, StreamDone) for e in events) == 1
    return events[-1]


def call_delta(arguments: str, name: str = "read_file", call_id: str = "call_A") -> dict[str, Any]:
    """One tool-call delta as llama.cpp streams it: index, id, type and name every time."""
    return {
        "index": 0,
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": arguments},
    }


def whole(message: dict[str, Any], finish: str | None, **extra: Any) -> httpx.Response:
    """A non-streamed `chat.completion` answer."""
    choice: dict[str, Any] = {"index": 0, "message": message, "finish_reason": finish}
    return json_response(200, {"object": "chat.completion", "choices": [choice], **extra})


# ---------------------------------------------------------------- tool-call deltas


def test_deltas_repeating_id_type_and_name_in_every_chunk_make_one_call() -> None:
    events = run(
        sse_response(
            chunk(tool_calls=[call_delta("")]),
            chunk(tool_calls=[call_delta('{"path"')]),
            chunk(tool_calls=[call_delta(': "a.')]),
            chunk(tool_calls=[call_delta('txt"}')]),
            chunk(finish="tool_calls"),
            event("[DONE]"),
        )
    )
    done = done_of(events)
    assert done.message.tool_calls == [
        ToolCall(id="call_A", name="read_file", arguments='{"path": "a.txt"}')
    ]
    assert done.stop_reason == "tool_use"


def test_a_legacy_function_call_mirrored_beside_tool_calls_adds_no_second_call() -> None:
    pieces = ['{"path"', ': "a.txt"}']
    events = run(
        sse_response(
            *(
                chunk(
                    tool_calls=[call_delta(piece)],
                    function_call={"name": "read_file:", "arguments": piece},
                )
                for piece in pieces
            ),
            chunk(finish="tool_calls"),
            event("[DONE]"),
        )
    )
    calls = done_of(events).message.tool_calls
    assert [(c.name, c.arguments) for c in calls] == [("read_file", '{"path": "a.txt"}')]


def test_a_mirrored_legacy_function_call_in_a_whole_answer_adds_no_second_call() -> None:
    arguments = '{"path": "a.txt"}'
    events = run(
        whole(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [call_delta(arguments)],
                "function_call": {"name": "read_file:", "arguments": arguments},
            },
            "tool_calls",
        )
    )
    assert done_of(events).message.tool_calls == [
        ToolCall(id="call_A", name="read_file", arguments=arguments)
    ]


def test_a_legacy_function_call_alone_still_becomes_a_call() -> None:
    events = run(
        sse_response(
            chunk(function_call={"name": "read_file", "arguments": ""}),
            chunk(function_call={"arguments": '{"path": '}),
            chunk(function_call={"arguments": '"a.txt"}'}),
            chunk(finish="function_call"),
            event("[DONE]"),
        )
    )
    done = done_of(events)
    [call] = done.message.tool_calls
    assert (call.name, call.arguments) == ("read_file", '{"path": "a.txt"}')
    assert call.id.startswith("call_")
    assert done.stop_reason == "tool_use"


def test_a_legacy_function_call_alone_in_a_whole_answer_becomes_a_call() -> None:
    events = run(
        whole(
            {
                "role": "assistant",
                "content": None,
                "function_call": {"name": "ls", "arguments": {"path": "."}},
            },
            "function_call",
        )
    )
    [call] = done_of(events).message.tool_calls
    assert call.name == "ls" and json.loads(call.arguments) == {"path": "."}


# ----------------------------------------------------------------------- usage


def test_a_stream_without_a_usage_chunk_reports_usage_as_unknown() -> None:
    events = run(sse_response(chunk("hi"), chunk(finish="stop"), event("[DONE]")))
    usage = done_of(events).usage
    assert usage.known is False
    assert (usage.prompt_tokens, usage.completion_tokens) == (0, 0)


def test_a_stream_with_a_usage_chunk_reports_known_usage() -> None:
    events = run(
        sse_response(
            chunk("hi"),
            chunk(finish="stop"),
            chunk(usage={"prompt_tokens": 12, "completion_tokens": 2}),
            event("[DONE]"),
        )
    )
    usage = done_of(events).usage
    assert usage.known is True
    assert (usage.prompt_tokens, usage.completion_tokens) == (12, 2)


def test_no_usage_at_all_is_unknown_and_stays_unknown_in_a_sum() -> None:
    assert openai_chunks.usage_of(None) == Usage(known=False)
    assert openai_chunks.usage_of({}).known is False
    total = Usage(prompt_tokens=5, completion_tokens=1) + Usage(known=False)
    assert total.known is False
    assert (total.prompt_tokens, total.completion_tokens) == (5, 1)
    assert (Usage() + Usage()).known is True


# ----------------------------------------------------------- whole JSON answers


def test_a_whole_json_completion_with_text_is_one_text_event_and_the_done() -> None:
    events = run(
        whole(
            {"role": "assistant", "content": "Hello there."},
            "stop",
            usage={"prompt_tokens": 30, "completion_tokens": 4},
        )
    )
    assert events[0] == StreamText("Hello there.")
    done = done_of(events)
    assert done.message.text == "Hello there."
    assert done.stop_reason == "end_turn"
    assert done.usage == Usage(prompt_tokens=30, completion_tokens=4)


def test_a_whole_json_completion_with_text_and_tool_calls_keeps_both() -> None:
    arguments = '{"path": "a.txt"}'
    events = run(
        whole(
            {
                "role": "assistant",
                "content": "Reading it.",
                "tool_calls": [call_delta(arguments, call_id="call_Z")],
            },
            "tool_calls",
        )
    )
    assert [e for e in events if isinstance(e, StreamText)] == [StreamText("Reading it.")]
    done = done_of(events)
    assert done.message.text == "Reading it."
    assert done.message.tool_calls == [ToolCall(id="call_Z", name="read_file", arguments=arguments)]
    assert done.stop_reason == "tool_use"
    assert done.usage.known is False


def test_a_whole_json_completion_that_hit_the_token_limit_says_max_tokens() -> None:
    events = run(whole({"role": "assistant", "content": "cut sh"}, "length"))
    assert done_of(events).stop_reason == "max_tokens"


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (
            {
                "message": "This model's maximum context length is 2048 tokens",
                "type": "invalid_request_error",
                "code": "context_length_exceeded",
            },
            ContextTooLong,
        ),
        ({"message": "no such model", "code": "model_not_found"}, ModelNotFound),
        (
            {"message": "bad key", "type": "invalid_request_error", "code": "invalid_api_key"},
            AuthError,
        ),
        ({"message": "slow down", "type": "rate_limit_error"}, RateLimited),
    ],
)
def test_a_json_error_payload_in_a_200_answer_maps_to_its_provider_error(
    error: dict[str, Any], expected: type[ProviderError]
) -> None:
    script = Script(json_response(200, {"error": error}))
    with pytest.raises(expected):
        list(provider(script).stream(request(), CancelToken()))
    assert len(script.requests) == 1


def test_a_json_error_payload_does_not_reach_the_parser_as_an_answer() -> None:
    script = Script(json_response(200, {"error": {"message": "boom", "type": "server_error"}}))
    with pytest.raises(ProviderError) as caught:
        list(provider(script).stream(request(), CancelToken()))
    assert not isinstance(caught.value, StreamBroken)
    assert "boom" in str(caught.value)


@pytest.mark.parametrize("body", [b"[1, 2]", b'"just a string"', b"null", b"{nope", b""])
def test_a_json_answer_that_is_not_an_object_is_stream_broken(body: bytes) -> None:
    answer = httpx.Response(200, headers={"content-type": "application/json"}, content=body)
    with pytest.raises(StreamBroken, match="neither an event stream nor a JSON object"):
        run(answer)


# ------------------------------------------------------------------ tool choice


def test_the_openai_body_forces_a_named_function_when_a_tool_choice_is_set() -> None:
    body = openai.build_body(request(tools=TOOLS, tool_choice="read_file"))
    assert body["tool_choice"] == {"type": "function", "function": {"name": "read_file"}}
    assert "tool_choice" not in openai.build_body(request(tools=TOOLS))


def test_the_openai_body_sends_no_tool_choice_without_tools() -> None:
    assert "tool_choice" not in openai.build_body(request(tool_choice="read_file"))


def test_the_anthropic_body_forces_the_named_tool_when_a_tool_choice_is_set() -> None:
    body = anthropic.build_body(request(tools=TOOLS, tool_choice="read_file"))
    assert body["tool_choice"] == {"type": "tool", "name": "read_file"}
    assert "tool_choice" not in anthropic.build_body(request(tools=TOOLS))
