"""Making an apply's file writes and renames durable: one `syncfs(2)` rather than one fsync each.

A journaled apply must have every staged copy on disk before its journal says RENAMING, and
every swap on disk before it says COMMITTED. `sync_filesystem` flushes the whole filesystem
holding a directory descriptor in one call (libc's `syncfs`, reached through ctypes: `os`
has none); where libc has no `syncfs`, or the call fails, it returns False and the caller
takes its fallback (one fsync per file and per parent directory, `fsync_each`). Stateless
functions; any thread.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
from collections.abc import Callable, Iterable
from typing import cast

from qshell.overlay.dirfd import READ_FLAGS, open_chain, split_rel


def _load() -> Callable[[int], int] | None:
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
        function = libc.syncfs
    except (OSError, AttributeError):
        return None
    function.argtypes = [ctypes.c_int]
    function.restype = ctypes.c_int
    return cast(Callable[[int], int], function)


_SYNCFS = _load()


def sync_filesystem(fd: int) -> bool:
    """Flush the filesystem holding `fd` to disk; False when syncfs is missing or failed."""
    return _SYNCFS is not None and _SYNCFS(fd) == 0


def fsync_each(root_fd: int, files: Iterable[str], dirs: Iterable[str]) -> None:
    """The fallback: fsync each file (root-relative, never through a symlink), then each
    directory ('' is the root)."""
    for rel in files:
        parts = split_rel(rel)
        with open_chain(root_fd, parts[:-1]) as parent:
            fd = os.open(parts[-1], READ_FLAGS, dir_fd=parent)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
    for rel in dict.fromkeys(dirs):
        with open_chain(root_fd, rel.split("/") if rel else []) as fd:
            os.fsync(fd)


def make_durable(root_fd: int, files: Iterable[str], dirs: Iterable[str]) -> None:
    """Everything written under `root_fd` on disk: one syncfs, else `fsync_each`."""
    if not sync_filesystem(root_fd):
        fsync_each(root_fd, files, dirs)
