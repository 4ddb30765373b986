"""The two request knobs on the wire, over real HTTP with the scripted server: reasoning off
and no tool calls as each wire format sends them, and the fallback when an endpoint rejects
one — the rejected request is sent once more without it, and no later request of that model
sends it again (llm/rejections.py)."""

from __future__ import annotations

import pytest

from qshell.cancel import CancelToken
from qshell.errors import BadRequest, ProviderUnavailable
from qshell.llm.base import StreamDone
from qshell.llm.fork import CacheSafeParams
from qshell.llm.http import RetryPolicy
from qshell.llm.messages import ChatRequest, Message, ToolSpec
from qshell.llm.openai import OpenAIProvider
from qshell.llm.sse_provider import SSEProvider
from tests.fakes.llm_server import Fault, Match, Reply, ScriptedLLMServer, always
from tests.fakes.providers import provider_for
from tests.llm.sse import Sleeps

PROTOCOLS = ["openai", "anthropic"]
TOOLS = [ToolSpec(name="read_file", description="Read a file.", parameters={"type": "object"})]


def retrying(server: ScriptedLLMServer, protocol: str, sleeps: Sleeps | None = None) -> SSEProvider:
    return provider_for(
        server, protocol, retry=RetryPolicy(max_attempts=4), sleep=sleeps or Sleeps()
    )


def request(model: str = "m1", **knobs: object) -> ChatRequest:
    return ChatRequest(
        model=model, system="sys", messages=[Message.user("sum up")], tools=TOOLS, **knobs
    )


def run(provider: SSEProvider, chat: ChatRequest) -> StreamDone:
    done = list(provider.stream(chat, CancelToken()))[-1]
    assert isinstance(done, StreamDone)
    return done


def sends(key: str) -> Match:
    return Match(lambda r: key in r.body, f"sends {key}")


# --- what goes on the wire --------------------------------------------------------------


@pytest.mark.parametrize(
    ("protocol", "choice"), [("openai", "none"), ("anthropic", {"type": "none"})]
)
def test_no_tool_calls_sends_tool_choice_none_and_keeps_the_tools(
    llm_server, protocol, choice
) -> None:
    llm_server.add_rule(always(), Reply.text("Done."))
    provider = retrying(llm_server, protocol)
    run(provider, request(no_tool_calls=True))
    run(provider, request())
    lean, plain = llm_server.requests
    assert lean.body["tool_choice"] == choice
    assert "tool_choice" not in plain.body
    assert lean.body["tools"] == plain.body["tools"]  # the cached prefix keeps them


@pytest.mark.parametrize(
    ("model", "fields"),
    [
        ("gpt-5-mini", {"reasoning_effort": "minimal"}),
        ("gpt-5.1", {"reasoning_effort": "none"}),
        ("openai/gpt-5.2-codex", {"reasoning_effort": "none"}),
        ("o4-mini", {"reasoning_effort": "low"}),
        ("gpt-oss-20b", {"reasoning_effort": "low"}),
        ("qwen3-coder-30b", {"chat_template_kwargs": {"enable_thinking": False}}),
        ("gpt-4o", {}),
    ],
)
def test_openai_reasoning_off_is_the_lowest_effort_the_family_takes(
    llm_server, model, fields
) -> None:
    llm_server.add_rule(always(), Reply.text("Done."))
    provider = retrying(llm_server, "openai")
    run(provider, request(model, reasoning_off=True))
    run(provider, request(model))
    off, plain = llm_server.requests
    assert {k: v for k, v in off.body.items() if k not in plain.body} == fields
    assert {k: v for k, v in off.body.items() if k in plain.body} == plain.body


def test_anthropic_reasoning_off_sends_nothing_because_thinking_is_never_on(llm_server) -> None:
    llm_server.add_rule(always(), Reply.text("Done."))
    provider = retrying(llm_server, "anthropic")
    run(provider, request(reasoning_off=True))
    run(provider, request())
    off, plain = llm_server.requests
    assert off.raw == plain.raw and "thinking" not in off.body


# --- the fallback -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("protocol", "key", "knob", "message"),
    [
        (
            "openai",
            "reasoning_effort",
            "reasoning_off",
            "Unrecognized request argument supplied: reasoning_effort",
        ),
        (
            "openai",
            "tool_choice",
            "no_tool_calls",
            "Invalid value for 'tool_choice': none is not supported",
        ),
        ("anthropic", "tool_choice", "no_tool_calls", "tool_choice.type: Input tag 'none' found"),
    ],
)
def test_a_rejected_knob_is_retried_without_once_and_never_sent_again(
    llm_server, protocol, key, knob, message
) -> None:
    llm_server.add_rule(sends(key), Fault.http(400, message))
    llm_server.add_rule(always(), Reply.text("Done."))
    sleeps = Sleeps()
    provider = retrying(llm_server, protocol, sleeps)
    assert run(provider, request("m1", **{knob: True})).message.text == "Done."
    rejected, retried = llm_server.requests
    assert key in rejected.body and key not in retried.body
    assert sleeps.delays == []  # the retry goes at once: nothing to wait for
    run(provider, request("m1", **{knob: True}))
    assert len(llm_server.requests) == 3
    assert key not in llm_server.requests[2].body  # remembered: no failed round trip
    run(provider, request("m2", **{knob: True}))
    assert key in llm_server.requests[3].body  # per model


