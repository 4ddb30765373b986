"""AnthropicProvider against scripted MockTransports: body, cache breakpoints, events, errors."""

from __future__ import annotations

from typing import Any

import pytest

from qshell.cancel import CancelToken
from qshell.errors import AuthError, ProviderUnavailable, RateLimited, StreamBroken
from qshell.llm.anthropic import AnthropicProvider
from qshell.llm.base import StreamEvent, StreamText, StreamToolCall
from qshell.llm.http import RetryPolicy
from qshell.llm.messages import (
    ChatRequest,
    Message,
    TextBlock,
    ToolCall,
    ToolResultBlock,
    ToolSpec,
)
from tests.llm.provider_calls import chat_request, done_of
from tests.llm.sse import Script, Sleeps, anthropic, json_response, sse_response

KEY = "sk-ant-api03-abcdefghijklmnopqrstuvwxyz0123456789"
BASE = "http://claude.test"
EPHEMERAL = {"type": "ephemeral"}


def make(script: Script, *, attempts: int = 4, sleeps: Sleeps | None = None) -> AnthropicProvider:
    return AnthropicProvider(
        BASE + "/",
        KEY,
        retry=RetryPolicy(max_attempts=attempts, seed=1),
        transport=script.transport,
        sleep=sleeps or Sleeps(),
    )


def request(**overrides: Any) -> ChatRequest:
    return chat_request("claude-test", "be brief", **overrides)


def run(provider: AnthropicProvider, req: ChatRequest | None = None) -> list[StreamEvent]:
    return list(provider.stream(req or request(), CancelToken()))


def start(usage: dict[str, Any] | None = None) -> str:
    return anthropic("message_start", message={"usage": usage or {"input_tokens": 5}})


def text_block(index: int, *parts: str) -> list[str]:
    return [
        anthropic("content_block_start", index=index, content_block={"type": "text", "text": ""}),
        *[
            anthropic("content_block_delta", index=index, delta={"type": "text_delta", "text": p})
            for p in parts
        ],
        anthropic("content_block_stop", index=index),
    ]


def tool_block(index: int, call_id: str, name: str, *json_parts: str) -> list[str]:
    block = {"type": "tool_use", "id": call_id, "name": name, "input": {}}
    deltas = [{"type": "input_json_delta", "partial_json": p} for p in json_parts]
    return [
        anthropic("content_block_start", index=index, content_block=block),
        *[anthropic("content_block_delta", index=index, delta=d) for d in deltas],
        anthropic("content_block_stop", index=index),
    ]


def end(stop_reason: str = "end_turn", output_tokens: int = 7) -> list[str]:
    return [
        anthropic(
            "message_delta",
            delta={"stop_reason": stop_reason},
            usage={"output_tokens": output_tokens},
        ),
        anthropic("message_stop"),
    ]


def ok_stream() -> Any:
    return sse_response(start(), *text_block(0, "ok"), *end())


def test_the_request_body_places_cache_breakpoints_and_converts_tool_blocks() -> None:
    script = Script(ok_stream())
    history = [
        Message.user("list files"),
        Message.assistant("looking", [ToolCall(id="t1", name="ls", arguments='{"path": "."}')]),
        Message.assistant("", [ToolCall(id="t2", name="cat", arguments="{broken")]),
        Message(
            role="user",
            content=[
                TextBlock(text="and then?"),
                ToolResultBlock(tool_call_id="t1", content="a.py"),
                ToolResultBlock(tool_call_id="t2", content="denied", is_error=True),
            ],
        ),
    ]
    tools = [
        ToolSpec(name="ls", description="list", parameters={"type": "object"}),
        ToolSpec(name="cat", description="read", parameters={"type": "object"}),
    ]
    run(make(script), request(messages=history, tools=tools, max_tokens=321))

    sent = script.requests[0]
    assert str(sent.url) == BASE + "/v1/messages"
    assert sent.headers["x-api-key"] == KEY
    assert sent.headers["anthropic-version"] == "2023-06-01"
    assert sent.headers["content-type"] == "application/json"
    body = script.bodies[0]
    assert body["stream"] is True
    assert body["max_tokens"] == 321
    assert body["model"] == "claude-test"
    assert "temperature" not in body
    assert body["system"] == [{"type": "text", "text": "be brief", "cache_control": EPHEMERAL}]
    assert body["tools"] == [
        {"name": "ls", "description": "list", "input_schema": {"type": "object"}},
        {
            "name": "cat",
            "description": "read",
            "input_schema": {"type": "object"},
            "cache_control": EPHEMERAL,
        },
    ]
    assert body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "list files"}]},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "looking"},
                {"type": "tool_use", "id": "t1", "name": "ls", "input": {"path": "."}},
                {"type": "tool_use", "id": "t2", "name": "cat", "input": {}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "t1", "content": "a.py", "is_error": False},
                {"type": "tool_result", "tool_use_id": "t2", "content": "denied", "is_error": True},
                {"type": "text", "text": "and then?", "cache_control": EPHEMERAL},
            ],
        },
    ]


