"""Background requests (forks) over real HTTP: one retry, a pause after any 429, reasoning
off by default, and under `backgroundReasoning: inherit` a body byte-identical to a main
request's."""

from __future__ import annotations

import pytest

from qshell.cancel import CancelToken
from qshell.config import BackgroundReasoning
from qshell.errors import ProviderUnavailable, RateLimited, UsageLimited
from qshell.llm.background import (
    DEFAULT_PAUSE_S,
    MAX_PAUSE_S,
    USAGE_LIMIT_PAUSE_S,
    RateLimitPause,
)
from qshell.llm.base import StreamDone
from qshell.llm.fork import CacheSafeParams
from qshell.llm.http import RetryPolicy
from qshell.llm.messages import ChatRequest, Message
from qshell.llm.sse_provider import SSEProvider
from tests.fakes import providers
from tests.fakes.llm_server import Fault, Reply, ScriptedLLMServer, last_user_text_contains
from tests.llm.sse import Sleeps

PROTOCOLS = ["openai", "anthropic"]


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def provider_for(
    server: ScriptedLLMServer, protocol: str, clock: FakeClock, sleeps: Sleeps
) -> SSEProvider:
    return providers.provider_for(
        server,
        protocol,
        retry=RetryPolicy(max_attempts=4),
        sleep=sleeps,
        pause=RateLimitPause(clock=clock),
    )


def main_request(text: str = "fix the bug") -> ChatRequest:
    return ChatRequest(model="m1", system="sys", messages=[Message.user(text)])


def background_request(text: str = "suggest") -> ChatRequest:
    params = CacheSafeParams.capture(main_request(), Message.assistant("Fixed."))
    return params.fork(text)


def run(provider: SSEProvider, request: ChatRequest) -> StreamDone:
    events = list(provider.stream(request, CancelToken()))
    done = events[-1]
    assert isinstance(done, StreamDone)
    return done


# --- the pause itself ---------------------------------------------------------------


def test_the_pause_lasts_retry_after_else_the_default_and_keeps_the_longer() -> None:
    clock = FakeClock()
    pause = RateLimitPause(clock=clock)
    assert not pause.paused
    pause.note(None)
    assert pause.remaining_s() == DEFAULT_PAUSE_S
    pause.note(1.0)  # shorter than what is left: kept
    assert pause.remaining_s() == DEFAULT_PAUSE_S
    clock.now += DEFAULT_PAUSE_S
    assert not pause.paused
    pause.note(7.0)
    clock.now += 6.0
    assert pause.remaining_s() == pytest.approx(1.0)
    pause.note(MAX_PAUSE_S * 10)
    assert pause.remaining_s() == MAX_PAUSE_S


