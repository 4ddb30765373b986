"""Staging an apply: each overlay file copied beside its destination, several at once.

`stage_all` copies every file of a journal's plan from the upper layer to its staged name in
the destination's directory — streamed and hashed in chunks with its holes kept
(metadata.py), with the overlay file's mode and exactly its xattrs and ACLs — and, for an
in-place edit of a hard-linked file, the original to its backup (inplace.py). The upper copy
is the one source of those attrs: a copy of a real file carries the real file's from its
copy-up (the kernel's, or the overlay's for a tool's write), with whatever the speculation
set or removed since, and a new one what it inherited from its upper directory's default ACL
— the real directory's, copied up with it (upper.py) — so the staged copy's own inherited
ACL is replaced; plan.py checks the real file's attrs are still those it was copied with.
The files of one `Step.link_group` (one inode in the upper layer) are staged as one: the
first copied, each other one a hard link of that copy. The directories are opened once each,
never through a symlink, and shared by the worker threads; nothing is fsynced here (the
journal makes it durable in one step). `Pacer` carries the caller's progress callback and
cancel check: a cancel stops the staging with ApplyCancelled. Functions over directory
descriptors; the overlay's lock serialises applies.
"""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from qshell.overlay import inplace
from qshell.overlay.dirfd import READ_FLAGS, open_chain, split_rel
from qshell.overlay.metadata import copy_attrs, copy_stream
from qshell.overlay.records import (
    UNLINKABLE,
    ApplyCancelled,
    ApplyConflict,
    Conflict,
    JournalState,
    Step,
)

STAGE_WORKERS = 4  # threads staging files at once: each create waits on the filesystem
NEW_FILE_MODE = 0o666  # before the umask, as open(2) and RealView create files
_CREATE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_NO_LINK = {errno.EXDEV, errno.EMLINK, errno.EPERM, errno.EOPNOTSUPP, errno.ENOTSUP}

Progress = Callable[[int, int], None]  # (files staged + swapped so far, twice the files)


class Pacer:
    """The caller's progress callback and cancel check, as an apply moves on."""

    def __init__(
        self, total: int, progress: Progress | None, cancelled: Callable[[], bool] | None
    ) -> None:
        self.done, self.total = 0, total
        self._progress, self._cancelled = progress, cancelled

    def check(self) -> None:
        """ApplyCancelled when the caller has cancelled."""
        if self._cancelled is not None and self._cancelled():
            raise ApplyCancelled("the apply was cancelled before its commit point; rolled back")

    def advance(self) -> None:
        self.done += 1
        if self._progress is not None:
            self._progress(self.done, self.total)


def stage_all(root_fd: int, upper_fd: int, state: JournalState, pacer: Pacer) -> None:
    """Stage every file of `state`; stops at a cancel (and at the first failure)."""
    with contextlib.ExitStack() as stack:
        dirs: dict[str, tuple[int, int]] = {}
        for step in state.files:
            parent = step.rel.rpartition("/")[0]
            if parent not in dirs:
                parts = parent.split("/") if parent else []
                up = stack.enter_context(open_chain(upper_fd, parts))
                dirs[parent] = (up, stack.enter_context(open_chain(root_fd, parts)))

        def stage(step: Step) -> None:
            pacer.check()
            up, real = dirs[step.rel.rpartition("/")[0]]
            _stage(up, real, step)

        copies = [step for step in state.files if not step.follower]
        pool = ThreadPoolExecutor(STAGE_WORKERS)
        try:
            for _ in pool.map(stage, copies):
                pacer.advance()
        finally:
            pool.shutdown(cancel_futures=True)  # all stopped before any rollback
        first = {step.rel: step for step in copies if step.link_group is not None}
        for step in state.files:
            if step.follower:
                pacer.check()
                _link(dirs, first[str(step.link_group)], step)
                pacer.advance()


def _link(dirs: dict[str, tuple[int, int]], first: Step, step: Step) -> None:
    """Stage `step` as a hard link of its group's `first` staged copy; ApplyConflict where
    the filesystem cannot link them (another filesystem mounted between, no hard links)."""
    source = dirs[first.rel.rpartition("/")[0]][1]
    target = dirs[step.rel.rpartition("/")[0]][1]
    try:
        os.link(
            first.staged, step.staged, src_dir_fd=source, dst_dir_fd=target, follow_symlinks=False
        )
    except OSError as exc:
        if exc.errno not in _NO_LINK:
            raise
        raise ApplyConflict([Conflict(step.rel, UNLINKABLE)]) from None
    step.sha256, step.staged_ino = first.sha256, first.staged_ino


def _stage(up: int, parent: int, step: Step) -> None:
    name = split_rel(step.rel)[-1]
    source = os.open(name, READ_FLAGS, dir_fd=up)
    try:
        out = os.open(step.staged, _CREATE_FLAGS, NEW_FILE_MODE, dir_fd=parent)
        try:
            step.sha256 = copy_stream(source, out)
            copy_attrs(source, out)  # exactly: an ACL the staged name inherited goes
            info = os.fstat(out)
            if step.mode is not None and info.st_mode & 0o7777 != step.mode:
                os.fchmod(out, step.mode)
            step.staged_ino = info.st_ino
        finally:
            os.close(out)
    finally:
        os.close(source)
    if step.in_place:
        inplace.stage_backup(parent, name, step)
