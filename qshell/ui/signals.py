"""Ctrl-C during a turn: the first SIGINT cancels the turn, a second one interrupts at once.

Front-ends wrap a running turn in `sigint_cancels(token)`; the handler only sets the
CancelToken (whose callbacks close the HTTP response and kill a shell's process group),
so history stays valid. Outside the context the previous handler is restored. Signal
handlers can only be installed from the main thread; elsewhere this is a no-op.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from qshell.cancel import CancelToken


@contextmanager
def sigint_cancels(cancel: CancelToken) -> Iterator[None]:
    """While active, the first SIGINT cancels `cancel`; a second raises KeyboardInterrupt."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: object) -> None:
        if cancel.cancelled:
            raise KeyboardInterrupt
        cancel.cancel()

    previous = signal.signal(signal.SIGINT, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


@contextmanager
def sigint_raises() -> Iterator[None]:
    """While active, SIGINT raises KeyboardInterrupt (e.g. while a plain question waits)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
