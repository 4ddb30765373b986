"""Directory-descriptor file operations that never follow a symlink.

The overlay and its journaled apply reach every file through descriptors opened one path
component at a time from a trusted directory with O_NOFOLLOW, so a symlink swapped in at any
moment is refused (`PathRefused`), never followed. Stateless functions; any thread.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import stat as stat_module
from collections.abc import Iterator, Sequence
from pathlib import Path

from qshell.overlay.errors import OverlayError

READ_CHUNK_BYTES = 1 << 20
ESCAPED = "is now a symlink or outside the root"
BLOCKED = "a parent is no longer a directory"
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC


class PathRefused(OverlayError):
    """A path goes through a symlink or a non-directory, or is not a plain relative path."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def split_rel(rel: str) -> list[str]:
    """The components of a root-relative path; PathRefused for anything but a plain one."""
    parts = rel.split("/")
    if not rel or any(p in ("", ".", "..") for p in parts):
        raise PathRefused(ESCAPED)
    return parts


@contextlib.contextmanager
def open_dir(path: Path) -> Iterator[int]:
    """A descriptor for a directory that is not itself a symlink (else PathRefused)."""
    try:
        fd = os.open(path, _DIR_FLAGS)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise PathRefused(ESCAPED) from exc
        raise
    try:
        yield fd
    finally:
        os.close(fd)


@contextlib.contextmanager
def open_chain(base: int, parts: Sequence[str], *, create_mode: int | None = None) -> Iterator[int]:
    """`base/parts…` opened one component at a time, never through a symlink.

    Missing directories are made with `create_mode` when given, else FileNotFoundError.
    """
    fd = os.dup(base)
    try:
        for name in parts:
            try:
                nxt = os.open(name, _DIR_FLAGS, dir_fd=fd)
            except FileNotFoundError:
                if create_mode is None:
                    raise
                with contextlib.suppress(FileExistsError):
                    os.mkdir(name, create_mode, dir_fd=fd)
                nxt = os.open(name, _DIR_FLAGS, dir_fd=fd)
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                    raise PathRefused(ESCAPED if exc.errno == errno.ELOOP else BLOCKED) from exc
                raise
            os.close(fd)
            fd = nxt
        yield fd
    finally:
        os.close(fd)


def hash_at(dir_fd: int, name: str) -> tuple[str, os.stat_result] | None:
    """sha256 and stat of the regular file `name` under `dir_fd`; None if there is none."""
    try:
        fd = os.open(name, READ_FLAGS | os.O_NONBLOCK, dir_fd=dir_fd)  # a FIFO must not block
    except OSError:  # absent, a symlink (ELOOP), unreadable: no content we can vouch for
        return None
    try:
        info = os.fstat(fd)
        if not stat_module.S_ISREG(info.st_mode):
            return None
        digest = hashlib.sha256()
        while chunk := os.read(fd, READ_CHUNK_BYTES):
            digest.update(chunk)
        return digest.hexdigest(), info
    finally:
        os.close(fd)


def lstat_at(dir_fd: int, name: str) -> os.stat_result | None:
    try:
        return os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return None


def dir_info(base: int, parts: Sequence[str]) -> os.stat_result | None:
    """lstat of `base/parts…` (of `base` itself for no parts); None when there is none."""
    return os.fstat(base) if not parts else lstat_at(base, "/".join(parts))
