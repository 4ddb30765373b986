"""The cancellable transport and the guarded abort handle, below the provider layer.

Socket tests use a raw server on 127.0.0.1 that records whether the client ever sent
bytes and sets `client_disconnected` when `recv` returns b''. They wait on events with
generous timeouts and never assert on elapsed time.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator

import httpx
import pytest

from qshell.llm.sockets import GUARD_EXTENSION, CancellableTransport, environment_proxies
from qshell.llm.watchdog import AbortHandle
from tests.fakes.network_stream import FakeNetworkStream
from tests.fakes.one_connection import OneConnectionServer

WAIT_S = 5.0
HEADERS = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n\r\n"
PROXY_VARIABLES = ("http_proxy", "https_proxy", "all_proxy", "no_proxy")


class HoldingServer(OneConnectionServer):
    """Accepts one connection; sends `reply` once the request head arrived; waits for EOF."""

    def __init__(self, reply: bytes | None) -> None:
        self.reply = reply
        self.received = b""
        self.reply_sent = threading.Event()
        super().__init__()
        self.url = f"http://127.0.0.1:{self.port}/"

    def _serve(self) -> None:
        conn, _ = self.listener.accept()
        with conn:
            try:
                while data := conn.recv(65536):
                    self.received += data
                    if self.reply is not None and b"\r\n\r\n" in self.received:
                        conn.sendall(self.reply)
                        self.reply_sent.set()
                        self.reply = None
            except OSError:
                pass
            self.client_disconnected.set()


@pytest.fixture
def client() -> Iterator[httpx.Client]:
    with httpx.Client(transport=CancellableTransport(), timeout=60.0) as client:
        yield client


def test_a_guarded_handle_cuts_the_socket_in_use_and_refuses_later_calls() -> None:
    handle = AbortHandle(guarded=True)
    in_use, later = FakeNetworkStream(), FakeNetworkStream()
    assert handle.enter_io(in_use)
    handle.abort()
    assert in_use.sock.shutdowns == [socket.SHUT_RDWR]
    handle.exit_io(in_use)
    assert handle.enter_io(later) is False
    assert later.sock.shutdowns == [socket.SHUT_RDWR]


def test_a_guarded_abort_between_calls_leaves_the_connections_alone() -> None:
    handle = AbortHandle(guarded=True)
    finished, traced = FakeNetworkStream(), FakeNetworkStream()
    assert handle.enter_io(finished)
    handle.exit_io(finished)
    handle.trace("connection.connect_tcp.complete", {"return_value": traced})
    handle.abort()
    assert finished.sock.shutdowns == []
    assert traced.sock.shutdowns == []


def test_an_abort_after_release_is_ignored_by_a_guarded_handle() -> None:
    handle = AbortHandle(guarded=True)
    stream = FakeNetworkStream()
    handle.release()
    handle.abort()
    assert handle.enter_io(stream)
    assert stream.sock.shutdowns == []


def test_an_exchange_aborted_before_it_writes_never_sends_the_request(client) -> None:
    server = HoldingServer(reply=None)
    handle = AbortHandle(guarded=True)
    handle.abort()
    try:
        with pytest.raises(httpx.NetworkError):  # httpcore tries to read after a failed write
            client.post(server.url, content=b"{}", extensions={GUARD_EXTENSION: handle})
        assert server.client_disconnected.wait(WAIT_S)
        assert server.received == b""
    finally:
        server.close()


def test_a_body_read_on_another_thread_is_cut_by_the_abort(client) -> None:
    server = HoldingServer(reply=HEADERS + b"2\r\nhi\r\n")
    handle = AbortHandle(guarded=True)
    request = client.build_request("GET", server.url, extensions={GUARD_EXTENSION: handle})
    response = client.send(request, stream=True)
    chunks: list[bytes] = []
    errors: list[Exception] = []

    def read_body() -> None:
        try:
            chunks.extend(response.iter_raw())
        except httpx.HTTPError as exc:
            errors.append(exc)

    reader = threading.Thread(target=read_body)
    try:
        reader.start()
        assert server.reply_sent.wait(WAIT_S)
        handle.abort()
        reader.join(WAIT_S)
        assert not reader.is_alive(), "the body read did not end"
        assert [type(error) for error in errors] in ([httpx.ReadError], [httpx.RemoteProtocolError])
        assert server.client_disconnected.wait(WAIT_S)
    finally:
        handle.release()
        server.close()


def test_environment_proxies_are_detected(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)
    assert environment_proxies() is False
    monkeypatch.setenv("https_proxy", "http://proxy.test:3128")
    assert environment_proxies() is True
