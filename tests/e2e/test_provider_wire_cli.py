"""What today's endpoints refuse and send, through the real `qshell -p`, against the scripted
server answering with the exact bytes their documentation and issue threads quote: the
output limit's name (gpt-5, the o-series, Azure deployments), Mistral's 422 to
`stream_options`, an error sent as a bare JSON line on a 200 stream, and a stream whose
Content-Type is not `text/event-stream`. Each test's docstring says where its bytes came
from."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.helpers import provider_env, run_qshell
from tests.fakes.llm_server import (
    Fault,
    Match,
    Reply,
    ScriptedLLMServer,
    ToolCallSpec,
    always,
    has_tool_result,
)
from tests.fakes.replay import ReplayServer

STREAMS = Path(__file__).resolve().parents[1] / "llm" / "streams"

# fish2018/YPrompt#26 (gpt-5.1) and griptape-ai/ComfyUI-Griptape#312 (gpt-5): OpenAI's
# answer to `max_tokens` from a reasoning model; opencode#37964 quotes the same message
# from Azure's GPT 5.1 deployments.
MAX_TOKENS_REFUSED = json.dumps(
    {
        "error": {
            "message": "Unsupported parameter: 'max_tokens' is not supported with this model. "
            "Use 'max_completion_tokens' instead.",
            "type": "invalid_request_error",
            "param": "max_tokens",
            "code": "unsupported_parameter",
        }
    },
    indent=2,
).encode()

# dnakov/anon-kode#53: api.mistral.ai's answer to `stream_options`, verbatim.
MISTRAL_422 = (
    b'{"object":"error","message":{"detail":[{"type":"extra_forbidden","loc":["body",'
    b'"stream_options","include_usage"],"msg":"Extra inputs are not permitted","input":true,'
    b'"url":"https://errors.pydantic.dev/2.10/v/extra_forbidden"}]},'
    b'"type":"invalid_request_error","param":null,"code":null}'
)

# A new-api gateway's error envelope (QuantumNous/new-api, as its users' tests quote it:
# `{"error":{"message":…,"type":"new_api_error"}}`), sent as the stream's body on a 200.
BARE_ERROR = (
    b'{"error":{"message":"Upstream service temporarily unavailable (4028)",'
    b'"type":"new_api_error"}}\n'
)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    root.mkdir()
    (root / "notes.txt").write_text("notes\n")
    return root


def sends(key: str) -> Match:
    return Match(lambda r: key in r.body, f"sends {key}")


def qshell(server: ScriptedLLMServer, *args: str, cwd: Path, **env: str):
    return run_qshell("-p", *args, cwd=cwd, env={**provider_env(server, "openai"), **env})


# ------------------------------------------------------------------ 1. max_completion_tokens


@pytest.mark.parametrize("model", ["gpt-5", "o4-mini", "gpt-5.1-codex", "openai/gpt-5-mini"])
def test_openai_reasoning_models_answer_the_first_prompt_with_max_completion_tokens(
    llm_server, project, model
) -> None:
    """A server that refuses `max_tokens` as OpenAI does: gpt-5 and the o-series are sent
    `max_completion_tokens` from the first request on, so the prompt is answered at once."""
    llm_server.add_rule(sends("max_tokens"), Fault.raw(400, MAX_TOKENS_REFUSED))
    llm_server.add_rule(always(), Reply.text("Hello."))
    run = qshell(llm_server, "-m", model, "hi", cwd=project)
    assert (run.code, run.stdout.strip(), run.stderr) == (0, "Hello.", "")
    (sent,) = llm_server.requests
    assert sent.body["max_completion_tokens"] > 0 and "max_tokens" not in sent.body


def test_a_deployment_that_refuses_max_tokens_is_asked_again_with_the_other_name_once(
    llm_server, project
) -> None:
    """An Azure deployment is named by its owner ("prod-reasoner"), so its model family is
    not known: the 400 is answered by one retry with `max_completion_tokens`, remembered
    for the rest of the run (the tool round after it sends the new name at once)."""
    read = ToolCallSpec("read_file", {"path": "notes.txt"}, id="call_1")
    llm_server.add_rule(sends("max_tokens"), Fault.raw(400, MAX_TOKENS_REFUSED))
    llm_server.add_rule(has_tool_result(), Reply.text("It says notes."))
    llm_server.add_rule(always(), Reply.tool_calls([read]))
    run = qshell(llm_server, "-m", "prod-reasoner", "-o", "json", "read notes", cwd=project)
    assert run.code == 0, run.stderr
    assert run.json()["result"] == "It says notes." and run.stderr == ""
    refused, first, second = llm_server.requests
    assert "max_tokens" in refused.body and refused.status == 400
    assert [
        ("max_tokens" in r.body, "max_completion_tokens" in r.body) for r in (first, second)
    ] == [
        (False, True),
        (False, True),
    ]


# ------------------------------------------------------------------ 2. Mistral's stream_options


def test_mistral_s_422_drops_stream_options_and_its_unasked_usage_is_still_read(
    llm_server, project
) -> None:
    """The 422 body is Mistral's (dnakov/anon-kode#53); the stream that answers is one
    recorded from Mistral (mistral/magistral_text_parts.sse, vercel/ai's fixture), whose
    last chunk carries usage that was never asked for."""
    recorded = (STREAMS / "mistral" / "magistral_text_parts.sse").read_bytes()
    llm_server.add_rule(sends("stream_options"), Fault.raw(422, MISTRAL_422))
    llm_server.add_rule(always(), Fault.raw(200, recorded, "text/event-stream"))
    for _ in range(2):  # the second prompt of a run pays no failed round trip
        run = qshell(llm_server, "-o", "json", "what is 2+2?", cwd=project)
        assert run.code == 0, run.stderr
        result = run.json()
        assert result["result"] == "2 + 2 = 4"
        usage = result["usage"]
        assert (usage["prompt_tokens"], usage["completion_tokens"], usage["known"]) == (
            10,
            46,
            True,
        )
    statuses = [(r.status, "stream_options" in r.body) for r in llm_server.requests]
    assert statuses == [(422, True), (200, False), (422, True), (200, False)]  # one per run


# ------------------------------------------------------------------ 5. a bare JSON error line


def test_a_bare_json_error_line_on_a_200_stream_is_the_error_it_says_said_once(
    llm_server, project
) -> None:
    """No `data:` before it, so the event-stream grammar would drop it as an unknown field
    and the stream would seem to end early (and be retried as such)."""
    llm_server.add_rule(always(), Fault.raw(200, BARE_ERROR, "text/event-stream"))
    for fmt in ("text", "json"):
        run = qshell(llm_server, "-o", fmt, "hi", cwd=project, QSHELL_MAX_RETRIES="3")
        assert run.code == 1, run.stderr
        assert run.stderr.count("\n") == 1 and "Traceback" not in run.stderr
        assert "Upstream service temporarily unavailable (4028)" in run.stderr
        assert "ended" not in run.stderr
    assert len(llm_server.requests) == 2  # one each: not retried


def test_a_bare_json_error_line_after_some_answer_shows_the_answer_then_the_error(
    llm_server, project
) -> None:
    """A gateway that gives up part-way: the chunks that came (OpenAI's shape) are the
    partial answer, printed before the one-line error, in text and in json."""
    chunk = {"choices": [{"index": 0, "delta": {"content": "The file holds"}}]}
    body = b"data: " + json.dumps(chunk).encode() + b"\n\n" + BARE_ERROR
    llm_server.add_rule(always(), Fault.raw(200, body, "text/event-stream"))
    text = qshell(llm_server, "what is in notes.txt?", cwd=project)
    assert text.code == 1 and text.stdout == "The file holds\n"
    assert "Upstream service temporarily unavailable" in text.stderr
    assert text.stderr.count("\n") == 1
    result = qshell(llm_server, "-o", "json", "what is in notes.txt?", cwd=project).json()
    assert result["result"] == "The file holds" and result["is_error"] is True
    assert "Upstream service temporarily unavailable" in result["error"]["message"]
    assert result["usage"]["known"] is False  # the failed round's usage is not zero


# ------------------------------------------------------------------ 6. the Content-Type


@pytest.mark.parametrize("content_type", ["text/plain; charset=utf-8", None])
def test_an_event_stream_sent_as_text_plain_or_with_no_content_type_is_read(
    project, content_type
) -> None:
    """openai/gpt4o_text.sse (openai-python's recorded snapshot), served with the header a
    proxy gave it; the official SDKs read the body whatever the header."""
    name = "openai/gpt4o_text.sse"
    expected = next(
        e["expect"]["text"]
        for e in json.loads((STREAMS / "corpus.json").read_text())
        if e["file"] == name
    )
    with ReplayServer((STREAMS / name).read_bytes(), content_type=content_type) as server:
        env = {"OPENAI_BASE_URL": server.url + "/v1", "OPENAI_API_KEY": "sk-test-replay"}
        run = run_qshell("-p", "weather?", cwd=project, env={**env, "OPENAI_MODEL": "m1"})
    assert (run.code, run.stderr) == (0, "")
    assert run.stdout.strip() == expected


@pytest.mark.parametrize(
    ("body", "content_type"),
    [
        (
            b"<!DOCTYPE html>\n<html><head><title>Sign in to the network</title></head>\n",
            "text/html",
        ),
        (
            b'{"model":"llama3.2","created_at":"2025-01-01T00:00:00Z","message":{"role":'
            b'"assistant","content":"Hi"},"done":false}\n{"model":"llama3.2","created_at":'
            b'"2025-01-01T00:00:01Z","message":{"role":"assistant","content":""},"done":true}\n',
            None,
        ),
    ],
)
def test_a_body_that_is_plainly_not_an_event_stream_fails_in_one_line(
    llm_server, project, body, content_type
) -> None:
    """A captive portal's page, and Ollama's native NDJSON (its /api/chat shape) where an
    OpenAI-compatible stream was expected: one line saying so, not retried."""
    llm_server.add_rule(always(), Fault.raw(200, body, content_type))
    run = qshell(llm_server, "hi", cwd=project, QSHELL_MAX_RETRIES="3")
    assert run.code == 1 and run.stdout == ""
    assert run.stderr.count("\n") == 1 and "did not answer with an event stream" in run.stderr
    assert len(llm_server.requests) == 1


# ------------------------------------------------------------------ 3. Gemini's thought signature

# Gemini's OpenAI-compatible endpoint streams each tool call whole in one delta, its thought
# signature in `extra_content.google.thought_signature` (ai.google.dev/gemini-api/docs/
# thought-signatures, "OpenAI compatibility"; the delta shape as captured in the Google AI
# forum thread "OpenAI API compatibility broken due to thought_signature on
# gemini-3-pro-preview" and earendil-works/pi#3234). The signature's value is opaque.
SIGNATURE = "CrICAdHtim827fQ3VqDkYLGbmKPCF0mYbRSq2LTQQZOhqsnkUpXvUAMGBCrVz5uP4wLUa0E7"
GEMINI_TOOL_ROUND = (
    b'data: {"choices":[{"delta":{"role":"assistant","tool_calls":[{"extra_content":'
    b'{"google":{"thought_signature":"' + SIGNATURE.encode() + b'"}},"function":{"arguments":'
    b'"{\\"path\\":\\"notes.txt\\"}","name":"read_file"},"id":"function-call-1","index":0,'
    b'"type":"function"}]},"finish_reason":"tool_calls","index":0}],"created":1763660000,'
    b'"id":"zP8eaZ2aBpOhz7IPsMbmqQs","model":"gemini-3-pro-preview","object":'
    b'"chat.completion.chunk","usage":{"completion_tokens":19,"prompt_tokens":412,'
    b'"total_tokens":431}}\n\ndata: [DONE]\n\n'
)
# What Gemini 3 answers a tool round whose call came back without its signature (the forum
# thread above; BerriAI/litellm#16893 quotes the same body): a list holding one error.
SIGNATURE_MISSING = json.dumps(
    [
        {
            "error": {
                "code": 400,
                "message": "Function call is missing a thought_signature in functionCall "
                "parts. This is required for tools to work correctly, and missing "
                "thought_signature may lead to degraded model performance. Additional "
                "data, function call `default_api:read_file` , position 2. Please refer to "
                "https://ai.google.dev/gemini-api/docs/thought-signatures for more details.",
                "status": "INVALID_ARGUMENT",
            }
        }
    ],
    indent=2,
).encode()


def signed_calls(request) -> list[Any]:
    """The `extra_content` of every assistant tool call a request sends back."""
    return [
        call.get("extra_content")
        for m in request.body["messages"]
        if m["role"] == "assistant"
        for call in m.get("tool_calls") or []
    ]


def test_gemini_s_thought_signature_goes_back_unchanged_in_the_tool_round_and_after_resume(
    llm_server, project
) -> None:
    """A server that answers as Gemini 3 does: the tool round is refused unless each call
    carries its signature; with it, the answer comes. A later prompt of the resumed
    session sends the call back signed as well (the transcript keeps `extra_content`)."""
    signed = {"google": {"thought_signature": SIGNATURE}}
    unsigned = Match(lambda r: any(c != signed for c in signed_calls(r)), "a call unsigned")
    llm_server.add_rule(unsigned, Fault.raw(400, SIGNATURE_MISSING))
    llm_server.add_rule(has_tool_result(), Reply.text("It says notes."))
    llm_server.add_rule(
        Match(lambda r: not signed_calls(r), "no call yet"),
        Fault.raw(200, GEMINI_TOOL_ROUND, "text/event-stream"),
    )
    llm_server.add_rule(always(), Reply.text("Still notes."))
    env = {"OPENAI_MODEL": "gemini-3-pro-preview"}
    run = qshell(llm_server, "-o", "json", "what is in notes.txt?", cwd=project, **env)
    assert run.code == 0, run.stderr
    assert run.json()["result"] == "It says notes."
    again = qshell(llm_server, "--continue", "and now?", cwd=project, **env)
    assert (again.code, again.stdout.strip()) == (0, "Still notes."), again.stderr
    first, tool_round, resumed = llm_server.requests
    assert signed_calls(first) == [] and signed_calls(tool_round) == [signed]
    assert signed_calls(resumed) == [signed] and resumed.status == 200
    call = tool_round.body["messages"][2]["tool_calls"][0]
    assert call == {
        "extra_content": signed,
        "id": "function-call-1",
        "type": "function",
        "function": {"name": "read_file", "arguments": '{"path":"notes.txt"}'},
    }


def test_gemini_s_refusal_of_an_unsigned_call_is_one_clear_line(llm_server, project) -> None:
    """The body Gemini sends (a JSON list holding the error) reads as its message."""
    llm_server.add_rule(always(), Fault.raw(400, SIGNATURE_MISSING))
    run = qshell(llm_server, "hi", cwd=project)
    assert run.code == 1 and run.stderr.count("\n") == 1
    assert "HTTP 400): Function call is missing a thought_signature" in run.stderr


# OpenAI's answer to a field of its own that a message's tool call carries (songquanpeng/
# one-api#1319 quotes it for `index`): it refuses every field its schema does not list.
UNKNOWN_CALL_FIELD = json.dumps(
    {
        "error": {
            "message": "Unknown parameter: 'messages[2].tool_calls[0].extra_content'.",
            "type": "invalid_request_error",
            "param": "messages[2].tool_calls[0].extra_content",
            "code": "unknown_parameter",
        }
    }
).encode()


def test_a_session_continued_on_another_endpoint_sends_it_no_field_of_gemini_s(
    llm_server, llm_server_factory, project
) -> None:
    """A session begun on Gemini and continued on OpenAI (another base URL): the thought
    signature is Gemini's, for Gemini; OpenAI refuses the unknown field with a 400 on
    every later prompt of the session, so it must not be sent there."""
    llm_server.add_rule(has_tool_result(), Reply.text("It says notes."))
    llm_server.add_rule(always(), Fault.raw(200, GEMINI_TOOL_ROUND, "text/event-stream"))
    run = qshell(llm_server, "what is in notes.txt?", cwd=project, OPENAI_MODEL="gemini-3-pro")
    assert (run.code, run.stdout.strip()) == (0, "It says notes."), run.stderr
    strict = llm_server_factory()
    strict.add_rule(
        Match(lambda r: any(signed_calls(r)), "a call with extra_content"),
        Fault.raw(400, UNKNOWN_CALL_FIELD),
    )
    strict.add_rule(always(), Reply.text("Still notes."))
    again = qshell(strict, "--continue", "and now?", cwd=project, OPENAI_MODEL="gpt-4.1")
    assert (again.code, again.stdout.strip()) == (0, "Still notes."), again.stderr
    (sent,) = strict.requests
    assert signed_calls(sent) == [None]  # the call goes back, without Gemini's field
