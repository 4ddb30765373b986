"""Setting aside what a recovery may neither delete nor leave in the project.

When the user edited a file after an apply was interrupted, the recovery keeps their edit,
and the version from before the apply — the user's data too — is left beside it under a
`.qshell-backup-*` name (journal.py). `set_aside` moves each such file out of the project
into a folder of qshell's state directory (`set-aside/<time>-<pid>/`), under the name of
the file it was the earlier version of, and returns where they went, so the one warning
line can say it. Every step goes through no-follow directory descriptors from the root
(dirfd.py); only a regular file is moved (a rename where the two are on one filesystem,
else a copy, holes kept, made durable before the original is unlinked). A file that cannot be moved
stays where it is, and is named as such. Stateless; any thread.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from qshell.dirs import ensure_private_dir
from qshell.overlay.dirfd import (
    READ_FLAGS,
    PathRefused,
    lstat_at,
    open_chain,
    open_dir,
    split_rel,
)
from qshell.overlay.metadata import copy_stream

ASIDE_DIR = "set-aside"
_WRITE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


@dataclass(frozen=True)
class SetAside:
    """Where the earlier versions went (`folder`, holding `moved` under their files'
    names), and those that could not be moved (still beside their files, in the project)."""

    folder: Path | None
    moved: tuple[str, ...]
    stayed: tuple[str, ...]


def set_aside(root: Path, pairs: Sequence[tuple[str, str]], state: Path) -> SetAside:
    """Move each `(file, earlier)` pair's `earlier` (a root-relative name beside `file`) to
    `state/set-aside/<stamp>/<file>`."""
    if not pairs:
        return SetAside(None, (), ())
    folder = state / ASIDE_DIR / f"{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}"
    moved, stayed = [], []
    for rel, earlier in pairs:
        try:
            _move_out(root, earlier, folder / rel)
        except (OSError, PathRefused):
            stayed.append(earlier)
        else:
            moved.append(rel)
    return SetAside(folder if moved else None, tuple(moved), tuple(stayed))


def _move_out(root: Path, rel: str, target: Path) -> None:
    parent_rel, _, name = rel.rpartition("/")
    ensure_private_dir(target.parent)
    with (
        open_dir(root) as root_fd,
        open_chain(root_fd, split_rel(parent_rel) if parent_rel else []) as parent,
    ):
        info = lstat_at(parent, name)
        if info is None or not stat.S_ISREG(info.st_mode):
            raise FileNotFoundError(rel)
        try:
            os.rename(name, target, src_dir_fd=parent)
            return
        except OSError as exc:
            if exc.errno != errno.EXDEV:
                raise
        _copy_out(parent, name, target, info.st_mode)
        os.unlink(name, dir_fd=parent)


def _copy_out(parent: int, name: str, target: Path, mode: int) -> None:
    """Copy `name` to `target` as an apply stages a file (metadata.copy_stream: holes
    kept) and make it durable (another filesystem)."""
    with contextlib.ExitStack() as stack:
        source = os.open(name, READ_FLAGS, dir_fd=parent)
        stack.callback(os.close, source)
        out = os.open(target, _WRITE_FLAGS, mode & 0o777)
        stack.callback(os.close, out)
        copy_stream(source, out)
        os.fsync(out)
