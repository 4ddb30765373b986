"""The shared transport policy: redaction, status mapping, Retry-After, backoff, watchdog."""

from __future__ import annotations

import random
import socket
import subprocess
import sys
import threading
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar

import httpx
import pytest

from qshell.cancel import CancelToken
from qshell.errors import (
    AuthError,
    BadRequest,
    ContextTooLong,
    ModelNotFound,
    ProviderError,
    ProviderUnavailable,
    RateLimited,
    UsageLimited,
)
from qshell.llm.base import StreamDone
from qshell.llm.errors_map import (
    Endpoint,
    error_for_status,
    error_from_payload,
    parse_retry_after,
    redact,
)
from qshell.llm.http import RetryPolicy, Timeouts
from qshell.llm.messages import ChatRequest, Message
from qshell.llm.openai import OpenAIProvider
from qshell.llm.watchdog import AbortHandle, Watchdog
from tests.fakes.network_stream import FakeNetworkStream
from tests.fakes.replay import ReplayServer
from tests.llm.sse import Sleeps, chunk, event

KEY = "sk-proj-0123456789abcdefghijklmnop"
ENDPOINT = Endpoint("openai", "http://llm.test/v1", "OPENAI_API_KEY", "OPENAI_MODEL", (KEY,))


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_redact_removes_the_exact_key_and_key_shaped_tokens() -> None:
    text = (
        f"key={KEY} other sk-ab****yz anthropic sk-ant-api03-XYZxyz_123 "
        "Authorization: Bearer abc.def-ghi API key provided: ab12****wxyz plain words stay"
    )
    clean = redact(text, (KEY,))
    for leaked in (KEY, "sk-ab****yz", "sk-ant-api03", "abc.def-ghi", "ab12****wxyz"):
        assert leaked not in clean
    assert "plain words stay" in clean


def test_redact_leaves_ordinary_sentences_alone() -> None:
    text = "The model key_count is fine; the key was rejected by the server."
    assert redact(text) == text


def test_retry_after_accepts_seconds_and_http_dates() -> None:
    now = datetime(2025, 1, 1, 12, 0, 0, tzinfo=UTC)
    later = (now + timedelta(seconds=30)).strftime("%a, %d %b %Y %H:%M:%S GMT")
    assert parse_retry_after("7") == 7.0
    assert parse_retry_after("1.5") == 1.5
    assert parse_retry_after(later, now=now) == 30.0
    assert parse_retry_after("soon") is None
    assert parse_retry_after(None) is None


def test_backoff_grows_with_jitter_and_is_reproducible_with_a_seed() -> None:
    policy = RetryPolicy(base_delay_s=0.5, max_delay_s=8.0)
    first = [policy.delay_s(n, None, random.Random(3)) for n in range(1, 8)]
    again = [policy.delay_s(n, None, random.Random(3)) for n in range(1, 8)]
    assert first == again
    for attempt, delay in enumerate(first, start=1):
        ceiling = min(8.0, 0.5 * 2 ** (attempt - 1))
        assert ceiling / 2 <= delay <= ceiling


def test_retry_after_wins_over_backoff_and_is_capped() -> None:
    policy = RetryPolicy()
    assert policy.delay_s(1, 12.0, random.Random(0)) == 12.0
    assert policy.delay_s(1, 3600.0, random.Random(0)) == 60.0


def test_the_httpx_read_timeout_is_only_a_generous_backstop() -> None:
    timeout = Timeouts(connect_s=3.0, first_token_s=20.0, idle_s=5.0).for_httpx()
    assert timeout.connect == 3.0
    assert timeout.read is not None and timeout.read > 20.0


@pytest.mark.parametrize(
    ("status", "body", "error_type", "retryable"),
    [
        (401, '{"error": {"message": "bad"}}', AuthError, False),
        (403, "forbidden", AuthError, False),
        (404, '{"error": {"message": "no"}}', ModelNotFound, False),
        (
            400,
            '{"error": {"code": "context_length_exceeded", "message": "x"}}',
            ContextTooLong,
            False,
        ),
        (400, '{"error": {"message": "input has too many tokens"}}', ContextTooLong, False),
        (413, '{"error": {"message": "exceeds the context window"}}', ContextTooLong, False),
        (413, '{"error": {"message": "body too big"}}', BadRequest, False),
        (429, '{"error": {"message": "slow"}}', RateLimited, True),
        (500, "<html>oops</html>", ProviderUnavailable, True),
        (503, "", ProviderUnavailable, True),
        (529, '{"error": {"type": "overloaded_error"}}', ProviderUnavailable, True),
        (418, '{"message": "teapot"}', BadRequest, False),
    ],
)
def test_each_status_maps_to_one_error_type(
    status: int, body: str, error_type: type[ProviderError], retryable: bool
) -> None:
    error = error_for_status(status, body, ENDPOINT, "m1", retry_after_s=2.0)
    assert type(error) is error_type
    assert error.retryable is retryable
    assert error.status == status


