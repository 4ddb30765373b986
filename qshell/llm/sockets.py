"""An httpx transport whose sockets a cancel can reach, on new and reused connections alike.

httpcore hands out a pooled keep-alive connection without saying which socket it uses, so
a cancel from another thread could not wake a request blocked on one. `CancellableTransport`
adapts httpx requests to an `httpcore.ConnectionPool` (as `httpx.HTTPTransport` does, with
the same limits and TLS defaults) whose network backend wraps `httpcore.SyncBackend`.
A request names its `IoGuard` in the `GUARD_EXTENSION` request extension; the transport
binds that guard to the calling thread while it sends the request and waits for headers,
and again for each body read, in whichever thread performs it. Every blocking call on a
network stream (read, write, TLS handshake) reports the stream to the guard bound to its
thread for exactly the duration of the call, so an abort from another thread shuts down the
very socket the request is blocked on, and a guard that was aborted between calls refuses
the next one at once. Pooling is unchanged. `environment_proxies` tells whether httpx would
route through a proxy from the environment; this transport does not, so callers then keep
httpx's stock transport. No policy (retries, timeouts, errors) lives here.
"""

from __future__ import annotations

import contextlib
import threading
import urllib.request
from collections.abc import Iterable, Iterator
from typing import Any, Protocol

import httpcore
import httpx

GUARD_EXTENSION = "qshell.io_guard"
"""The request extension that carries the request's `IoGuard`."""

MAX_CONNECTIONS = 100
MAX_KEEPALIVE_CONNECTIONS = 20
KEEPALIVE_EXPIRY_S = 5.0
"""httpx's own pool defaults."""


class IoGuard(Protocol):
    """Told about each blocking network call made on behalf of one request."""

    def enter_io(self, stream: httpcore.NetworkStream) -> bool:
        """A call on `stream` is about to block; False refuses it (the request was aborted)."""

    def exit_io(self, stream: httpcore.NetworkStream) -> None:
        """The call on `stream` returned."""


_bound = threading.local()
"""Per thread: the `IoGuard` of the request whose network calls this thread now makes."""


@contextlib.contextmanager
def _guarding(guard: IoGuard | None) -> Iterator[None]:
    previous = getattr(_bound, "guard", None)
    _bound.guard = guard
    try:
        yield
    finally:
        _bound.guard = previous


@contextlib.contextmanager
def _blocking_call(stream: httpcore.NetworkStream, refused: type[Exception]) -> Iterator[None]:
    guard: IoGuard | None = getattr(_bound, "guard", None)
    if guard is None:
        yield
        return
    if not guard.enter_io(stream):
        raise refused("the request was aborted")
    try:
        yield
    finally:
        guard.exit_io(stream)