def test_text_streams_and_usage_counts_cache_reads_and_writes_in_the_prompt() -> None:
    usage = {"input_tokens": 10, "cache_read_input_tokens": 200, "cache_creation_input_tokens": 30}
    script = Script(
        sse_response(
            start(usage),
            anthropic("ping"),
            *text_block(0, "Hel", "lo"),
            *end(output_tokens=4),
        )
    )
    events = run(make(script))
    assert [e.text for e in events if isinstance(e, StreamText)] == ["Hel", "lo"]
    done = done_of(events)
    assert done.message.text == "Hello"
    assert done.stop_reason == "end_turn"
    assert done.usage.prompt_tokens == 240
    assert done.usage.completion_tokens == 4
    assert done.usage.cached_tokens == 200
    assert done.usage.cache_creation_tokens == 30


def test_cache_counts_are_unknown_when_the_server_omits_them() -> None:
    done = done_of(run(make(Script(ok_stream()))))
    assert done.usage.prompt_tokens == 5
    assert done.usage.cached_tokens is None
    assert done.usage.cache_creation_tokens is None


def test_tool_use_input_json_deltas_are_accumulated_per_block() -> None:
    script = Script(
        sse_response(
            start(),
            *text_block(0, "let me look"),
            *tool_block(1, "toolu_a", "ls", '{"pa', 'th": "."}'),
            *tool_block(2, "toolu_b", "pwd"),
            *end("tool_use"),
        )
    )
    done = done_of(run(make(script)))
    assert done.stop_reason == "tool_use"
    assert done.message.text == "let me look"
    assert done.message.tool_calls == [
        ToolCall(id="toolu_a", name="ls", arguments='{"path": "."}'),
        ToolCall(id="toolu_b", name="pwd", arguments="{}"),
    ]


def test_a_tool_use_id_repeated_in_one_message_is_made_unique() -> None:
    # a buggy or hostile server: two calls with one id would share one result, and a
    # history holding the id twice is one the next request cannot send
    script = Script(
        sse_response(
            start(),
            *tool_block(0, "toolu_a", "ls", '{"path": "a"}'),
            *tool_block(1, "toolu_a", "ls", '{"path": "b"}'),
            *end("tool_use"),
        )
    )
    events = run(make(script))
    calls = done_of(events).message.tool_calls
    assert calls[0].id == "toolu_a" and calls[1].id not in ("toolu_a", "")
    assert [c.arguments for c in calls] == ['{"path": "a"}', '{"path": "b"}']
    early = [e.call for e in events if isinstance(e, StreamToolCall)]
    assert early == calls  # the early announcement names the same ids


def test_max_tokens_stop_reason_is_reported() -> None:
    script = Script(sse_response(start(), *text_block(0, "cut"), *end("max_tokens")))
    assert done_of(run(make(script))).stop_reason == "max_tokens"


def test_an_overloaded_error_event_before_content_is_retried() -> None:
    overloaded = anthropic("error", error={"type": "overloaded_error", "message": "Overloaded"})
    script = Script(sse_response(start(), overloaded), ok_stream())
    assert done_of(run(make(script))).message.text == "ok"
    assert len(script.requests) == 2


def test_an_overloaded_error_event_is_provider_unavailable() -> None:
    overloaded = anthropic("error", error={"type": "overloaded_error", "message": "Overloaded"})
    script = Script(sse_response(start(), overloaded))
    with pytest.raises(ProviderUnavailable) as caught:
        run(make(script, attempts=1))
    assert "Overloaded" in str(caught.value)


def test_a_stream_without_message_stop_is_stream_broken() -> None:
    script = Script(sse_response(start(), *text_block(0, "half")))
    with pytest.raises(StreamBroken):
        run(make(script))
    assert len(script.requests) == 1


def test_malformed_event_data_is_stream_broken() -> None:
    script = Script(sse_response(start(), "event: content_block_delta\ndata: {oops\n\n"))
    with pytest.raises(StreamBroken) as caught:
        run(make(script))
    assert "malformed stream" in str(caught.value)


def test_a_401_is_an_auth_error_naming_anthropic_api_key_and_hiding_the_key() -> None:
    body = {"type": "error", "error": {"type": "authentication_error", "message": f"bad key {KEY}"}}
    script = Script(json_response(401, body))
    with pytest.raises(AuthError) as caught:
        run(make(script))
    text = str(caught.value) + repr(caught.value)
    assert "ANTHROPIC_API_KEY" in text
    assert KEY not in text
    assert "sk-ant" not in text


def test_a_529_that_persists_is_provider_unavailable_after_every_attempt() -> None:
    body = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    script = Script(*[json_response(529, body) for _ in range(3)])
    sleeps = Sleeps()
    with pytest.raises(ProviderUnavailable) as caught:
        run(make(script, attempts=3, sleeps=sleeps))
    assert caught.value.status == 529
    assert len(sleeps.delays) == 2


def test_a_rate_limit_error_event_is_rate_limited() -> None:
    limited = anthropic("error", error={"type": "rate_limit_error", "message": "slow down"})
    with pytest.raises(RateLimited):
        run(make(Script(sse_response(limited)), attempts=1))


def test_the_provider_repr_never_shows_the_key() -> None:
    assert KEY not in repr(make(Script(ok_stream())))
