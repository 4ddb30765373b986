"""The per-stream silence watchdog and the handle that can abort an in-flight HTTP exchange.

`Watchdog` measures silence on one streaming response: `first_token_s` until the first
content arrives, `idle_s` between chunks after that, and never while the consumer holds
the stream (it is suspended across each `yield`). On expiry it calls `on_expire` once.
`AbortHandle` lets a cancel or an expired watchdog abort one exchange from another thread:
it shuts the socket down — waking a thread blocked in a read at once and letting the
server see the disconnect. A *guarded* handle is the exchange's `IoGuard` (see
`qshell.llm.sockets`): it sees each blocking socket call as it happens, shuts down exactly
the socket in use (new or reused pooled connection alike) and refuses every later call.
An unguarded handle (any other transport) collects sockets from httpx's `trace` extension
(new connections) and from the response, and also closes the response. Neither class reads
or writes the network itself, and neither knows about errors or retries; both are
thread-safe (the watchdog thread, a cancelling thread and the reading thread share them).
"""

from __future__ import annotations

import contextlib
import logging
import math
import socket
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

import httpx

log = logging.getLogger(__name__)

WATCHDOG_POLL_S = 1.0
"""Longest the watchdog thread sleeps before re-reading the clock; earlier deadlines wake it."""

STOP_JOIN_S = 2.0
"""How long `Watchdog.stop` waits for its thread; it wakes at once, so this is a backstop."""


class _NetworkStream(Protocol):
    def get_extra_info(self, info: str) -> Any:
        """httpcore's `NetworkStream.get_extra_info`; "socket" gives the socket."""


class Watchdog:
    """Calls `on_expire` once when a stream stays silent longer than its current window."""

    def __init__(
        self,
        first_token_s: float,
        idle_s: float,
        on_expire: Callable[[], None],
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._idle_s = idle_s
        self._on_expire = on_expire
        self._clock = clock
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._window_s = first_token_s
        self._deadline = clock() + first_token_s
        self._stopped = False
        self._expired = False
        self._thread: threading.Thread | None = None

    @property
    def expired(self) -> bool:
        return self._expired

    @property
    def window_s(self) -> float:
        """The silence limit that applies now (or that expired)."""
        return self._window_s

    def feed(self) -> None:
        """Data arrived: re-arm the deadline with the current window."""
        with self._lock:
            if not self._expired:
                self._deadline = self._clock() + self._window_s

    def content_started(self) -> None:
        """The first content arrived: from now on the idle window applies."""
        with self._lock:
            if not self._expired:
                self._window_s = self._idle_s
                self._deadline = self._clock() + self._idle_s
                self._wake.notify_all()  # the deadline moved earlier

    def rearm(self, window_s: float) -> None:
        """Use a new silence window from now on (e.g. a short one to drain a finished body)."""
        with self._lock:
            if not self._expired:
                self._window_s = window_s
                self._deadline = self._clock() + window_s
                self._wake.notify_all()

    def suspend(self) -> None:
        """The consumer holds the stream; its time is not the server's silence."""
        with self._lock:
            if not self._expired:
                self._deadline = math.inf

    def remaining_s(self) -> float:
        with self._lock:
            return self._deadline - self._clock()

    def check(self) -> bool:
        """Fire if the deadline has passed. Returns whether the watchdog has expired."""
        with self._lock:
            if self._expired or self._stopped:
                return self._expired
            if self._clock() < self._deadline:
                return False
            self._expired = True
        log.debug("stream silent for %.1f s; aborting it", self._window_s)
        try:
            self._on_expire()
        except Exception:  # the abort is best effort; the reader still sees `expired`
            log.debug("watchdog abort failed", exc_info=True)
        return True

    def start(self) -> None:
        """Run `check` on a daemon thread until expiry or `stop`."""
        self._thread = threading.Thread(target=self._run, name="qshell-llm-watchdog", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop watching; after this returns `on_expire` will not be called."""
        with self._lock:
            self._stopped = True
            self._wake.notify_all()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(STOP_JOIN_S)

    def _run(self) -> None:
        while True:
            with self._lock:
                if self._stopped or self._expired:
                    return
                remaining_s = self._deadline - self._clock()
                if remaining_s > 0:
                    self._wake.wait(min(remaining_s, WATCHDOG_POLL_S))
                    continue
            if self.check():
                return


def shutdown_socket(stream: _NetworkStream) -> None:
    """Shut down the socket under an httpcore network stream; harmless if already gone."""
    try:
        sock = stream.get_extra_info("socket")
    except Exception:
        return
    if sock is None:
        return
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)


class AbortHandle:
    """The socket(s) and response of one HTTP exchange, so another thread can abort it."""

    def __init__(self, *, guarded: bool = False) -> None:
        self._guarded = guarded
        self._lock = threading.Lock()
        self._streams: list[_NetworkStream] = []
        self._in_io: list[_NetworkStream] = []
        self._response: httpx.Response | None = None
        self._aborted = False
        self._released = False

    @property
    def response(self) -> httpx.Response | None:
        return self._response

    def trace(self, event: str, info: dict[str, Any]) -> None:
        """httpx `trace` extension (unguarded): remember each socket as soon as it connects."""
        if not event.endswith((".connect_tcp.complete", ".start_tls.complete")):
            return
        stream = info.get("return_value")
        if stream is None:
            return
        with self._lock:
            if self._released or self._guarded:
                return
            self._streams.append(stream)
            if self._aborted:
                shutdown_socket(stream)

    def enter_io(self, stream: _NetworkStream) -> bool:
        """`IoGuard`: a blocking call on `stream` starts; after an abort, cut it and refuse."""
        with self._lock:
            if self._aborted:
                shutdown_socket(stream)
                return False
            if not self._released:
                self._in_io.append(stream)
            return True

    def exit_io(self, stream: _NetworkStream) -> None:
        """`IoGuard`: the blocking call on `stream` returned."""
        with self._lock:
            if stream in self._in_io:
                self._in_io.remove(stream)

    def attach(self, response: httpx.Response) -> None:
        """The response headers arrived; abort at once if an abort came first."""
        with self._lock:
            self._response = response
            stream = response.extensions.get("network_stream")
            if stream is not None and not self._guarded:
                self._streams.append(stream)
            if self._aborted:
                self._abort_locked()
                if self._guarded:  # the reading thread itself: closing cannot race it
                    self._close_response()

    def abort(self) -> None:
        """Shut the socket down (unguarded: also close the response); any thread, once."""
        with self._lock:
            if self._aborted or self._released:
                return
            self._aborted = True
            self._abort_locked()

    def release(self) -> None:
        """The exchange is over: close the response; later aborts do nothing."""
        with self._lock:
            self._released = True
            response = self._response
            self._streams.clear()
            self._in_io.clear()
        if response is not None:
            response.close()

    def _abort_locked(self) -> None:
        for stream in self._in_io:
            shutdown_socket(stream)
        if self._guarded:
            return  # the reader wakes from the shutdown, or is refused its next call
        for stream in self._streams:
            shutdown_socket(stream)
        self._close_response()

    def _close_response(self) -> None:
        if self._response is not None:
            try:
                self._response.close()
            except Exception:  # closing races the reading thread; the shutdown already woke it
                log.debug("closing an aborted response failed", exc_info=True)
