"""Over real HTTP: cancelling a suggestion closes its request, and server errors fail open."""

from __future__ import annotations

import threading

import pytest

from qshell.cancel import CancelToken
from qshell.errors import RateLimited
from qshell.followup.suggestion import SUGGESTION_MARKER, SuggestionResult, generate_suggestion
from qshell.llm.fork import CacheSafeParams
from qshell.llm.http import RetryPolicy
from qshell.llm.messages import ChatRequest, Message
from qshell.llm.sse_provider import SSEProvider
from tests.fakes.llm_server import Fault, Reply, last_user_text_contains
from tests.fakes.providers import provider_for


def failing_fast(server, protocol: str) -> SSEProvider:
    return provider_for(server, protocol, retry=RetryPolicy(max_attempts=1))


def params() -> CacheSafeParams:
    request = ChatRequest(model="m1", system="sys", messages=[Message.user("fix the bug")])
    return CacheSafeParams.capture(request, Message.assistant("Fixed. Want me to run the tests?"))


@pytest.mark.parametrize("protocol", ["openai", "anthropic"])
@pytest.mark.parametrize("after_first_chunk", [False, True])
def test_cancelling_a_suggestion_closes_its_http_request(llm_server, protocol, after_first_chunk):
    rule = llm_server.add_rule(
        last_user_text_contains(SUGGESTION_MARKER), Reply.text("run the tests")
    )
    hold = llm_server.hold(rule, after_first_chunk=after_first_chunk)
    cancel = CancelToken()
    results: list[SuggestionResult] = []
    provider = failing_fast(llm_server, protocol)
    worker = threading.Thread(
        target=lambda: results.append(generate_suggestion(provider, params(), cancel))
    )
    worker.start()
    request = hold.wait_arrived(timeout=10)
    cancel.cancel()
    worker.join(30)
    assert not worker.is_alive()
    assert request.disconnected.wait(10)
    assert (results[0].text, results[0].reason) == (None, "aborted")
    hold.release()


@pytest.mark.parametrize("protocol", ["openai", "anthropic"])
def test_a_server_error_gives_reason_error_without_raising(llm_server, protocol):
    llm_server.add_rule(last_user_text_contains(SUGGESTION_MARKER), Fault.http(503))
    result = generate_suggestion(failing_fast(llm_server, protocol), params(), CancelToken())
    assert result == SuggestionResult(None, "error", None)


@pytest.mark.parametrize("protocol", ["openai", "anthropic"])
def test_a_suggestion_after_a_main_turns_429_fails_open_without_a_request(llm_server, protocol):
    llm_server.add_rule(last_user_text_contains("fix"), Fault.rate_limited(retry_after_s=9))
    llm_server.add_rule(last_user_text_contains(SUGGESTION_MARKER), Reply.text("run tests"))
    provider = failing_fast(llm_server, protocol)
    with pytest.raises(RateLimited):
        list(provider.stream(params().request, CancelToken()))
    sent = len(llm_server.requests)
    result = generate_suggestion(provider, params(), CancelToken())
    assert result == SuggestionResult(None, "error", None)
    assert len(llm_server.requests) == sent
