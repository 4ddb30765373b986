"""Cancellation and silence timeouts against a real socket: the server must see the disconnect.

A tiny raw HTTP server on 127.0.0.1 answers one request with headers and optional SSE
chunks, then blocks in `recv`; when `recv` returns b'' it sets `client_disconnected`.
`KeepAliveServer` does the same on the second request of one kept-alive connection, so
the cancel hits a *reused* pooled connection still waiting for its response headers.
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
from qshell.llm.base import StreamDone, StreamEvent, StreamText
from qshell.llm.http import RetryPolicy, Timeouts
from qshell.llm.messages import ChatRequest, Message
from qshell.llm.openai import OpenAIProvider
from tests.fakes.one_connection import OneConnectionServer
from tests.llm.sse import Sleeps, chunk, event

WAIT_S = 5.0
HEADERS = (
    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
)


def http_chunk(text: str) -> bytes:
    data = text.encode()
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


class Server(OneConnectionServer):
    """A one-connection server the provider reaches at `base_url`."""

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"


class RawServer(Server):
    """Accepts one connection, reads the request, sends `replies`, then waits for EOF."""

    def __init__(self, *replies: bytes) -> None:
        self.replies = replies
        self.request_received = threading.Event()
        super().__init__()

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


class KeepAliveServer(Server):
    """One connection: answers the first request with a complete stream, holds the second."""

    def __init__(self) -> None:
        body = (chunk("hello", finish="stop") + event("[DONE]")).encode()
        self.answer = (
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
            + f"Content-Length: {len(body)}\r\n\r\n".encode()
            + body
        )
        self.held_request = threading.Event()
        super().__init__()

    def _serve(self) -> None:
        conn, _ = self.listener.accept()
        with conn:
            try:
                rest = _read_request(conn, b"")
                conn.sendall(self.answer)
                _read_request(conn, rest)
                self.held_request.set()
                while conn.recv(65536):
                    pass
            except (OSError, EOFError):
                pass
            self.client_disconnected.set()


def _read_request(conn: socket.socket, received: bytes) -> bytes:
    """Read one request (head and Content-Length body); return what followed it."""
    while b"\r\n\r\n" not in received:
        received += _recv(conn)
    head, _, rest = received.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    while len(rest) < length:
        rest += _recv(conn)
    return rest[length:]


def _recv(conn: socket.socket) -> bytes:
    data = conn.recv(65536)
    if not data:
        raise EOFError
    return data


@pytest.fixture
def keep_alive_server() -> Iterator[KeepAliveServer]:
    server = KeepAliveServer()
    yield server
    server.close()


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


def provider_for(server: Server, timeouts: Timeouts | None = None) -> OpenAIProvider:
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


def finish_first_stream(provider: OpenAIProvider) -> None:
    first = Consumer(provider, CancelToken())
    first.join()
    assert first.error is None
    assert isinstance(first.events[-1], StreamDone)


def test_cancel_on_a_reused_connection_waiting_for_headers_disconnects(
    keep_alive_server: KeepAliveServer,
) -> None:
    provider = provider_for(keep_alive_server)
    finish_first_stream(provider)
    cancel = CancelToken()
    second = Consumer(provider, cancel)
    assert keep_alive_server.held_request.wait(WAIT_S)
    cancel.cancel()
    second.join()
    assert isinstance(second.error, Cancelled)
    assert keep_alive_server.client_disconnected.wait(WAIT_S)
    provider.close()


def test_no_first_token_on_a_reused_connection_is_provider_unavailable(
    keep_alive_server: KeepAliveServer,
) -> None:
    provider = provider_for(keep_alive_server, Timeouts(first_token_s=1.0, idle_s=1.0))
    finish_first_stream(provider)
    second = Consumer(provider, CancelToken())
    assert keep_alive_server.held_request.wait(WAIT_S)
    second.join()
    assert isinstance(second.error, ProviderUnavailable)
    assert "no response from the model within 1 s" in str(second.error)
    assert keep_alive_server.client_disconnected.wait(WAIT_S)
    provider.close()
