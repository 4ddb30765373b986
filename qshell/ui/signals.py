"""Ctrl-C during a turn: the first SIGINT cancels the turn, a second one interrupts at once.

Front-ends wrap a running turn in `sigint_cancels(token)`; the first SIGINT cancels the
CancelToken (whose callbacks close the HTTP response and kill a shell's process group),
so history stays valid. The handler itself takes no lock: a signal handler runs on the
main thread between two bytecodes, possibly inside `with lock:` of the very token (the
loop registers and drops cancel callbacks on the main thread in print mode), where
acquiring that lock again would hang the process. It only writes a byte to a pipe; a
small watcher thread reads it and cancels. Outside the context the previous handler is
restored and the watcher ends. Signal handlers can only be installed from the main
thread; elsewhere this is a no-op.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from qshell.cancel import CancelToken

WATCHER_JOIN_S = 1.0
"""How long leaving the context waits for the watcher (it only has to read end of file)."""


@contextmanager
def sigint_cancels(cancel: CancelToken) -> Iterator[None]:
    """While active, the first SIGINT cancels `cancel`; a second raises KeyboardInterrupt."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    read_end, write_end = os.pipe()
    watcher = threading.Thread(
        target=_cancel_on_byte, args=(read_end, cancel), name="qshell-sigint", daemon=True
    )
    watcher.start()
    pressed = False

    def handler(signum: int, frame: object) -> None:
        nonlocal pressed
        if pressed or cancel.cancelled:
            raise KeyboardInterrupt
        pressed = True
        os.write(write_end, b"c")  # async-signal-safe: no lock is taken here

    previous = signal.signal(signal.SIGINT, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        os.close(write_end)  # the watcher reads end of file and returns
        watcher.join(WATCHER_JOIN_S)


def _cancel_on_byte(read_end: int, cancel: CancelToken) -> None:
    """The watcher: cancel `cancel` when a byte arrives; return at end of file."""
    try:
        while True:
            byte = os.read(read_end, 1)
            if not byte:
                return
            cancel.cancel()
    finally:
        os.close(read_end)


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