class _GuardedStream(httpcore.NetworkStream):
    """A network stream that reports each blocking call to the guard bound to its thread."""

    def __init__(self, inner: httpcore.NetworkStream) -> None:
        self._inner = inner

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        with _blocking_call(self._inner, httpcore.ReadError):
            return self._inner.read(max_bytes, timeout)

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        with _blocking_call(self._inner, httpcore.WriteError):
            self._inner.write(buffer, timeout)

    def close(self) -> None:
        self._inner.close()

    def start_tls(
        self,
        ssl_context: Any,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> httpcore.NetworkStream:
        with _blocking_call(self._inner, httpcore.ConnectError):
            return _GuardedStream(self._inner.start_tls(ssl_context, server_hostname, timeout))

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class _GuardedBackend(httpcore.NetworkBackend):
    """`httpcore.SyncBackend`, with every stream it opens wrapped in `_GuardedStream`."""

    def __init__(self) -> None:
        self._inner = httpcore.SyncBackend()

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.NetworkStream:
        stream = self._inner.connect_tcp(host, port, timeout, local_address, socket_options)
        return _GuardedStream(stream)

    def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.NetworkStream:
        return _GuardedStream(self._inner.connect_unix_socket(path, timeout, socket_options))

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


_HTTPX_ERRORS: dict[type[Exception], type[httpx.HTTPError]] = {
    httpcore.TimeoutException: httpx.TimeoutException,
    httpcore.ConnectTimeout: httpx.ConnectTimeout,
    httpcore.ReadTimeout: httpx.ReadTimeout,
    httpcore.WriteTimeout: httpx.WriteTimeout,
    httpcore.PoolTimeout: httpx.PoolTimeout,
    httpcore.NetworkError: httpx.NetworkError,
    httpcore.ConnectError: httpx.ConnectError,
    httpcore.ReadError: httpx.ReadError,
    httpcore.WriteError: httpx.WriteError,
    httpcore.ProxyError: httpx.ProxyError,
    httpcore.UnsupportedProtocol: httpx.UnsupportedProtocol,
    httpcore.ProtocolError: httpx.ProtocolError,
    httpcore.LocalProtocolError: httpx.LocalProtocolError,
    httpcore.RemoteProtocolError: httpx.RemoteProtocolError,
}
"""httpcore's exceptions and their httpx equivalents, as `httpx.HTTPTransport` maps them."""


@contextlib.contextmanager
def _as_httpx_errors() -> Iterator[None]:
    try:
        yield
    except Exception as exc:
        for kind in type(exc).__mro__:  # most specific first
            mapped = _HTTPX_ERRORS.get(kind)
            if mapped is not None:
                raise mapped(str(exc)) from exc
        raise


class _GuardedBody(httpx.SyncByteStream):
    """A response body whose every read runs with the request's guard bound to the reader."""

    def __init__(self, inner: Iterable[bytes], guard: IoGuard | None) -> None:
        self._inner = inner
        self._guard = guard

    def __iter__(self) -> Iterator[bytes]:
        parts = iter(self._inner)
        while True:
            # Bound per read, not across the yield: the consumer's time is not I/O, and the
            # next read may come from another thread.
            with _guarding(self._guard), _as_httpx_errors():
                part = next(parts, None)
            if part is None:
                return
            yield part

    def close(self) -> None:
        close = getattr(self._inner, "close", None)
        if close is not None:
            with _as_httpx_errors():
                close()


class CancellableTransport(httpx.BaseTransport):
    """An HTTP/1.1 connection pool whose blocking socket calls each request's guard sees."""

    def __init__(self) -> None:
        self._pool = httpcore.ConnectionPool(
            ssl_context=httpx.create_ssl_context(),
            max_connections=MAX_CONNECTIONS,
            max_keepalive_connections=MAX_KEEPALIVE_CONNECTIONS,
            keepalive_expiry=KEEPALIVE_EXPIRY_S,
            network_backend=_GuardedBackend(),
        )

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        if not isinstance(request.stream, httpx.SyncByteStream):
            raise TypeError("CancellableTransport needs a synchronous request body")
        guard: IoGuard | None = request.extensions.get(GUARD_EXTENSION)
        core_request = httpcore.Request(
            method=request.method,
            url=httpcore.URL(
                scheme=request.url.raw_scheme,
                host=request.url.raw_host,
                port=request.url.port,
                target=request.url.raw_path,
            ),
            headers=request.headers.raw,
            content=request.stream,
            extensions=request.extensions,
        )
        with _guarding(guard), _as_httpx_errors():
            response = self._pool.handle_request(core_request)
        if not isinstance(response.stream, Iterable):
            raise TypeError("httpcore returned an asynchronous response body")
        return httpx.Response(
            status_code=response.status,
            headers=response.headers,
            stream=_GuardedBody(response.stream, guard),
            extensions=response.extensions,
        )

    def close(self) -> None:
        self._pool.close()


def environment_proxies() -> bool:
    """Whether the environment names a proxy that httpx's stock client would use."""
    proxies = urllib.request.getproxies()
    return any(proxies.get(scheme) for scheme in ("http", "https", "all"))
