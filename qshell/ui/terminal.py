"""The terminal between prompts: quiet while a turn runs, type-ahead kept for later.

While a turn runs, `quiet_input()` turns off echo and line buffering on the TTY (signals
stay on, so Ctrl-C still cancels), which leaves whatever the user types queued in the
kernel for the next prompt: that is the REPL's type-ahead. Before a permission question
the queued bytes are taken out (`take_typeahead`) so they can never answer it; the
front-end puts them back into the next input line. POSIX TTYs only; elsewhere these are
no-ops. Main thread.
"""

from __future__ import annotations

import os
import select
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

try:
    import termios
except ImportError:  # pragma: no cover - not POSIX
    termios = None  # type: ignore[assignment]

MAX_TYPEAHEAD_BYTES = 64 * 1024


def is_tty(stream: object) -> bool:
    """Whether a stream is a terminal; False for anything that cannot say (closed, fake)."""
    try:
        return bool(stream.isatty())  # type: ignore[attr-defined]
    except (AttributeError, ValueError):
        return False


@contextmanager
def quiet_input(fd: int) -> Iterator[None]:
    """No echo and no line buffering on `fd` while active; the old mode comes back after."""
    if termios is None or not os.isatty(fd):
        yield
        return
    saved: list[Any] = termios.tcgetattr(fd)
    quiet = list(saved)
    quiet[3] = quiet[3] & ~(termios.ECHO | termios.ICANON)
    quiet[6] = list(quiet[6])
    quiet[6][termios.VMIN] = 1
    quiet[6][termios.VTIME] = 0
    termios.tcsetattr(fd, termios.TCSANOW, quiet)
    try:
        yield
    finally:
        termios.tcsetattr(fd, termios.TCSANOW, saved)


def take_typeahead(fd: int) -> bytes:
    """Read (without blocking) every byte queued on `fd`."""
    if not os.isatty(fd):
        return b""
    taken = bytearray()
    while len(taken) < MAX_TYPEAHEAD_BYTES:
        ready, _, _ = select.select([fd], [], [], 0)
        if not ready:
            break
        chunk = os.read(fd, 4096)
        if not chunk:
            break
        taken += chunk
    return bytes(taken)


def typeahead_text(raw: bytes) -> str:
    """The printable text of typed-ahead bytes: escape sequences dropped, Backspace applied."""
    text = raw.decode("utf-8", errors="ignore")
    out: list[str] = []
    index = 0
    while index < len(text):
        char = text[index]
        if char == "\x1b":  # skip an escape sequence: ESC [ ... final byte, or ESC + one char
            index += 1
            if index < len(text) and text[index] in "[O":
                index += 1
                while index < len(text) and not ("@" <= text[index] <= "~"):
                    index += 1
            index += 1
            continue
        if char in "\x7f\x08":
            if out:
                out.pop()
        elif char == "\r" and text[index + 1 : index + 2] == "\n":
            pass  # CR LF is one line break; the LF adds it
        elif char in "\r\n":
            out.append("\n")
        elif char == "\t" or (char >= " " and char != "\x7f" and not "\x80" <= char <= "\x9f"):
            out.append(char)
        index += 1
    return "".join(out).strip("\n")