def test_auth_errors_never_include_the_body() -> None:
    error = error_for_status(401, '{"error": {"message": "secret detail"}}', ENDPOINT, "m1")
    assert "secret detail" not in str(error)
    assert "OPENAI_API_KEY" in str(error)


def test_a_missing_key_is_reported_as_missing_rather_than_rejected() -> None:
    keyless = Endpoint("openai", "http://llm.test/v1", "OPENAI_API_KEY", "OPENAI_MODEL")
    error = error_for_status(401, "", keyless, "m1")
    assert "Set OPENAI_API_KEY" in str(error)


@pytest.mark.parametrize(
    ("status", "body"),
    [
        (429, '{"error": {"code": "insufficient_quota", "message": "You exceeded your quota"}}'),
        (403, '{"error": {"type": "insufficient_quota", "message": "quota"}}'),
        (
            400,
            '{"type": "error", "error": {"type": "invalid_request_error", "message": '
            '"Your credit balance is too low to access the Anthropic API."}}',
        ),
        (402, '{"type": "error", "error": {"type": "billing_error", "message": "billing"}}'),
        (
            400,
            '{"error": {"code": "Arrearage", "type": "Arrearage", "message": "Access denied, '
            'please make sure your account is in good standing."}}',
        ),
    ],
    ids=["openai-429", "openai-403", "anthropic-credit", "anthropic-billing", "dashscope"],
)
def test_an_exhausted_quota_or_credit_is_a_usage_limit_not_retryable(
    status: int, body: str
) -> None:
    error = error_for_status(status, body, ENDPOINT, "m1")
    assert type(error) is UsageLimited
    assert isinstance(error, RateLimited)  # so it pauses background work like a 429
    assert error.retryable is False
    assert f"usage limit or credit is used up (HTTP {status})" in str(error)


def test_a_usage_limit_in_a_stream_is_a_usage_limit() -> None:
    payload = {"error": {"type": "billing_error", "message": "billing"}}
    assert type(error_from_payload(payload, ENDPOINT, "m", in_stream=True)) is UsageLimited


def test_a_429_carries_its_retry_after() -> None:
    error = error_for_status(429, "", ENDPOINT, "m1", retry_after_s=4.0)
    assert error.retry_after_s == 4.0


def test_in_stream_error_objects_map_by_type_or_code() -> None:
    assert isinstance(
        error_from_payload({"error": {"type": "overloaded_error"}}, ENDPOINT, "m"),
        ProviderUnavailable,
    )
    assert isinstance(
        error_from_payload({"error": {"code": 400, "message": "bad"}}, ENDPOINT, "m"), BadRequest
    )
    assert isinstance(
        error_from_payload({"error": "something odd"}, ENDPOINT, "m"), ProviderUnavailable
    )


def test_server_messages_are_scrubbed_and_clipped() -> None:
    body = '{"error": {"message": "' + "x" * 1000 + f' {KEY}"}}}}'
    error = error_for_status(500, body, ENDPOINT, "m1")
    assert KEY not in str(error)
    assert len(str(error)) < 600


def test_a_refused_connection_is_provider_unavailable_after_retries() -> None:
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    sleeps = Sleeps()
    provider = OpenAIProvider(
        f"http://127.0.0.1:{port}/v1", KEY, retry=RetryPolicy(max_attempts=3), sleep=sleeps
    )
    request = ChatRequest(model="m", system="", messages=[Message.user("hi")])
    with pytest.raises(ProviderUnavailable) as caught:
        list(provider.stream(request, CancelToken()))
    assert f"cannot reach http://127.0.0.1:{port}/v1: connection refused" in str(caught.value)
    assert "is the server running?" in str(caught.value)
    assert len(sleeps.delays) == 2
    provider.close()


def test_the_watchdog_fires_once_after_the_first_token_window() -> None:
    clock = FakeClock()
    fired: list[bool] = []
    dog = Watchdog(10.0, 2.0, lambda: fired.append(True), clock=clock)
    clock.now += 9.0
    assert dog.check() is False
    clock.now += 2.0
    assert dog.check() is True
    assert dog.check() is True
    assert fired == [True]
    assert dog.window_s == 10.0


def test_the_watchdog_rearms_on_data_and_switches_to_the_idle_window() -> None:
    clock = FakeClock()
    fired: list[bool] = []
    dog = Watchdog(10.0, 2.0, lambda: fired.append(True), clock=clock)
    clock.now += 8.0
    dog.feed()
    clock.now += 8.0
    assert dog.check() is False
    dog.content_started()
    clock.now += 1.5
    dog.feed()
    clock.now += 1.5
    assert dog.check() is False
    clock.now += 1.0
    assert dog.check() is True
    assert dog.window_s == 2.0
    assert fired == [True]


def test_the_watchdog_ignores_time_the_consumer_holds_the_stream_and_stops_cleanly() -> None:
    clock = FakeClock()
    fired: list[bool] = []
    dog = Watchdog(1.0, 1.0, lambda: fired.append(True), clock=clock)
    dog.suspend()
    clock.now += 100.0
    assert dog.check() is False
    dog.feed()
    dog.stop()
    clock.now += 100.0
    assert dog.check() is False
    assert fired == []


