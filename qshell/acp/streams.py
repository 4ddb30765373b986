"""The JSON-RPC stream's hold on the process's stdin and stdout (`qshell --acp`).

`claim` runs before anything else of the run can print (gate plugins load after it): it
checks that stdin and stdout are pipes an editor opened, moves them to private file
descriptors for the JSON stream, and points fd 1 at stderr and fd 0 at /dev/null, so a
plugin's `print`, a child process that inherits stdout, or one that reads stdin can
neither corrupt nor steal the client's messages. `opened` hands the SDK the private
pipes while it connects its streams. It must not import the SDK. Main thread, once per
process.
"""

from __future__ import annotations

import contextlib
import os
import stat
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from typing import IO

from qshell.errors import InputError


@dataclass(frozen=True, slots=True)
class JsonPipes:
    """The client's stdin and stdout, on file descriptors no one else writes or reads."""

    incoming: IO[bytes]
    outgoing: IO[bytes]


_claimed: JsonPipes | None = None


def _check() -> None:
    """ACP runs on pipes an editor opens (or a socket, a terminal); a file will not do."""
    for name, stream in (("stdin", sys.stdin), ("stdout", sys.stdout)):
        try:
            mode = os.fstat(stream.fileno()).st_mode
        except (OSError, ValueError):
            mode = 0
        if not (stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or stat.S_ISCHR(mode)):
            raise InputError(
                f"--acp talks JSON-RPC over stdin and stdout, and {name} is not a pipe: "
                "let the editor start qshell"
            )


def claim() -> JsonPipes:
    """Take stdin and stdout for the JSON stream (once; later calls return the same)."""
    global _claimed
    if _claimed is not None:
        return _claimed
    _check()
    sys.stdout.flush()
    incoming = os.fdopen(os.dup(0), "rb", buffering=0)
    outgoing = os.fdopen(os.dup(1), "wb", buffering=0)
    os.dup2(2, 1)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    sys.stdout = sys.stderr  # Python-level writes too
    _claimed = JsonPipes(incoming, outgoing)
    return _claimed


@contextlib.contextmanager
def opened() -> Iterator[None]:
    """`sys.stdin` / `sys.stdout` are the JSON pipes inside (the SDK's `stdio_streams`
    connects to them), stderr and /dev/null again after."""
    pipes = claim()
    before = sys.stdin, sys.stdout
    sys.stdin, sys.stdout = pipes.incoming, pipes.outgoing
    try:
        yield
    finally:
        sys.stdin, sys.stdout = before
