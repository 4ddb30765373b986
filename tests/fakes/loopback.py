"""What the test servers share: an HTTP listener on 127.0.0.1 served from a daemon thread.

`LoopbackHTTPServer` is the listening socket (one daemon thread per connection, none joined
on close, no reverse DNS lookup, no traceback for a client that hangs up);
`LoopbackHandler` the request handler's common part (HTTP/1.1, Nagle off, quiet);
`LoopbackServer` the life cycle around them (`start`, `stop`, `with`, `port`, `url`). The
scripted LLM server and the replay server add only what they answer. Never binds beyond
the loopback interface; `stop()` never waits on a handler.
"""

from __future__ import annotations

import socket
import socketserver
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Self

HOST = "127.0.0.1"
SERVE_POLL_S = 0.05
STOP_JOIN_S = 5.0


class LoopbackHTTPServer(ThreadingHTTPServer):
    """The listening socket of a test server."""

    daemon_threads = True
    block_on_close = False
    allow_reuse_address = True

    def server_bind(self) -> None:
        # Skip HTTPServer's reverse DNS lookup (socket.getfqdn), which can be slow.
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = HOST, self.server_address[1]

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that hangs up mid-request is the test's business, not a traceback.
        if not isinstance(sys.exc_info()[1], OSError):
            super().handle_error(request, client_address)


class LoopbackHandler(BaseHTTPRequestHandler):
    """One connection of a test server: HTTP/1.1, no Nagle delay, no access log."""

    protocol_version = "HTTP/1.1"

    def setup(self) -> None:
        super().setup()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format: str, *args: Any) -> None:
        return

    def read_body(self) -> bytes:
        """The request's body, sent with a length or chunked."""
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            parts: list[bytes] = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    self.rfile.readline()
                    return b"".join(parts)
                parts.append(self.rfile.read(size))
                self.rfile.readline()
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))


class LoopbackServer:
    """Starts a LoopbackHTTPServer (built by `_listener`) on a daemon thread."""

    thread_name = "loopback"
    _httpd: LoopbackHTTPServer | None = None
    _thread: threading.Thread | None = None

    def _listener(self) -> LoopbackHTTPServer:
        raise NotImplementedError

    def start(self) -> Self:
        if self._httpd is None:
            self._httpd = self._listener()
            self._thread = threading.Thread(
                target=self._httpd.serve_forever,
                kwargs={"poll_interval": SERVE_POLL_S},
                name=f"{self.thread_name}-{self.port}",
                daemon=True,
            )
            self._thread.start()
        return self

    def stop(self) -> None:
        self._close_listener()

    def _close_listener(self) -> None:
        """Close the listener; connections still open are daemon threads and end on their own."""
        httpd, self._httpd = self._httpd, None
        if httpd is None:
            return
        httpd.shutdown()
        httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=STOP_JOIN_S)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    @property
    def port(self) -> int:
        if self._httpd is None:
            raise RuntimeError("the server is not started")
        return int(self._httpd.server_address[1])

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}"
