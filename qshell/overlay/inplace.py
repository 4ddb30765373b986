"""Edits of a hard-linked file: the new content written into the destination's own inode.

A destination with more than one link (plan.py marks its `Step.in_place`) is not swapped: a
rename would give the name a new inode and silently break the link to the other names, as a
real in-place edit (`echo >> f`, most editors' save) never does. (A speculation never
changes a file that has other links when it runs: this is a link the user made since.) The
journal's backup is then a full copy of the original, its xattrs and ACLs too, made while
staging and checked against the original's digest (`stage_backup`); `write` checks again,
through a descriptor opened on the destination itself (never through a symlink, the inode
the plan saw, the checked content and mode), truncates it, writes the staged content in and
gives it exactly the staged copy's xattrs and ACLs (those the speculation removed go, as
on the copy), and checks the name still holds that inode (a save by rename in that instant
is a conflict, and the backup goes back in). `roll_back` writes the backup — content and
attrs — back into the inode. What no check can tell apart:
a crash in the middle of `write` leaves content that is neither old nor new, which recovery
restores from the backup like an edit of ours. Stateless functions over directory
descriptors.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import stat as stat_module

from qshell.overlay.dirfd import READ_CHUNK_BYTES, READ_FLAGS, lstat_at
from qshell.overlay.metadata import copy_attrs, copy_stream
from qshell.overlay.records import CHANGED, DELETED, ApplyConflict, Conflict, Step

_CREATE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_WRITE_FLAGS = os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
BACKUP_MODE = 0o600


def _digest(fd: int) -> str:
    digest = hashlib.sha256()
    offset = 0
    while chunk := os.pread(fd, READ_CHUNK_BYTES, offset):
        digest.update(chunk)
        offset += len(chunk)
    return digest.hexdigest()


def _open_dest(parent: int, name: str, step: Step, flags: int) -> int:
    """The destination, opened when it is the inode the plan saw (else ApplyConflict)."""
    try:
        fd = os.open(name, flags, dir_fd=parent)
    except FileNotFoundError:
        raise ApplyConflict([Conflict(step.rel, DELETED)]) from None
    except OSError:
        raise ApplyConflict([Conflict(step.rel, CHANGED)]) from None
    info = os.fstat(fd)
    if not stat_module.S_ISREG(info.st_mode) or info.st_ino != step.dest_ino:
        os.close(fd)
        raise ApplyConflict([Conflict(step.rel, CHANGED)])
    return fd


def stage_backup(parent: int, name: str, step: Step) -> None:
    """Copy the original at `name` to the step's backup name; ApplyConflict when it is no
    longer the original."""
    assert step.backup is not None
    fd = _open_dest(parent, name, step, READ_FLAGS | os.O_NONBLOCK)
    try:
        out = os.open(step.backup, _CREATE_FLAGS, BACKUP_MODE, dir_fd=parent)
        try:
            same = copy_stream(fd, out) == step.expect_sha256
            copy_attrs(fd, out)  # an ACL sets the backup's mode bits: the original's
        finally:
            os.close(out)
    finally:
        os.close(fd)
    if not same:
        os.unlink(step.backup, dir_fd=parent)
        raise ApplyConflict([Conflict(step.rel, CHANGED)])


def _overwrite(target: int, parent: int, source_name: str) -> str:
    """Give `target` the content and exactly the xattrs and ACLs of `source_name`; the
    caller gives the mode."""
    source = os.open(source_name, READ_FLAGS, dir_fd=parent)
    try:
        os.ftruncate(target, 0)
        digest = copy_stream(source, target)
        copy_attrs(source, target)
        return digest
    finally:
        os.close(source)


def write(parent: int, name: str, step: Step) -> None:
    """Write the staged copy into the destination's inode, its staged name then removed."""
    fd = _open_dest(parent, name, step, _WRITE_FLAGS)
    try:
        mode = stat_module.S_IMODE(os.fstat(fd).st_mode)
        if _digest(fd) != step.expect_sha256 or mode != step.original_mode:
            raise ApplyConflict([Conflict(step.rel, CHANGED)])
        _overwrite(fd, parent, step.staged)
        if step.mode is not None and stat_module.S_IMODE(os.fstat(fd).st_mode) != step.mode:
            os.fchmod(fd, step.mode)
        there = lstat_at(parent, name)
        if there is None or there.st_ino != step.dest_ino:  # replaced by a save meanwhile
            assert step.backup is not None
            _overwrite(fd, parent, step.backup)
            os.fchmod(fd, mode)
            raise ApplyConflict([Conflict(step.rel, CHANGED)])
    finally:
        os.close(fd)
    os.unlink(step.staged, dir_fd=parent)


def _restore(fd: int, parent: int, step: Step) -> None:
    """Put the backup's content (where it differs) and attrs back into the inode `fd`."""
    assert step.backup is not None
    if _digest(fd) != step.expect_sha256:
        _overwrite(fd, parent, step.backup)
        return
    source = os.open(step.backup, READ_FLAGS, dir_fd=parent)
    try:
        copy_attrs(source, fd)
    finally:
        os.close(source)


def roll_back(parent: int, name: str, step: Step) -> bool:
    """Put the original back into the destination's inode when it holds anything else, then
    remove the staged copy and the backup; False when the name no longer holds that inode
    (replaced since: left as found)."""
    kept = True
    try:
        fd = _open_dest(parent, name, step, _WRITE_FLAGS)
    except ApplyConflict:
        kept = False
    else:
        try:
            backup = None if step.backup is None else lstat_at(parent, step.backup)
            if backup is not None:  # content, and the attrs an edit of the same bytes changed
                assert step.backup is not None
                _restore(fd, parent, step)
            if step.original_mode is not None:
                os.fchmod(fd, step.original_mode)
        finally:
            os.close(fd)
    for leftover in (step.staged, step.backup):
        if leftover is not None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(leftover, dir_fd=parent)
    return kept
