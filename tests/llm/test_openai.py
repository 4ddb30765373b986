"""OpenAIProvider against scripted MockTransports: request shape, parsing, errors, retries."""

from __future__ import annotations

import threading
from typing import Any

import httpx
import pytest

from qshell.cancel import CancelToken
from qshell.errors import (
    AuthError,
    BadRequest,
    Cancelled,
    ContextTooLong,
    ModelNotFound,
    ProviderUnavailable,
    RateLimited,
    StreamBroken,
)
from qshell.llm.base import StreamDone, StreamEvent, StreamText
from qshell.llm.http import RetryPolicy
from qshell.llm.messages import (
    ChatRequest,
    Message,
    TextBlock,
    ToolCall,
    ToolResultBlock,
    ToolSpec,
)
from qshell.llm.openai import OpenAIProvider
from tests.llm.provider_calls import chat_request, done_of
from tests.llm.sse import (
    Script,
    Sleeps,
    broken_response,
    chunk,
    event,
    json_response,
    sse_response,
)

KEY = "sk-test-abcdefghijklmnopqrstuvwxyz0123456789"
BASE = "http://llm.test/v1"


def make(script: Script, *, key: str | None = KEY, attempts: int = 4, sleeps: Any = None):
    return OpenAIProvider(
        BASE + "/",
        key,
        retry=RetryPolicy(max_attempts=attempts, seed=7),
        transport=script.transport,
        sleep=sleeps or Sleeps(),
    )


def request(**overrides: Any) -> ChatRequest:
    return chat_request("gpt-test", "be brief", **overrides)


def run(provider: OpenAIProvider, req: ChatRequest | None = None) -> list[StreamEvent]:
    return list(provider.stream(req or request(), CancelToken()))


def ok_stream() -> httpx.Response:
    return sse_response(chunk("ok"), chunk(finish="stop"), event("[DONE]"))


def test_the_request_body_converts_messages_tools_and_options() -> None:
    script = Script(ok_stream())
    history = [
        Message.user("list files"),
        Message.assistant("", [ToolCall(id="c1", name="ls", arguments='{"path": "."}')]),
        Message(
            role="user",
            content=[
                ToolResultBlock(tool_call_id="c1", content="a.py", is_error=False),
                TextBlock(text="now read it"),
            ],
        ),
        Message.assistant("sure", [ToolCall(id="c2", name="read", arguments="")]),
    ]
    tools = [ToolSpec(name="ls", description="list", parameters={"type": "object"})]
    run(make(script), request(messages=history, tools=tools, temperature=0.2, max_tokens=99))

    sent = script.requests[0]
    assert str(sent.url) == BASE + "/chat/completions"
    assert sent.headers["authorization"] == f"Bearer {KEY}"
    body = script.bodies[0]
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert body["model"] == "gpt-test"
    assert body["max_tokens"] == 99
    assert body["temperature"] == 0.2
    assert body["tools"] == [
        {
            "type": "function",
            "function": {"name": "ls", "description": "list", "parameters": {"type": "object"}},
        }
    ]
    assert body["messages"] == [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "list files"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "ls", "arguments": '{"path": "."}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "a.py"},
        {"role": "user", "content": "now read it"},
        {
            "role": "assistant",
            "content": "sure",
            "tool_calls": [
                {"id": "c2", "type": "function", "function": {"name": "read", "arguments": "{}"}}
            ],
        },
    ]


def test_tools_temperature_and_authorization_are_omitted_when_unset() -> None:
    script = Script(ok_stream())
    run(make(script, key=None))
    body = script.bodies[0]
    assert "tools" not in body
    assert "temperature" not in body
    assert "authorization" not in script.requests[0].headers


def test_text_deltas_stream_in_order_and_end_with_the_whole_message() -> None:
    script = Script(
        sse_response(
            chunk("Hel"),
            chunk("lo"),
            chunk(finish="stop"),
            event({"choices": [], "usage": {"prompt_tokens": 12, "completion_tokens": 3}}),
            event("[DONE]"),
        )
    )
    events = run(make(script))
    assert [e.text for e in events if isinstance(e, StreamText)] == ["Hel", "lo"]
    done = done_of(events)
    assert done.message.text == "Hello"
    assert done.stop_reason == "end_turn"
    assert (done.usage.prompt_tokens, done.usage.completion_tokens) == (12, 3)
    assert done.usage.cached_tokens is None


