"""Liveness of overlays by `flock(2)`: a live overlay is one whose lock somebody holds.

Every overlay has a `lock` file beside `upper/`; the process that made it holds an exclusive
flock on it for the overlay's whole life (`Lease`), and the kernel drops the lock when that
process dies, whatever pid namespace it lives in (a pid seen from another container may
name a stranger, or nobody, while the owner is alive). A sweep takes an overlay only when
it can `claim` the lock itself, and keeps holding it while it recovers and removes the
overlay. Making an overlay and sweeping a pid directory both hold `locked_dir` on that
directory, so a sweep never sees an overlay that has no lock file yet. flock locks belong
to an open file description, so two descriptors of one process exclude each other too.
Thread-safe: a Lease releases once.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import threading
from collections.abc import Iterator
from pathlib import Path

from qshell.dirs import PRIVATE_FILE_MODE

LOCK_NAME = "lock"
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class Lease:
    """An exclusive flock held on one overlay's lock file until `release()`."""

    def __init__(self, fd: int) -> None:
        self._fd: int | None = fd
        self._lock = threading.Lock()

    @property
    def held(self) -> bool:
        return self._fd is not None

    def release(self) -> None:
        """Drop the lock (close its descriptor). Idempotent."""
        with self._lock:
            fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)


def take(directory: Path) -> Lease:
    """Create `directory/lock` (it must not exist) and lock it: the overlay is live."""
    flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(directory / LOCK_NAME, flags, PRIVATE_FILE_MODE)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # a new file: nobody else has it
    except BaseException:
        os.close(fd)
        raise
    return Lease(fd)


def claim(directory: Path) -> Lease | None:
    """The overlay's lock when no live process holds it, else None.

    FileNotFoundError when the overlay has no lock file (an older qshell made it).
    """
    fd = os.open(directory / LOCK_NAME, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    except BaseException:
        os.close(fd)
        raise
    return Lease(fd)


@contextlib.contextmanager
def locked_dir(path: Path, *, wait: bool) -> Iterator[int | None]:
    """An exclusive flock on the directory `path` (not followed if a symlink): its
    descriptor, or None when `wait` is False and someone else holds it."""
    fd = os.open(path, _DIR_FLAGS)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            yield None
            return
        yield fd
    finally:
        os.close(fd)


def still_linked(fd: int, path: Path) -> bool:
    """True when `path` still names the directory `fd` was opened on (nobody removed it
    between opening and locking)."""
    try:
        info = os.stat(path, follow_symlinks=False)
    except FileNotFoundError:
        return False
    mine = os.fstat(fd)
    return (info.st_dev, info.st_ino) == (mine.st_dev, mine.st_ino)
