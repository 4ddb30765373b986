"""Tests of the scripted fake LLM server itself (tests/fakes), driven with raw httpx.

SSE is parsed by hand here so these tests do not depend on qshell's providers. No test
asserts wall-clock time: waits go through threading.Event with generous timeouts.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.fakes.llm_server import (
    TEST_API_KEY,
    Fault,
    Latency,
    RecordedRequest,
    Reply,
    Rule,
    ScriptedLLMServer,
    ToolCallSpec,
    Usage,
    always,
    any_text_contains,
    has_tool_result,
    last_user_text_contains,
    load_script,
    system_contains,
)
from tests.fakes.recording import parse_conversation

OPENAI_HEADERS = {"Authorization": f"Bearer {TEST_API_KEY}"}
ANTHROPIC_HEADERS = {"x-api-key": TEST_API_KEY, "anthropic-version": "2023-06-01"}
ROOT = Path(__file__).resolve().parents[1]


def openai_body(prompt: str, *, stream: bool = True, usage: bool = False, **extra: Any) -> dict:
    body: dict[str, Any] = {
        "model": "gpt-test",
        "stream": stream,
        "messages": [
            {"role": "system", "content": "You are qshell."},
            {"role": "user", "content": prompt},
        ],
    }
    if usage:
        body["stream_options"] = {"include_usage": True}
    body.update(extra)
    return body


def anthropic_body(prompt: str, *, stream: bool = True, **extra: Any) -> dict:
    body: dict[str, Any] = {
        "model": "claude-test",
        "max_tokens": 100,
        "stream": stream,
        "system": "You are qshell.",
        "messages": [{"role": "user", "content": prompt}],
    }
    body.update(extra)
    return body


def openai_events(server: ScriptedLLMServer, body: dict, headers: dict | None = None) -> list:
    """Every `data:` payload of an OpenAI stream, JSON-decoded ("[DONE]" kept as text)."""
    events: list = []
    url = server.openai_base_url + "/chat/completions"
    with httpx.stream("POST", url, json=body, headers=headers or OPENAI_HEADERS) as response:
        assert response.status_code == 200, response.read()
        for line in response.iter_lines():
            if line.startswith("data: "):
                payload = line[len("data: ") :]
                events.append(payload if payload == "[DONE]" else json.loads(payload))
    return events


def anthropic_events(server: ScriptedLLMServer, body: dict) -> list[tuple[str, dict]]:
    """(event name, decoded data) pairs of an Anthropic stream."""
    events: list[tuple[str, dict]] = []
    name = ""
    url = server.anthropic_base_url + "/v1/messages"
    with httpx.stream("POST", url, json=body, headers=ANTHROPIC_HEADERS) as response:
        assert response.status_code == 200, response.read()
        for line in response.iter_lines():
            if line.startswith("event: "):
                name = line[len("event: ") :]
            elif line.startswith("data: "):
                events.append((name, json.loads(line[len("data: ") :])))
    return events


def openai_text(events: list) -> str:
    return "".join(
        e["choices"][0]["delta"].get("content") or ""
        for e in events
        if isinstance(e, dict) and e["choices"]
    )


def openai_calls(events: list) -> dict[int, dict[str, str]]:
    calls: dict[int, dict[str, str]] = {}
    for event in events:
        if not isinstance(event, dict) or not event["choices"]:
            continue
        for delta in event["choices"][0]["delta"].get("tool_calls") or []:
            call = calls.setdefault(delta["index"], {"id": "", "name": "", "arguments": ""})
            call["id"] = delta.get("id", call["id"])
            function = delta.get("function", {})
            call["name"] = function.get("name", call["name"])
            call["arguments"] += function.get("arguments", "")
    return calls


def post_openai(server: ScriptedLLMServer, body: dict, **kwargs: Any) -> httpx.Response:
    headers = kwargs.pop("headers", OPENAI_HEADERS)
    url = server.openai_base_url + "/chat/completions"
    return httpx.post(url, json=body, headers=headers, **kwargs)


def post_anthropic(server: ScriptedLLMServer, body: dict, **kwargs: Any) -> httpx.Response:
    headers = kwargs.pop("headers", ANTHROPIC_HEADERS)
    return httpx.post(server.url + "/v1/messages", json=body, headers=headers, **kwargs)


def in_thread(target: Any, *args: Any) -> tuple[threading.Thread, dict[str, Any]]:
    """Run target(*args) on a daemon thread; its result or exception lands in the dict."""
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["result"] = target(*args)
        except Exception as exc:
            outcome["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, outcome


# --------------------------------------------------------------------------- text replies


def test_openai_text_stream(llm_server: ScriptedLLMServer) -> None:
    llm_server.add_rule(
        Rule(match=last_user_text_contains("hello"), reply=Reply.text("Hi! How can I help?"))
    )
    events = openai_events(llm_server, openai_body("hello there"))
    assert events[-1] == "[DONE]"
    chunks = events[:-1]
    assert all(c["object"] == "chat.completion.chunk" and c["model"] == "gpt-test" for c in chunks)
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    assert openai_text(events) == "Hi! How can I help?"
    assert sum(1 for c in chunks if c["choices"][0]["delta"].get("content")) > 1
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop"
    assert all("usage" not in c for c in chunks)
    (request,) = llm_server.requests
    assert request.protocol == "openai" and request.status == 200
    assert request.headers["authorization"] == f"Bearer {TEST_API_KEY}"
    assert request.completed.wait(5)


def test_anthropic_text_stream(llm_server: ScriptedLLMServer) -> None:
    llm_server.add_rule(
        Rule(match=last_user_text_contains("hello"), reply=Reply.text("Hi from Claude"))
    )
    events = anthropic_events(llm_server, anthropic_body("hello"))
    names = [name for name, _ in events]
    assert names[0] == "message_start" and "ping" in names
    assert names[-2:] == ["message_delta", "message_stop"]
    assert all(data["type"] == name for name, data in events)
    text = "".join(d["delta"]["text"] for n, d in events if n == "content_block_delta")
    assert text == "Hi from Claude"
    usage = events[0][1]["message"]["usage"]
    assert {"input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens"} <= set(usage)
    delta = next(d for n, d in events if n == "message_delta")
    assert delta["delta"]["stop_reason"] == "end_turn"
    assert delta["usage"]["output_tokens"] > 0
    assert llm_server.requests_for("anthropic")[0].system_text == "You are qshell."


def test_non_stream_replies(llm_server: ScriptedLLMServer) -> None:
    llm_server.add_rule(Rule(match=always(), reply=Reply.text("plain")))
    openai = post_openai(llm_server, openai_body("x", stream=False)).json()
    assert openai["object"] == "chat.completion"
    assert openai["choices"][0]["message"]["content"] == "plain"
    anthropic = post_anthropic(llm_server, anthropic_body("x", stream=False)).json()
    assert anthropic["content"] == [{"type": "text", "text": "plain"}]
    assert anthropic["stop_reason"] == "end_turn"


# --------------------------------------------------------------------------- tool calls


@pytest.mark.parametrize("interleave", [False, True])
def test_openai_parallel_tool_calls(llm_server: ScriptedLLMServer, interleave: bool) -> None:
    calls = [
        ToolCallSpec("shell", {"command": "ls -la /tmp"}, id="call_A"),
        ToolCallSpec("read_file", {"path": "README.md"}, id="call_B"),
    ]
    llm_server.add_rule(
        Rule(
            match=always(),
            reply=Reply.tool_calls(calls, text="Let me look.", interleave=interleave),
        )
    )
    events = openai_events(llm_server, openai_body("look around"))
    assembled = openai_calls(events)
    assert assembled[0] == {
        "id": "call_A",
        "name": "shell",
        "arguments": json.dumps({"command": "ls -la /tmp"}),
    }
    assert assembled[1]["name"] == "read_file"
    assert json.loads(assembled[1]["arguments"]) == {"path": "README.md"}
    assert openai_text(events) == "Let me look."
    deltas = [d for e in events[:-1] for d in e["choices"][0]["delta"].get("tool_calls") or []]
    firsts: dict[int, dict] = {}
    for delta in deltas:
        firsts.setdefault(delta["index"], delta)
    assert all("id" in d and d["function"]["name"] for d in firsts.values())
    later = [d for d in deltas if d is not firsts[d["index"]]]
    assert later and all("id" not in d and "name" not in d["function"] for d in later)
    order = [d["index"] for d in deltas]
    assert (order != sorted(order)) is interleave
    assert events[-2]["choices"][0]["finish_reason"] == "tool_calls"


def test_openai_repeat_id_and_name(llm_server: ScriptedLLMServer) -> None:
    reply = Reply.tool_calls([ToolCallSpec("shell", {"command": "pwd"})], repeat_id_and_name=True)
    llm_server.add_rule(Rule(match=always(), reply=reply))
    events = openai_events(llm_server, openai_body("where"))
    deltas = [d for e in events[:-1] for d in e["choices"][0]["delta"].get("tool_calls") or []]
    assert len(deltas) > 2
    assert len({d["id"] for d in deltas}) == 1
    assert all(d["function"]["name"] == "shell" for d in deltas)


def test_openai_legacy_function_call(llm_server: ScriptedLLMServer) -> None:
    reply = Reply.tool_calls([ToolCallSpec("shell", {"command": "pwd"})], legacy_function_call=True)
    llm_server.add_rule(Rule(match=always(), reply=reply))
    events = openai_events(llm_server, openai_body("where"))
    parts = [e["choices"][0]["delta"].get("function_call") for e in events[:-1]]
    parts = [p for p in parts if p]
    assert parts[0]["name"] == "shell"
    assert json.loads("".join(p["arguments"] for p in parts)) == {"command": "pwd"}
    assert all("tool_calls" not in e["choices"][0]["delta"] for e in events[:-1])
    assert events[-2]["choices"][0]["finish_reason"] == "function_call"


def test_anthropic_tool_use(llm_server: ScriptedLLMServer) -> None:
    calls = [ToolCallSpec("shell", {"command": "ls"}), ToolCallSpec("read_file", {"path": "a"})]
    llm_server.add_rule(Rule(match=always(), reply=Reply.tool_calls(calls)))
    events = anthropic_events(llm_server, anthropic_body("go"))
    starts = [d["content_block"] for n, d in events if n == "content_block_start"]
    assert [b["type"] for b in starts] == ["tool_use", "tool_use"]
    assert [b["name"] for b in starts] == ["shell", "read_file"]
    assert all(b["id"].startswith("toolu_") and b["input"] == {} for b in starts)
    pieces = [d for n, d in events if n == "content_block_delta" and d["index"] == 0]
    assert len(pieces) > 2
    assert json.loads("".join(p["delta"]["partial_json"] for p in pieces)) == {"command": "ls"}
    delta = next(d for n, d in events if n == "message_delta")
    assert delta["delta"]["stop_reason"] == "tool_use"


# --------------------------------------------------------------------------- usage


def test_openai_usage_with_and_without_cached_tokens(llm_server: ScriptedLLMServer) -> None:
    llm_server.add_rule(
        Rule(
            match=last_user_text_contains("cached"),
            reply=Reply.text("a", usage=Usage(100, 7, cached_tokens=60)),
        )
    )
    llm_server.add_rule(
        Rule(match=last_user_text_contains("bare"), reply=Reply.text("b", cached_tokens=None))
    )
    cached = openai_events(llm_server, openai_body("cached", usage=True))
    final = cached[-2]
    assert final["choices"] == []
    assert final["usage"] == {
        "prompt_tokens": 100,
        "completion_tokens": 7,
        "total_tokens": 107,
        "prompt_tokens_details": {"cached_tokens": 60},
    }
    assert all(e["usage"] is None for e in cached[:-2])
    bare = openai_events(llm_server, openai_body("bare", usage=True))[-2]["usage"]
    assert "prompt_tokens_details" not in bare
    assert bare["completion_tokens"] >= 1 and bare["prompt_tokens"] >= 1


def test_a_modelled_prompt_cache_reports_the_prefix_an_earlier_prompt_shared(
    llm_server_factory: Any,
) -> None:
    server = llm_server_factory(prompt_cache=True)
    server.add_rule(always(), Reply.text("ok"))
    first = openai_body("first question", usage=True)
    longer = openai_body("first question", usage=True)
    longer["messages"] += [
        {"role": "assistant", "content": "ok"},
        {"role": "user", "content": "and a second one"},
    ]
    cold = openai_events(server, first)[-2]["usage"]
    warm = openai_events(server, longer)[-2]["usage"]
    other_model = openai_events(server, {**longer, "model": "gpt-other"})[-2]["usage"]
    assert cold["prompt_tokens_details"] == {"cached_tokens": 0}
    cold_request, warm_request, _ = server.requests
    assert warm_request.cached is not None and cold_request.cached is not None
    # the whole of the first prompt but its closing characters is a prefix of the second
    shared = warm["prompt_tokens_details"]["cached_tokens"]
    assert cold["prompt_tokens"] - 1 <= shared < warm["prompt_tokens"]
    assert warm_request.cached.cached_tokens == shared
    assert other_model["prompt_tokens_details"] == {"cached_tokens": 0}  # a cache per model


def test_anthropic_cache_markers_do_not_break_the_modelled_prefix(llm_server_factory: Any) -> None:
    server = llm_server_factory(prompt_cache=True)
    server.add_rule(always(), Reply.text("ok"))
    marker = {"type": "ephemeral"}
    block = {"type": "text", "text": "hello there"}
    first = anthropic_body(
        "", messages=[{"role": "user", "content": [{**block, "cache_control": marker}]}]
    )
    again = anthropic_body("", messages=[{"role": "user", "content": [block]}])
    anthropic_events(server, first)
    anthropic_events(server, again)
    cached = server.requests[1].cached
    assert cached is not None and cached.cached_tokens == cached.prompt_tokens


def test_sent_tokens_count_what_was_written_before_the_client_left(
    llm_server: ScriptedLLMServer,
) -> None:
    llm_server.add_rule(always(), Reply.text("abcd" * 50))
    openai_events(llm_server, openai_body("whole"))
    rule = llm_server.add_rule(always(), Reply.text("abcd" * 50), first=True)
    hold = llm_server.hold(rule, after_first_chunk=True)
    url = llm_server.openai_base_url + "/chat/completions"
    with httpx.stream("POST", url, json=openai_body("cut"), headers=OPENAI_HEADERS):
        assert hold.wait_arrived().index == 1
    whole, cut = llm_server.requests
    assert whole.sent_tokens == 50
    assert cut.disconnected.wait(10) and cut.completed.wait(10)
    hold.release()
    assert 1 <= cut.sent_tokens < 50


def test_anthropic_usage_fields(llm_server: ScriptedLLMServer) -> None:
    usage = Usage(
        prompt_tokens=50, completion_tokens=9, cached_tokens=40, cache_creation_tokens=None
    )
    llm_server.add_rule(Rule(match=always(), reply=Reply.text("ok", usage=usage)))
    events = anthropic_events(llm_server, anthropic_body("x"))
    assert events[0][1]["message"]["usage"] == {
        "input_tokens": 50,
        "cache_read_input_tokens": 40,
        "output_tokens": 1,
    }
    assert next(d for n, d in events if n == "message_delta")["usage"] == {"output_tokens": 9}


# --------------------------------------------------------------------------- refusals


def test_openai_auth_401_masks_key(llm_server: ScriptedLLMServer) -> None:
    llm_server.add_rule(Rule(match=always(), reply=Reply.text("never")))
    wrong = "sk-abcdefghijklmnopqrstuvwxyz"
    response = post_openai(
        llm_server, openai_body("x"), headers={"Authorization": f"Bearer {wrong}"}
    )
    assert response.status_code == 401
    error = response.json()["error"]
    assert error["type"] == "invalid_request_error" and error["code"] == "invalid_api_key"
    assert "Incorrect API key provided: sk-ab" in error["message"]
    assert "****" in error["message"] and wrong not in response.text
    missing = post_openai(llm_server, openai_body("x"), headers={})
    assert missing.status_code == 401
    assert missing.json()["error"]["code"] == "invalid_api_key"
    assert [r.status for r in llm_server.requests] == [401, 401]
    assert all(r.matched_rule is None for r in llm_server.requests)


def test_anthropic_auth_401(llm_server: ScriptedLLMServer) -> None:
    response = post_anthropic(
        llm_server,
        anthropic_body("x"),
        headers={"x-api-key": "nope", "anthropic-version": "2023-06-01"},
    )
    assert response.status_code == 401
    assert response.json() == {
        "type": "error",
        "error": {"type": "authentication_error", "message": "invalid x-api-key"},
    }


def test_unknown_model_404(llm_server_factory: Any) -> None:
    server = llm_server_factory(models={"gpt-test", "claude-test"})
    server.add_rule(Rule(match=always(), reply=Reply.text("ok")))
    assert post_openai(server, openai_body("x", stream=False)).status_code == 200
    response = post_openai(server, openai_body("x", model="gpt-nope"))
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "model_not_found"
    response = post_anthropic(server, anthropic_body("x", model="claude-nope"))
    assert response.status_code == 404
    assert response.json()["error"]["type"] == "not_found_error"


def test_missing_anthropic_version_is_refused(llm_server: ScriptedLLMServer) -> None:
    response = post_anthropic(llm_server, anthropic_body("x"), headers={"x-api-key": TEST_API_KEY})
    assert response.status_code == 400
    assert response.json()["error"]["type"] == "invalid_request_error"


def test_unmatched_request_gets_500(llm_server: ScriptedLLMServer) -> None:
    llm_server.add_rule(Rule(match=last_user_text_contains("known"), reply=Reply.text("ok")))
    response = post_openai(llm_server, openai_body("something else"))
    assert response.status_code == 500
    assert "no rule matched" in response.json()["error"]["message"]
    (request,) = llm_server.requests
    assert request.unmatched and request.matched_rule is None


# --------------------------------------------------------------------------- faults


def test_http_fault_and_reply_sequence(llm_server: ScriptedLLMServer) -> None:
    rule = llm_server.add_rule(
        Rule(match=always(), replies=[Fault.http(503), Reply.text("recovered")])
    )
    first = post_anthropic(llm_server, anthropic_body("x"))
    assert first.status_code == 503
    assert first.json()["type"] == "error"
    assert openai_text(openai_events(llm_server, openai_body("x"))) == "recovered"
    assert rule.exhausted and rule.hits == 2
    assert post_openai(llm_server, openai_body("x")).status_code == 500
    assert llm_server.requests[-1].unmatched


def test_rate_limited(llm_server: ScriptedLLMServer) -> None:
    llm_server.add_rule(Rule(match=always(), reply=Fault.rate_limited(retry_after_s=2), times=2))
    response = post_openai(llm_server, openai_body("x"))
    assert response.status_code == 429
    assert response.headers["Retry-After"] == "2"
    assert response.json()["error"]["code"] == "rate_limit_exceeded"
    response = post_anthropic(llm_server, anthropic_body("x"))
    assert response.status_code == 429
    assert response.json()["error"]["type"] == "rate_limit_error"


def test_context_too_long(llm_server: ScriptedLLMServer) -> None:
    llm_server.add_rule(Rule(match=always(), reply=Fault.context_too_long()))
    error = post_openai(llm_server, openai_body("x")).json()["error"]
    assert error["code"] == "context_length_exceeded"
    assert error["message"].startswith("This model's maximum context length is")
    response = post_anthropic(llm_server, anthropic_body("x"))
    assert response.status_code == 400
    assert response.json()["error"]["message"].startswith("prompt is too long")


def test_cut_midway_breaks_the_transfer(llm_server: ScriptedLLMServer) -> None:
    llm_server.add_rule(
        Rule(match=always(), reply=Fault.cut_midway(Reply.text("abcdefghijklmnop"), after_chunks=2))
    )
    lines: list[str] = []
    url = llm_server.openai_base_url + "/chat/completions"
    with (
        pytest.raises(httpx.RemoteProtocolError),
        httpx.stream("POST", url, json=openai_body("x"), headers=OPENAI_HEADERS) as response,
    ):
        lines.extend(response.iter_lines())
    payloads = [json.loads(line[6:]) for line in lines if line.startswith("data: ")]
    assert openai_text(payloads) == "abcdefgh"
    assert all(p["choices"][0]["finish_reason"] is None for p in payloads)


def test_cut_midway_clean_close(llm_server: ScriptedLLMServer) -> None:
    llm_server.add_rule(
        Rule(match=always(), reply=Fault.cut_midway(after_chunks=1, clean_close=True))
    )
    events = anthropic_events(llm_server, anthropic_body("x"))
    names = [n for n, _ in events]
    assert "content_block_delta" in names
    assert "message_stop" not in names and "message_delta" not in names


def test_malformed_json(llm_server: ScriptedLLMServer) -> None:
    llm_server.add_rule(Rule(match=always(), reply=Fault.malformed_json(after_chunks=1)))
    url = llm_server.openai_base_url + "/chat/completions"
    with httpx.stream("POST", url, json=openai_body("x"), headers=OPENAI_HEADERS) as response:
        data = [line[6:] for line in response.iter_lines() if line.startswith("data: ")]
    json.loads(data[0])
    with pytest.raises(ValueError):
        json.loads(data[-1])
    assert "[DONE]" not in data


def test_stall_times_out_the_client_and_is_noticed(llm_server: ScriptedLLMServer) -> None:
    llm_server.add_rule(Rule(match=always(), reply=Fault.stall(60)))
    url = llm_server.openai_base_url + "/chat/completions"
    timeout = httpx.Timeout(5.0, read=0.3)
    received: list[str] = []
    with (
        pytest.raises(httpx.ReadTimeout),
        httpx.stream(
            "POST", url, json=openai_body("x"), headers=OPENAI_HEADERS, timeout=timeout
        ) as response,
    ):
        received.extend(response.iter_lines())
    assert any(line.startswith("data: ") for line in received)
    assert llm_server.requests[0].disconnected.wait(5)


def test_stall_released_then_reply(llm_server: ScriptedLLMServer) -> None:
    llm_server.add_rule(
        Rule(match=always(), reply=Fault.stall(60, reply=Reply.text("late answer")))
    )
    thread, outcome = in_thread(openai_events, llm_server, openai_body("x"))
    request = llm_server.wait_for_requests(1)[0]
    assert not request.completed.wait(0.2)
    llm_server.release_all()
    thread.join(5)
    assert openai_text(outcome["result"]) == "late answer"


# --------------------------------------------------------------------------- holds


def test_hold_and_release(llm_server: ScriptedLLMServer) -> None:
    rule = llm_server.add_rule(Rule(match=always(), reply=Reply.text("released!")))
    hold = llm_server.hold(rule)
    thread, outcome = in_thread(post_openai, llm_server, openai_body("x", stream=False))
    request = hold.wait_arrived(5)
    assert not request.completed.is_set() and request.status is None
    hold.release()
    thread.join(5)
    assert outcome["result"].json()["choices"][0]["message"]["content"] == "released!"
    assert request.completed.wait(5)


def test_hold_after_first_chunk(llm_server: ScriptedLLMServer) -> None:
    rule = llm_server.add_rule(
        Rule(
            match=always(),
            reply=Reply.text("one two three four"),
            hold=True,
            hold_after_first_chunk=True,
        )
    )
    hold = rule.hold_handle
    assert hold is not None
    url = llm_server.openai_base_url + "/chat/completions"
    with httpx.stream("POST", url, json=openai_body("x"), headers=OPENAI_HEADERS) as response:
        lines = response.iter_lines()
        texts = []
        for line in lines:
            if line.startswith("data: "):
                delta = json.loads(line[6:])["choices"][0]["delta"]
                if delta.get("content"):
                    texts.append(delta["content"])
                    break
        assert texts == ["one "]
        assert hold.arrived.wait(5)
        hold.release()
        rest = [line for line in lines if line.startswith("data: ")]
    assert rest[-1] == "data: [DONE]"


def test_disconnect_detected_while_held(llm_server: ScriptedLLMServer) -> None:
    hold = llm_server.hold(llm_server.add_rule(Rule(match=always(), reply=Reply.text("x"))))
    body = json.dumps(anthropic_body("x")).encode()
    head = (
        f"POST /v1/messages HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"x-api-key: {TEST_API_KEY}\r\nanthropic-version: 2023-06-01\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode()
    client = socket.create_connection(("127.0.0.1", llm_server.port))
    client.sendall(head + body)
    request = hold.wait_arrived(5)
    assert not request.disconnected.is_set()
    client.close()
    assert request.disconnected.wait(5)
    assert request.completed.wait(5)


def test_disconnect_detected_while_held_mid_stream(llm_server: ScriptedLLMServer) -> None:
    hold = llm_server.hold(
        llm_server.add_rule(Rule(match=always(), reply=Reply.text("a b c d e f"))),
        after_first_chunk=True,
    )
    url = llm_server.openai_base_url + "/chat/completions"
    with httpx.stream("POST", url, json=openai_body("x"), headers=OPENAI_HEADERS) as response:
        request = hold.wait_arrived(5)
        next(response.iter_lines())
    assert request.disconnected.wait(5)


def test_stop_releases_held_requests(llm_server_factory: Any) -> None:
    server = llm_server_factory()
    server.hold(server.add_rule(Rule(match=always(), reply=Reply.text("x"))))
    thread, _ = in_thread(post_openai, server, openai_body("x"))
    server.wait_for_requests(1)
    server.stop()
    thread.join(5)
    assert not thread.is_alive()


# --------------------------------------------------------------------------- matching


def test_rules_match_content_under_concurrency(llm_server: ScriptedLLMServer) -> None:
    main_rule = Rule(
        match=last_user_text_contains("main task"), reply=Reply.text("main answer"), hold=True
    )
    side_rule = Rule(match=system_contains("suggest"), reply=Reply.text("side answer"), hold=True)
    llm_server.add_rule(main_rule)
    llm_server.add_rule(side_rule)
    side_body = openai_body("what comes next?")
    side_body["messages"][0]["content"] = "You suggest the next prompt."
    main_thread, main_out = in_thread(openai_events, llm_server, openai_body("main task"))
    side_thread, side_out = in_thread(openai_events, llm_server, side_body)
    assert main_rule.hold_handle is not None and side_rule.hold_handle is not None
    main_rule.hold_handle.wait_arrived(5)
    side_rule.hold_handle.wait_arrived(5)
    llm_server.release_all()
    main_thread.join(5)
    side_thread.join(5)
    assert openai_text(main_out["result"]) == "main answer"
    assert openai_text(side_out["result"]) == "side answer"


def test_matchers_read_both_protocols() -> None:
    openai = RecordedRequest(
        "/v1/chat/completions",
        "openai",
        {},
        {
            "messages": [
                {"role": "system", "content": "sys prompt"},
                {"role": "user", "content": [{"type": "text", "text": "list files"}]},
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "c1",
                            "type": "function",
                            "function": {"name": "ls", "arguments": "{}"},
                        },
                        {
                            "id": "c2",
                            "type": "function",
                            "function": {"name": "pwd", "arguments": "{}"},
                        },
                    ],
                },
                {"role": "tool", "tool_call_id": "c1", "content": "a.txt"},
                {"role": "tool", "tool_call_id": "c2", "content": "/home"},
            ]
        },
        b"",
    )
    anthropic = RecordedRequest(
        "/v1/messages",
        "anthropic",
        {},
        {
            "system": [{"type": "text", "text": "sys prompt"}],
            "messages": [
                {"role": "user", "content": "list files"},
                {
                    "role": "assistant",
                    "content": [
                        {"type": "tool_use", "id": "t1", "name": "ls", "input": {"dir": "src"}}
                    ],
                },
                {
                    "role": "user",
                    "content": [
                        {
                            "type": "tool_result",
                            "tool_use_id": "t1",
                            "content": [{"type": "text", "text": "a.txt"}],
                        }
                    ],
                },
            ],
        },
        b"",
    )
    for request in (openai, anthropic):
        assert last_user_text_contains("list files")(request)
        assert has_tool_result()(request)
        assert has_tool_result("a.txt")(request)
        assert not has_tool_result("zzz")(request)
        assert system_contains("sys")(request)
        assert (system_contains("sys") & has_tool_result("a.txt"))(request)
        assert not (system_contains("sys") & ~has_tool_result())(request)
    assert has_tool_result("/home")(openai)
    assert any_text_contains('"dir": "src"')(anthropic)


# --------------------------------------------------------------------------- invariants


def _violations_for(protocol: str, messages: list[dict]) -> list[str]:
    with ScriptedLLMServer() as server:
        server.add_rule(Rule(match=always(), reply=Reply.text("ok")))
        if protocol == "openai":
            post_openai(server, {"model": "m", "messages": messages}, headers={})
        else:
            body = {"model": "m", "max_tokens": 5, "messages": messages}
            post_anthropic(server, body, headers={"anthropic-version": "2023-06-01"})
        return list(server.violations)


def test_invariant_unanswered_openai_tool_call() -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}
    messages: list[dict] = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "user", "content": "well?"},
    ]
    problems = _violations_for("openai", messages)
    assert len(problems) == 1 and "c1" in problems[0] and "no tool result" in problems[0]
    good: list[dict] = [*messages[:2], {"role": "tool", "tool_call_id": "c1", "content": "x"}]
    assert _violations_for("openai", good) == []


def test_invariant_anthropic_orphan_and_missing(llm_server: ScriptedLLMServer) -> None:
    llm_server.add_rule(Rule(match=always(), reply=Reply.text("ok")))
    messages = [
        {"role": "user", "content": "go"},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "t1", "name": "ls", "input": {}}],
        },
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t9", "content": "x"}]},
    ]
    post_anthropic(llm_server, anthropic_body("x", messages=messages))
    problems = list(llm_server.violations)
    assert any("t1" in p and "no tool result" in p for p in problems)
    assert any("unknown call t9" in p for p in problems)
    llm_server.violations.clear()


# --------------------------------------------------------------------------- latency


def test_latency_uses_injected_sleep(llm_server_factory: Any) -> None:
    sleeps: list[float] = []
    server = llm_server_factory(latency=Latency(ttft_s=0.5, tokens_per_s=10), sleep=sleeps.append)
    server.add_rule(Rule(match=always(), reply=Reply.text("abcdefghijkl")))
    assert openai_text(openai_events(server, openai_body("x"))) == "abcdefghijkl"
    assert sleeps == [0.5, 0.1, 0.1]
    sleeps.clear()
    fast = Reply.text("abcd", latency=Latency())
    server.add_rule(last_user_text_contains("fast"), fast, first=True)
    openai_events(server, openai_body("fast"))
    assert sleeps == []


# --------------------------------------------------------------------------- scripts


def test_load_script_builds_rules(tmp_path: Path, llm_server: ScriptedLLMServer) -> None:
    script = {
        "rules": [
            {"match": {"has_tool_result": True}, "reply": {"text": "done"}},
            {
                "match": {"last_user_text_contains": "flaky"},
                "reply": {"fault": "http_500"},
                "times": 1,
            },
            {"match": {"last_user_text_contains": "flaky"}, "reply": {"text": "fine now"}},
            {"match": {"last_user_text_contains": "stall"}, "reply": {"fault": {"stall": 2}}},
            {
                "match": {"always": True},
                "reply": {"tool_calls": [{"name": "shell", "arguments": {"command": "ls"}}]},
            },
        ]
    }
    path = tmp_path / "script.json"
    path.write_text(json.dumps(script))
    rules = load_script(path)
    assert [r.times for r in rules] == [None, 1, None, None, None]
    assert rules[3].reply == Fault.stall(2)
    llm_server.load_script(script)
    assert post_openai(llm_server, openai_body("flaky")).status_code == 500
    assert openai_text(openai_events(llm_server, openai_body("flaky"))) == "fine now"
    calls = openai_calls(openai_events(llm_server, openai_body("anything")))
    assert calls[0]["name"] == "shell"
    with pytest.raises(ValueError):
        load_script({"rules": [{"match": {"nonsense": 1}, "reply": {"text": "x"}}]})


def test_command_line_server(tmp_path: Path) -> None:
    path = tmp_path / "script.json"
    path.write_text(
        json.dumps({"rules": [{"match": {"always": True}, "reply": {"text": "from cli"}}]})
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.fakes.llm_server", "--script", str(path), "--api-key", "k1"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline().strip()
        assert line.startswith("listening on http://127.0.0.1:")
        url = line.removeprefix("listening on ")
        response = httpx.post(
            url + "/v1/chat/completions",
            json={"model": "m", "messages": [{"role": "user", "content": "hi"}]},
            headers={"Authorization": "Bearer k1"},
            timeout=5,
        )
        assert response.json()["choices"][0]["message"]["content"] == "from cli"
    finally:
        process.terminate()
        assert process.wait(timeout=10) == 0


def test_the_fake_reports_anthropic_messages_that_do_not_alternate():
    body = {"messages": [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}]}
    assert parse_conversation("anthropic", body)[2] == ["two user messages in a row"]
    assert parse_conversation("openai", body)[2] == []  # OpenAI accepts it