def test_cached_tokens_come_from_prompt_tokens_details() -> None:
    usage = {
        "prompt_tokens": 100,
        "completion_tokens": 5,
        "prompt_tokens_details": {"cached_tokens": 64},
    }
    script = Script(sse_response(chunk("x", finish="stop", usage=usage), event("[DONE]")))
    assert done_of(run(make(script))).usage.cached_tokens == 64


def test_parallel_tool_call_deltas_are_accumulated_by_index() -> None:
    def call(index: int, **fields: Any) -> dict[str, Any]:
        return {"index": index, **fields}

    script = Script(
        sse_response(
            chunk(
                tool_calls=[
                    call(0, id="a", type="function", function={"name": "ls", "arguments": ""})
                ]
            ),
            chunk(
                tool_calls=[
                    call(1, id="b", type="function", function={"name": "cat", "arguments": '{"p'})
                ]
            ),
            chunk(tool_calls=[call(0, function={"arguments": '{"path":'})]),
            chunk(tool_calls=[call(1, function={"arguments": '": 1}'})]),
            chunk(tool_calls=[call(0, function={"arguments": ' "."}'})]),
            chunk(finish="tool_calls"),
            event("[DONE]"),
        )
    )
    done = done_of(run(make(script)))
    assert done.stop_reason == "tool_use"
    assert done.message.tool_calls == [
        ToolCall(id="a", name="ls", arguments='{"path": "."}'),
        ToolCall(id="b", name="cat", arguments='{"p": 1}'),
    ]


def test_ids_and_names_repeated_in_every_delta_are_not_concatenated() -> None:
    def delta(arguments: str) -> str:
        return chunk(
            tool_calls=[
                {"index": 0, "id": "x1", "function": {"name": "ls", "arguments": arguments}}
            ]
        )

    script = Script(
        sse_response(delta('{"a"'), delta(": 1"), delta("}"), chunk(finish="tool_calls"))
    )
    calls = done_of(run(make(script))).message.tool_calls
    assert calls == [ToolCall(id="x1", name="ls", arguments='{"a": 1}')]


def test_a_missing_index_falls_back_to_the_call_id() -> None:
    script = Script(
        sse_response(
            chunk(tool_calls=[{"id": "p", "function": {"name": "ls", "arguments": "{}"}}]),
            chunk(tool_calls=[{"id": "q", "function": {"name": "pwd", "arguments": ""}}]),
            chunk(finish="tool_calls"),
            event("[DONE]"),
        )
    )
    calls = done_of(run(make(script))).message.tool_calls
    assert [(c.id, c.name, c.arguments) for c in calls] == [("p", "ls", "{}"), ("q", "pwd", "{}")]


def test_the_legacy_function_call_field_becomes_one_tool_call_with_a_generated_id() -> None:
    script = Script(
        sse_response(
            chunk(function_call={"name": "ls", "arguments": '{"path"'}),
            chunk(function_call={"arguments": ': "/"}'}),
            chunk(finish="function_call"),
            event("[DONE]"),
        )
    )
    done = done_of(run(make(script)))
    [call] = done.message.tool_calls
    assert (call.name, call.arguments) == ("ls", '{"path": "/"}')
    assert call.id
    assert done.stop_reason == "tool_use"


def test_finish_reason_length_means_max_tokens() -> None:
    script = Script(sse_response(chunk("cut", finish="length"), event("[DONE]")))
    assert done_of(run(make(script))).stop_reason == "max_tokens"


def test_a_401_is_an_auth_error_naming_the_env_var_without_the_echoed_key() -> None:
    body = {
        "error": {
            "message": f"Incorrect API key provided: {KEY[:5]}****6789.",
            "code": "invalid_api_key",
        }
    }
    script = Script(json_response(401, body))
    with pytest.raises(AuthError) as caught:
        run(make(script))
    text = str(caught.value) + repr(caught.value)
    assert "OPENAI_API_KEY" in text
    assert BASE in text
    assert KEY not in text
    assert KEY[:5] + "****" not in text
    assert len(script.requests) == 1


