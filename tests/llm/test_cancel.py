"""Cancellation and silence timeouts against a real socket: the server must see the disconnect.

A tiny raw HTTP server on 127.0.0.1 answers one request with headers and optional SSE
chunks, then blocks in `recv`; when `recv` returns b'' it sets `client_disconnected`.
Tests wait on events with generous timeouts and never assert on elapsed time.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from qshell.cancel import CancelToken
from qshell.errors import Cancelled, ProviderUnavailable
from qshell.llm.base import StreamEvent, StreamText
from qshell.llm.http import RetryPolicy, Timeouts
from qshell.llm.messages import ChatRequest, Message
from qshell.llm.openai import OpenAIProvider
from tests.llm.sse import Sleeps, chunk

WAIT_S = 5.0
HEADERS = (
    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
)


def http_chunk(text: str) -> bytes:
    data = text.encode()
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


class RawServer:
    """Accepts one connection, reads the request, sends `replies`, then waits for EOF."""

    def __init__(self, *replies: bytes) -> None:
        self.replies = replies
        self.request_received = threading.Event()
        self.client_disconnected = threading.Event()
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def _serve(self) -> None:
        conn, _ = self.listener.accept()
        with conn:
            received = b""
            while b"\r\n\r\n" not in received:
                data = conn.recv(65536)
                if not data:
                    self.client_disconnected.set()
                    return
                received += data
            self.request_received.set()
            for reply in self.replies:
                conn.sendall(reply)
            try:
                while conn.recv(65536):
                    pass
            except OSError:
                pass
            self.client_disconnected.set()

    def close(self) -> None:
        self.listener.close()
        self.thread.join(WAIT_S)


@pytest.fixture
def make_server() -> Iterator[Any]:
    servers: list[RawServer] = []

    def make(*replies: bytes) -> RawServer:
        server = RawServer(*replies)
        servers.append(server)
        return server

    yield make
    for server in servers:
        server.close()


class Consumer:
    """Consumes a provider stream on a worker thread and records what happened."""

    def __init__(self, provider: OpenAIProvider, cancel: CancelToken) -> None:
        self.events: list[StreamEvent] = []
        self.error: BaseException | None = None
        self.first_text = threading.Event()
        request = ChatRequest(model="m", system="", messages=[Message.user("hi")])
        self.thread = threading.Thread(target=self._run, args=(provider, request, cancel))
        self.thread.start()

    def _run(self, provider: OpenAIProvider, request: ChatRequest, cancel: CancelToken) -> None:
        try:
            for event in provider.stream(request, cancel):
                self.events.append(event)
                if isinstance(event, StreamText):
                    self.first_text.set()
        except BaseException as exc:
            self.error = exc

    def join(self) -> None:
        self.thread.join(WAIT_S)
        assert not self.thread.is_alive(), "the stream did not end"


def provider_for(server: RawServer, timeouts: Timeouts | None = None) -> OpenAIProvider:
    return OpenAIProvider(
        server.base_url,
        "sk-test-key-123456",
        timeouts=timeouts,
        retry=RetryPolicy(max_attempts=1),
        sleep=Sleeps(),
    )


def test_cancel_mid_stream_raises_cancelled_and_the_server_sees_the_disconnect(make_server) -> None:
    server = make_server(HEADERS, http_chunk(chunk("hello")))
    cancel = CancelToken()
    provider = provider_for(server)
    consumer = Consumer(provider, cancel)
    assert consumer.first_text.wait(WAIT_S)
    cancel.cancel()
    consumer.join()
    assert isinstance(consumer.error, Cancelled)
    assert consumer.events == [StreamText("hello")]
    assert server.client_disconnected.wait(WAIT_S)
    provider.close()


def test_cancel_while_waiting_for_response_headers_disconnects(make_server) -> None:
    server = make_server()
    cancel = CancelToken()
    provider = provider_for(server)
    consumer = Consumer(provider, cancel)
    assert server.request_received.wait(WAIT_S)
    cancel.cancel()
    consumer.join()
    assert isinstance(consumer.error, Cancelled)
    assert server.client_disconnected.wait(WAIT_S)
    provider.close()


def test_no_first_token_within_the_limit_is_provider_unavailable(make_server) -> None:
    server = make_server(HEADERS)
    provider = provider_for(server, Timeouts(first_token_s=0.2, idle_s=0.2))
    consumer = Consumer(provider, CancelToken())
    consumer.join()
    assert isinstance(consumer.error, ProviderUnavailable)
    assert "no response from the model within 0.2 s" in str(consumer.error)
    assert server.client_disconnected.wait(WAIT_S)
    provider.close()


def test_silence_after_content_is_an_unretryable_timeout(make_server) -> None:
    server = make_server(HEADERS, http_chunk(chunk("partial")))
    provider = provider_for(server, Timeouts(first_token_s=30.0, idle_s=0.2))
    consumer = Consumer(provider, CancelToken())
    consumer.join()
    assert isinstance(consumer.error, ProviderUnavailable)
    assert consumer.error.retryable is False
    assert consumer.events == [StreamText("partial")]
    assert server.client_disconnected.wait(WAIT_S)
    provider.close()
