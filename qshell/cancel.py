"""CancelToken: the one cancellation signal shared by the loop, providers and tools.

It wraps a `threading.Event`. Any thread may call `cancel()`; callbacks registered with
`on_cancel` run at once in the cancelling thread, which is how an open HTTP response is
shut down and a running shell's process group is killed without polling. Thread-safe.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from qshell.errors import Cancelled

log = logging.getLogger(__name__)


class CancelToken:
    """A thread-safe, one-way cancellation flag with callbacks."""

    def __init__(self) -> None:
        self._event = threading.Event()
        self._lock = threading.Lock()
        self._callbacks: dict[int, Callable[[], None]] = {}
        self._next_id = 0

    @property
    def cancelled(self) -> bool:
        return self._event.is_set()

    def cancel(self) -> None:
        """Set the flag and run every registered callback once (errors are logged)."""
        with self._lock:
            if self._event.is_set():
                return
            self._event.set()
            callbacks = list(self._callbacks.values())
            self._callbacks.clear()
        for callback in callbacks:
            try:
                callback()
            except Exception:  # a failing cleanup must not stop the others
                log.debug("cancel callback failed", exc_info=True)

    def on_cancel(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Run `callback` when cancelled (now, if already). Returns an unregister function."""
        with self._lock:
            if not self._event.is_set():
                key = self._next_id
                self._next_id += 1
                self._callbacks[key] = callback

                def unregister() -> None:
                    with self._lock:
                        self._callbacks.pop(key, None)

                return unregister
        callback()
        return lambda: None

    def wait(self, timeout_s: float | None) -> bool:
        """Sleep up to `timeout_s`, waking early on cancel. Returns True if cancelled."""
        return self._event.wait(timeout_s)

    def raise_if_cancelled(self) -> None:
        if self._event.is_set():
            raise Cancelled("cancelled")