def test_a_rejection_in_general_words_drops_every_knob_placed(llm_server) -> None:
    llm_server.add_rule(
        sends("reasoning_effort"), Fault.http(422, "Extra inputs are not permitted")
    )
    llm_server.add_rule(always(), Reply.text("Done."))
    provider = retrying(llm_server, "openai")
    run(provider, request(reasoning_off=True, no_tool_calls=True))
    rejected, retried = llm_server.requests
    assert {"reasoning_effort", "tool_choice"} <= set(rejected.body)
    assert not {"reasoning_effort", "tool_choice"} & set(retried.body)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_bad_request_about_something_else_is_not_retried(llm_server, protocol) -> None:
    llm_server.add_rule(always(), Fault.http(400, "messages: the last message must be a user's"))
    provider = retrying(llm_server, protocol)
    with pytest.raises(BadRequest):
        run(provider, request(reasoning_off=True, no_tool_calls=True))
    assert len(llm_server.requests) == 1
    assert provider.rejections.of("m1") == frozenset()


def test_a_background_request_falls_back_once_and_retries_no_more(llm_server) -> None:
    llm_server.add_rule(
        sends("reasoning_effort"), Fault.http(400, "Unsupported parameter: 'reasoning_effort'")
    )
    llm_server.add_rule(always(), Fault.http(503))
    sleeps = Sleeps()
    provider = retrying(llm_server, "openai", sleeps)
    params = CacheSafeParams.capture(request(), Message.assistant("Summed up."))
    fork = params.fork("suggest")
    assert fork.background and fork.reasoning_off
    with pytest.raises(ProviderUnavailable):
        run(provider, fork)
    rejected, retried = llm_server.requests  # the fallback was its one retry
    assert "reasoning_effort" in rejected.body and "reasoning_effort" not in retried.body
    assert sleeps.delays == []


def test_a_rejection_on_the_last_attempt_is_raised_but_remembered(llm_server) -> None:
    llm_server.add_rule(always(), Fault.http(503), times=1)
    llm_server.add_rule(
        sends("reasoning_effort"),
        Fault.http(400, "Unrecognized request argument supplied: reasoning_effort"),
    )
    llm_server.add_rule(always(), Reply.text("run the tests"))
    provider = retrying(llm_server, "openai")
    fork = CacheSafeParams.capture(request(), Message.assistant("Summed up.")).fork("suggest")
    with pytest.raises(BadRequest):
        run(provider, fork)
    assert len(llm_server.requests) == 2  # 503, then the 400: no third request
    assert run(provider, fork).message.text == "run the tests"
    assert len(llm_server.requests) == 3
    assert "reasoning_effort" not in llm_server.requests[2].body


def test_a_main_turn_falls_back_even_when_it_may_not_retry(llm_server) -> None:
    llm_server.add_rule(
        sends("tool_choice"), Fault.http(400, "'tool_choice': 'none' is unsupported")
    )
    llm_server.add_rule(always(), Reply.text("Done."))
    provider = OpenAIProvider(
        llm_server.openai_base_url, llm_server.api_key, retry=RetryPolicy(max_attempts=1)
    )
    assert run(provider, request(no_tool_calls=True)).message.text == "Done."
    assert len(llm_server.requests) == 2


def test_general_words_about_another_named_parameter_drop_no_knob(llm_server) -> None:
    # OpenAI's reasoning models refuse a temperature in these words: the fault is the
    # temperature's, so the knobs stay (no second request, nothing remembered)
    llm_server.add_rule(
        always(),
        Fault.http(400, "Unsupported parameter: 'temperature' is not supported with this model."),
    )
    provider = retrying(llm_server, "openai")
    with pytest.raises(BadRequest):
        run(provider, request(reasoning_off=True, no_tool_calls=True, temperature=0.2))
    assert len(llm_server.requests) == 1
    assert provider.rejections.of("m1") == frozenset()


# --- the wire knobs: the output limit's name, stream_options -------------------------------


def test_an_output_limit_too_large_for_the_model_swaps_no_name(llm_server) -> None:
    # OpenAI's words when max_tokens is over the model's limit name the parameter but do not
    # refuse it: the same request under the other name would fail the same way
    llm_server.add_rule(
        always(),
        Fault.http(
            400,
            "max_tokens is too large: 100000. This model supports at most 16384 completion "
            "tokens, whereas you provided 100000.",
        ),
    )
    provider = retrying(llm_server, "openai")
    with pytest.raises(BadRequest):
        run(provider, request("gpt-4o"))
    assert len(llm_server.requests) == 1
    assert provider.rejections.of("gpt-4o") == frozenset()


def test_a_server_that_refuses_max_completion_tokens_gets_max_tokens(llm_server) -> None:
    # a gateway in front of gpt-5 that only knows the older name (vLLM's words for a field
    # its schema lacks)
    llm_server.add_rule(
        sends("max_completion_tokens"),
        Fault.http(400, "Unrecognized request argument supplied: max_completion_tokens"),
    )
    llm_server.add_rule(always(), Reply.text("Done."))
    provider = retrying(llm_server, "openai")
    assert run(provider, request("gpt-5")).message.text == "Done."
    refused, sent = llm_server.requests
    assert "max_completion_tokens" in refused.body and "max_tokens" not in refused.body
    assert sent.body["max_tokens"] == refused.body["max_completion_tokens"]


def test_a_refused_stream_options_is_dropped_but_general_words_never_drop_it(llm_server) -> None:
    llm_server.add_rule(
        sends("stream_options"),
        Fault.http(422, "stream_options: Extra inputs are not permitted (extra_forbidden)"),
    )
    llm_server.add_rule(always(), Reply.text("Done."))
    provider = retrying(llm_server, "openai")
    run(provider, request(reasoning_off=True))
    refused, sent = llm_server.requests
    assert "stream_options" in refused.body and "stream_options" not in sent.body
    assert "reasoning_effort" in sent.body  # only the knob it named