def test_an_abort_before_the_response_arrives_closes_it_on_arrival() -> None:
    handle = AbortHandle()
    handle.abort()
    response = httpx.Response(200, content=b"")
    handle.attach(response)
    assert response.is_closed


def test_an_abort_shuts_down_a_socket_connected_before_the_headers_arrived() -> None:
    handle = AbortHandle()
    stream = FakeNetworkStream()
    handle.trace("connection.connect_tcp.complete", {"return_value": stream})
    handle.abort()
    assert stream.sock.shutdowns == [socket.SHUT_RDWR]


def test_an_abort_after_release_leaves_the_pooled_socket_alone() -> None:
    handle = AbortHandle()
    stream = FakeNetworkStream()
    handle.trace("connection.connect_tcp.complete", {"return_value": stream})
    handle.release()
    handle.abort()
    assert stream.sock.shutdowns == []


def test_the_providers_do_not_need_the_fake_server_package() -> None:
    code = (
        "import sys, qshell.llm.openai, qshell.llm.anthropic, tests.llm.sse;"
        "assert not [m for m in sys.modules if m.startswith('tests.fakes')]"
    )
    root = Path(__file__).resolve().parents[2]
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=30, cwd=root
    )
    assert result.returncode == 0, result.stderr


class _KeepAliveHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    connections: ClassVar[list[object]] = []

    def setup(self) -> None:
        super().setup()
        self.connections.append(self.connection)

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["content-length"]))
        body = (chunk("ok", finish="stop") + event("[DONE]")).encode()
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        self.wfile.write(f"{len(body):x}\r\n".encode() + body + b"\r\n0\r\n\r\n")

    def log_message(self, format: str, *args: object) -> None:
        return


def test_consecutive_streams_reuse_one_pooled_connection() -> None:
    _KeepAliveHandler.connections = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _KeepAliveHandler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    provider = OpenAIProvider(f"http://127.0.0.1:{server.server_address[1]}/v1", None)
    request = ChatRequest(model="m", system="", messages=[Message.user("hi")])
    try:
        for _ in range(3):
            events = list(provider.stream(request, CancelToken()))
            assert isinstance(events[-1], StreamDone)
    finally:
        provider.close()
        server.shutdown()
        server.server_close()
    assert len(_KeepAliveHandler.connections) == 1


def _stream_from(bodies: list[bytes]) -> tuple[list[object], int]:
    """One streamed request against a replay server serving `bodies`; its events (or the
    error it raised, last) and how many attempts it took."""
    request = ChatRequest(model="m", system="", messages=[Message.user("hi")])
    with ReplayServer(bodies) as server:
        provider = OpenAIProvider(
            server.url + "/v1", KEY, retry=RetryPolicy(max_attempts=3), sleep=Sleeps()
        )
        out: list[object] = []
        try:
            out.extend(provider.stream(request, CancelToken()))
        except ProviderError as error:
            out.append(error)
        finally:
            provider.close()
        return out, len(server.requests)


WHOLE = (chunk("Hello") + chunk(finish="stop") + event("[DONE]")).encode()


def test_a_stream_closed_mid_line_before_any_content_is_tried_again() -> None:
    cut = (chunk("") + 'data: {"choices":[{"index":0,"delta":{"cont').encode()
    events, attempts = _stream_from([cut, WHOLE])
    assert attempts == 2
    assert isinstance(events[-1], StreamDone) and events[-1].message.text == "Hello"


def test_a_stream_closed_mid_line_after_content_says_it_was_cut_not_malformed() -> None:
    cut = (chunk("Hel") + 'data: {"choices":[{"index":0,"delta":{"content":"lo"').encode()
    events, attempts = _stream_from([cut, WHOLE])
    error = events[-1]
    assert attempts == 1 and isinstance(error, ProviderError)
    assert "ended before the answer was complete" in str(error)
    assert "not JSON" not in str(error)


@pytest.mark.parametrize("ending", ["", "\n", "\r\n"])
def test_a_last_whole_event_without_its_blank_line_is_still_delivered(ending: str) -> None:
    body = chunk("Hello") + chunk(finish="stop").rstrip("\n") + ending
    events, attempts = _stream_from([body.encode()])
    assert attempts == 1
    assert isinstance(events[-1], StreamDone) and events[-1].message.text == "Hello"


def test_a_transient_server_error_streamed_before_any_content_is_tried_again() -> None:
    said = "The server had an error while processing your request. Sorry about that!"
    error = event({"error": {"message": said, "type": "server_error"}}).encode()
    events, attempts = _stream_from([error, WHOLE])
    assert attempts == 2
    assert isinstance(events[-1], StreamDone) and events[-1].message.text == "Hello"


def test_a_streamed_error_that_says_the_context_is_full_is_not_tried_again() -> None:
    full = {"code": 500, "message": "Context size has been exceeded.", "type": "server_error"}
    events, attempts = _stream_from([event({"error": full}).encode(), WHOLE])
    assert attempts == 1 and isinstance(events[-1], ProviderError)
    assert "Context size has been exceeded." in str(events[-1])
