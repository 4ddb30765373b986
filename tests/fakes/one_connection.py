"""`OneConnectionServer`: a raw listener on 127.0.0.1 whose daemon thread serves the one
connection it accepts, for the tests that must see what the client does on the socket
(sends, hangs up). A subclass sets what it needs, then calls `__init__`, and writes `_serve`.
"""

from __future__ import annotations

import socket
import threading

JOIN_S = 5.0


class OneConnectionServer:
    """Listens on a free port of 127.0.0.1 and runs `_serve` on a daemon thread."""

    def __init__(self) -> None:
        self.client_disconnected = threading.Event()
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self.listener.getsockname()[1]
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        raise NotImplementedError

    def close(self) -> None:
        """Stop listening; give the serving thread `JOIN_S` seconds to finish."""
        self.listener.close()
        self.thread.join(JOIN_S)