# --- over real HTTP -------------------------------------------------------------------


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_background_request_retries_at_most_once(llm_server, protocol) -> None:
    llm_server.add_rule(last_user_text_contains("suggest"), Fault.http(503))
    sleeps = Sleeps()
    provider = provider_for(llm_server, protocol, FakeClock(), sleeps)
    with pytest.raises(ProviderUnavailable):
        run(provider, background_request())
    assert len(llm_server.requests) == 2
    assert len(sleeps.delays) == 1


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_main_turn_keeps_its_own_retries(llm_server, protocol) -> None:
    llm_server.add_rule(last_user_text_contains("fix"), Fault.http(503))
    provider = provider_for(llm_server, protocol, FakeClock(), Sleeps())
    with pytest.raises(ProviderUnavailable):
        run(provider, main_request())
    assert len(llm_server.requests) == 4


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_main_turns_429_pauses_background_work_for_its_retry_after(llm_server, protocol) -> None:
    llm_server.add_rule(last_user_text_contains("fix"), Fault.rate_limited(retry_after_s=5))
    llm_server.add_rule(last_user_text_contains("suggest"), Reply.text("run the tests"))
    clock = FakeClock()
    provider = provider_for(llm_server, protocol, clock, Sleeps())
    with pytest.raises(RateLimited):
        run(provider, main_request())
    main_attempts = len(llm_server.requests)
    assert main_attempts == 4  # the main turn retried as its policy says

    with pytest.raises(RateLimited) as refused:
        run(provider, background_request())
    assert refused.value.retry_after_s == pytest.approx(5)
    assert len(llm_server.requests) == main_attempts  # nothing was sent

    clock.now += 5
    assert run(provider, background_request()).message.text == "run the tests"
    assert len(llm_server.requests) == main_attempts + 1


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_background_429_is_not_retried_and_pauses_by_default(llm_server, protocol) -> None:
    llm_server.add_rule(
        last_user_text_contains("suggest"), Fault.rate_limited(retry_after_s=None), times=1
    )
    llm_server.add_rule(last_user_text_contains("suggest"), Reply.text("run the tests"))
    clock = FakeClock()
    provider = provider_for(llm_server, protocol, clock, Sleeps())
    with pytest.raises(RateLimited):
        run(provider, background_request())
    assert len(llm_server.requests) == 1

    clock.now += DEFAULT_PAUSE_S - 1
    with pytest.raises(RateLimited):
        run(provider, background_request())
    assert len(llm_server.requests) == 1

    clock.now += 1
    assert run(provider, background_request()).message.text == "run the tests"
    # a main turn never waits for the pause: it has its own retry policy
    llm_server.add_rule(last_user_text_contains("fix"), Reply.text("done"))
    clock.now -= DEFAULT_PAUSE_S
    assert run(provider, main_request()).message.text == "done"


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_an_inheriting_background_body_is_byte_identical_to_the_main_one(
    llm_server, protocol
) -> None:
    llm_server.add_rule(last_user_text_contains("fix"), Reply.text("ok"))
    provider = provider_for(llm_server, protocol, FakeClock(), Sleeps())
    params = CacheSafeParams.capture(
        main_request(),
        Message.assistant("Fixed."),
        background_reasoning=BackgroundReasoning.INHERIT,
    )
    run(provider, params.continued(params.request.messages))
    run(provider, main_request())
    fork, main = llm_server.requests
    assert fork.raw == main.raw  # byte-identical: no background or reasoning key
    assert not {"background", "reasoning_effort", "thinking", "reasoning"} & set(fork.body)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_by_default_a_background_body_asks_for_reasoning_off(llm_server, protocol) -> None:
    llm_server.add_rule(last_user_text_contains("fix"), Reply.text("ok"))
    provider = provider_for(llm_server, protocol, FakeClock(), Sleeps())
    params = CacheSafeParams.capture(main_request(), Message.assistant("Fixed."))
    run(provider, params.continued(params.request.messages))
    run(provider, main_request())
    fork, main = llm_server.requests
    extra = {k: v for k, v in fork.body.items() if k not in main.body}
    # Anthropic: qshell never turns thinking on, so off is the body without `thinking`
    assert extra == ({"reasoning_effort": "low"} if protocol == "openai" else {})
    assert {k: v for k, v in fork.body.items() if k in main.body} == main.body
    assert "background" not in fork.body and "thinking" not in fork.body


# --- a usage limit (out of credit or quota) ------------------------------------------

USAGE_LIMITS = [("openai", None), ("openai", 403), ("anthropic", None), ("anthropic", 402)]


@pytest.mark.parametrize(("protocol", "status"), USAGE_LIMITS)
def test_a_background_usage_limit_pauses_background_work_longer_than_a_429(
    llm_server, protocol, status
) -> None:
    llm_server.add_rule(last_user_text_contains("suggest"), Fault.usage_limit(status), times=1)
    llm_server.add_rule(last_user_text_contains("suggest"), Reply.text("run the tests"))
    llm_server.add_rule(last_user_text_contains("fix"), Reply.text("done"))
    clock = FakeClock()
    provider = provider_for(llm_server, protocol, clock, Sleeps())
    with pytest.raises(UsageLimited):
        run(provider, background_request())
    assert len(llm_server.requests) == 1  # not retried

    clock.now += MAX_PAUSE_S  # longer than any 429's pause
    with pytest.raises(RateLimited):
        run(provider, background_request())
    assert len(llm_server.requests) == 1  # refused here, nothing sent
    assert run(provider, main_request()).message.text == "done"  # a main turn goes on

    clock.now += USAGE_LIMIT_PAUSE_S - MAX_PAUSE_S
    assert run(provider, background_request()).message.text == "run the tests"


@pytest.mark.parametrize(("protocol", "status"), USAGE_LIMITS)
def test_a_main_turns_usage_limit_is_not_retried_and_pauses_background_work(
    llm_server, protocol, status
) -> None:
    llm_server.add_rule(last_user_text_contains("fix"), Fault.usage_limit(status))
    llm_server.add_rule(last_user_text_contains("suggest"), Reply.text("run the tests"))
    clock = FakeClock()
    provider = provider_for(llm_server, protocol, clock, Sleeps())
    with pytest.raises(UsageLimited) as caught:
        run(provider, main_request())
    assert len(llm_server.requests) == 1  # waiting adds no credit: no retry
    assert "usage limit or credit is used up" in str(caught.value)
    clock.now += DEFAULT_PAUSE_S
    with pytest.raises(RateLimited):
        run(provider, background_request())
    assert len(llm_server.requests) == 1