def test_a_500_that_echoes_the_key_is_retried_then_reported_without_the_key() -> None:
    script = Script(
        *[json_response(500, {"error": {"message": f"boom for key {KEY}"}}) for _ in range(4)]
    )
    with pytest.raises(ProviderUnavailable) as caught:
        run(make(script))
    text = str(caught.value) + repr(caught.value)
    assert KEY not in text
    assert "boom" in text
    assert "sk-" not in text
    assert len(script.requests) == 4


@pytest.mark.parametrize(
    ("status", "payload", "error_type", "fragment"),
    [
        (403, {"error": {"message": "nope"}}, AuthError, "OPENAI_API_KEY"),
        (
            404,
            {"error": {"message": "no such model", "code": "model_not_found"}},
            ModelNotFound,
            "OPENAI_MODEL",
        ),
        (
            400,
            {"error": {"message": "too long", "code": "context_length_exceeded"}},
            ContextTooLong,
            "gpt-test",
        ),
        (
            400,
            {"error": {"message": "This model's maximum context length is 8192 tokens"}},
            ContextTooLong,
            "maximum context length",
        ),
        (413, {"error": {"message": "prompt is too long"}}, ContextTooLong, "prompt is too long"),
        (422, {"error": {"message": "tools[0] is invalid"}}, BadRequest, "tools[0] is invalid"),
        (400, {"detail": "unknown field 'foo'"}, BadRequest, "unknown field 'foo'"),
    ],
)
def test_each_error_status_maps_to_its_error_type_and_message(
    status: int, payload: Any, error_type: type[Exception], fragment: str
) -> None:
    script = Script(json_response(status, payload))
    with pytest.raises(error_type) as caught:
        run(make(script))
    assert fragment in str(caught.value)
    assert getattr(caught.value, "status", None) == status
    assert len(script.requests) == 1


def test_a_404_names_the_model_and_how_to_pick_another() -> None:
    script = Script(json_response(404, {"error": {"message": "not found"}}))
    with pytest.raises(ModelNotFound) as caught:
        run(make(script))
    assert "model 'gpt-test' was not found at http://llm.test/v1" in str(caught.value)
    assert "-m/--model" in str(caught.value)


def test_a_429_is_retried_honouring_retry_after_capped_at_sixty_seconds() -> None:
    limited = {"error": {"message": "slow down"}}
    script = Script(
        json_response(429, limited, {"retry-after": "3"}),
        json_response(429, limited, {"retry-after": "600"}),
        ok_stream(),
    )
    sleeps = Sleeps()
    done = done_of(run(make(script, sleeps=sleeps)))
    assert done.message.text == "ok"
    assert sleeps.delays == [3.0, 60.0]
    assert len(script.requests) == 3


def test_a_429_that_never_clears_is_rate_limited_after_all_attempts() -> None:
    script = Script(*[json_response(429, {"error": {"message": "slow"}}) for _ in range(2)])
    sleeps = Sleeps()
    with pytest.raises(RateLimited):
        run(make(script, attempts=2, sleeps=sleeps))
    assert len(sleeps.delays) == 1


def test_server_errors_and_connect_errors_are_retried_with_backoff_before_the_first_token() -> None:
    script = Script(
        json_response(500, {"error": {"message": "oops"}}),
        httpx.ConnectError("[Errno 111] Connection refused"),
        json_response(529, {"error": {"message": "overloaded"}}),
        ok_stream(),
    )
    sleeps = Sleeps()
    assert done_of(run(make(script, sleeps=sleeps))).message.text == "ok"
    assert len(script.requests) == 4
    assert len(sleeps.delays) == 3
    assert all(0 < delay <= 8.0 for delay in sleeps.delays)


def test_a_stream_cut_before_any_content_is_retried() -> None:
    script = Script(sse_response(), ok_stream())
    assert done_of(run(make(script))).message.text == "ok"
    assert len(script.requests) == 2


def test_a_stream_that_breaks_after_text_is_stream_broken_and_never_retried() -> None:
    script = Script(broken_response(chunk("partial")), ok_stream())
    seen: list[StreamEvent] = []
    with pytest.raises(StreamBroken) as caught:
        seen.extend(make(script).stream(request(), CancelToken()))
    assert seen == [StreamText("partial")]
    assert caught.value.retryable is False
    assert len(script.requests) == 1


