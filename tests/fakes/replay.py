"""A replay HTTP server on 127.0.0.1: answers each POST with the next recorded body, byte for byte.

Tests give it the raw response bodies of real provider streams (`tests/llm/streams/`) and point
a provider at `url`; the n-th POST gets the n-th body exactly as stored, with the configured
status and content type, so a two-round turn can be replayed as two bodies. It records every
request (path, headers, body) for the test to inspect and must not interpret, reframe or
validate what it serves: a request past the last body gets a 500 that says so. Thread rule:
one daemon thread per connection; the request log and the body cursor are guarded by one
lock; handlers never wait on anything, so `stop()` never hangs.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tests.fakes.loopback import HOST, LoopbackHandler, LoopbackHTTPServer, LoopbackServer

REQUEST_TIMEOUT_S = 10.0


@dataclass(frozen=True, slots=True)
class ReplayedRequest:
    """One request the server answered: its path, lower-cased headers and raw body."""

    index: int
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        """The body parsed as JSON."""
        return json.loads(self.body)


class ReplayServer(LoopbackServer):
    """Serves `bodies` in order, one per POST, with `status` and `content_type` (None: no
    Content-Type header at all, as some servers send a stream).

    `write_size` splits each body into writes of that many bytes (the bytes are unchanged),
    so a parser also meets events cut across reads; None writes each body at once."""

    def __init__(
        self,
        bodies: bytes | Sequence[bytes],
        *,
        status: int = 200,
        content_type: str | None = "text/event-stream",
        write_size: int | None = None,
    ) -> None:
        if write_size is not None and write_size < 1:
            raise ValueError(f"write_size must be positive, got {write_size!r}")
        self.bodies: list[bytes] = [bodies] if isinstance(bodies, bytes) else list(bodies)
        self.status = status
        self.content_type = content_type
        self.write_size = write_size
        self._lock = threading.Lock()
        self._requests: list[ReplayedRequest] = []

    thread_name = "replay"

    def _listener(self) -> _ReplayHTTPServer:
        return _ReplayHTTPServer((HOST, 0), self)

    # ----------------------------------------------------------------- records

    @property
    def requests(self) -> list[ReplayedRequest]:
        """Every request answered so far, in arrival order."""
        with self._lock:
            return list(self._requests)

    def _record(self, path: str, headers: dict[str, str], body: bytes) -> tuple[int, bytes | None]:
        """Log one request; return its index and the body to serve (None: none left)."""
        with self._lock:
            index = len(self._requests)
            self._requests.append(ReplayedRequest(index, path, headers, body))
        return index, self.bodies[index] if index < len(self.bodies) else None


class _ReplayHTTPServer(LoopbackHTTPServer):
    def __init__(self, address: tuple[str, int], owner: ReplayServer) -> None:
        self.owner = owner
        super().__init__(address, _ReplayHandler)


class _ReplayHandler(LoopbackHandler):
    timeout = REQUEST_TIMEOUT_S
    server: _ReplayHTTPServer

    def do_POST(self) -> None:
        self.close_connection = True
        owner = self.server.owner
        raw = self.read_body()
        headers = {name.lower(): value for name, value in self.headers.items()}
        index, body = owner._record(self.path, headers, raw)
        if body is None:
            message = f"replay server: no recorded body left for request #{index + 1}"
            payload = json.dumps({"error": {"message": message, "type": "server_error"}})
            self._answer(500, "application/json", payload.encode(), None)
            return
        self._answer(owner.status, owner.content_type, body, owner.write_size)

    def _answer(
        self, status: int, content_type: str | None, body: bytes, write_size: int | None
    ) -> None:
        try:
            self.send_response(status)
            if content_type is not None:
                self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Connection", "close")
            self.end_headers()
            step = write_size or max(len(body), 1)
            for start in range(0, len(body), step):
                self.wfile.write(body[start : start + step])
                self.wfile.flush()
        except OSError:
            return