def test_a_stream_cut_without_done_or_finish_reason_is_stream_broken() -> None:
    script = Script(sse_response(chunk("half an ans")), ok_stream())
    with pytest.raises(StreamBroken):
        run(make(script))
    assert len(script.requests) == 1


def test_malformed_json_in_a_data_line_is_stream_broken() -> None:
    script = Script(sse_response("data: {not json\n\n"))
    with pytest.raises(StreamBroken) as caught:
        run(make(script))
    assert "malformed stream from http://llm.test/v1" in str(caught.value)


def test_json_nested_past_the_parser_is_stream_broken_not_a_crash() -> None:
    # a hostile server may nest a data line, or a call's arguments, beyond what json parses
    deep = "[" * 100_000 + "]" * 100_000
    script = Script(sse_response(f"data: {deep}\n\n"))
    with pytest.raises(StreamBroken):
        run(make(script))
    arguments = '{"a": ' + deep + "}"
    calls = [{"index": 0, "id": "c1", "function": {"name": "f", "arguments": arguments}}]
    second = [{"index": 1, "id": "c2", "function": {"name": "g", "arguments": "{}"}}]
    script = Script(
        sse_response(
            event({"choices": [{"index": 0, "delta": {"tool_calls": calls}}]}),
            event({"choices": [{"index": 0, "delta": {"tool_calls": second}}]}),
            event({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}),
            "data: [DONE]\n\n",
        )
    )
    seen = list(make(script).stream(request(), CancelToken()))
    done = seen[-1]
    assert isinstance(done, StreamDone) and len(done.message.tool_calls) == 2


def test_a_call_id_repeated_at_another_index_is_another_call_with_its_own_id() -> None:
    def delta(index: int, arguments: str) -> str:
        call = {"index": index, "id": "call_x", "function": {"name": "f", "arguments": arguments}}
        return event({"choices": [{"index": 0, "delta": {"tool_calls": [call]}}]})

    script = Script(
        sse_response(
            delta(0, '{"a": '),
            delta(0, "1}"),
            delta(1, '{"a": 2}'),
            event({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}),
            "data: [DONE]\n\n",
        )
    )
    calls = done_of(list(make(script).stream(request(), CancelToken()))).message.tool_calls
    assert [c.arguments for c in calls] == ['{"a": 1}', '{"a": 2}']
    assert calls[0].id == "call_x" and calls[1].id not in ("call_x", "")


def test_an_error_object_inside_the_stream_is_translated() -> None:
    error = {
        "error": {"message": "maximum context length exceeded", "code": "context_length_exceeded"}
    }
    script = Script(sse_response(event(error)))
    with pytest.raises(ContextTooLong):
        run(make(script))


def test_a_cancel_during_a_retry_wait_raises_cancelled_at_once() -> None:
    script = Script(json_response(503, {"error": {"message": "busy"}}), ok_stream())
    calls: list[float] = []

    def cancelling_sleep(cancel: CancelToken, seconds: float) -> bool:
        calls.append(seconds)
        cancel.cancel()
        return cancel.wait(seconds)

    provider = OpenAIProvider(BASE, KEY, transport=script.transport, sleep=cancelling_sleep)
    with pytest.raises(Cancelled):
        run(provider)
    assert len(calls) == 1
    assert len(script.requests) == 1


def test_a_cancel_from_another_thread_ends_a_long_retry_after_wait() -> None:
    script = Script(json_response(429, {"error": {"message": "wait"}}, {"retry-after": "30"}))
    provider = OpenAIProvider(BASE, KEY, transport=script.transport)
    cancel = CancelToken()

    def cancel_after_first_request() -> None:
        script.first_request.wait(5)
        cancel.cancel()

    thread = threading.Thread(target=cancel_after_first_request)
    thread.start()
    with pytest.raises(Cancelled):
        list(provider.stream(request(), cancel))
    thread.join(5)
    assert len(script.requests) == 1


def test_an_already_cancelled_token_sends_no_request() -> None:
    script = Script(ok_stream())
    cancel = CancelToken()
    cancel.cancel()
    with pytest.raises(Cancelled):
        list(make(script).stream(request(), cancel))
    assert script.requests == []


def test_the_provider_repr_never_shows_the_key() -> None:
    provider = make(Script(ok_stream()))
    assert KEY not in repr(provider)
    assert KEY not in repr(provider._endpoint)
