"""The deletions of an apply: move each deleted entry aside, check it, and later drop it.

A deletion (`Unlink`, planned by plan.py from the overlay's `Removal`s) is applied first in
an apply, before any directory is made or file staged, since a replaced directory's new
content goes where the old one was. `move_aside` renames the real entry — file, symlink or
whole directory — to its backup name in the same directory and only then checks it against
the digest recorded when the speculation deleted it (trees.py): whatever was there at that
instant is caught, not destroyed; a mismatch puts it back and is a conflict. `restore` puts
every backup back (rolling back, in-process or at recovery); `drop` removes them after the
commit point. Every step goes through no-follow directory descriptors from the root.
Stateless functions; the overlay's lock serialises applies.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat as stat_module

from qshell.overlay import renameat
from qshell.overlay.dirfd import PathRefused, lstat_at, open_chain, split_rel
from qshell.overlay.records import CHANGED, DELETED, ApplyConflict, Conflict, JournalState, Unlink
from qshell.overlay.trees import TreeTooLarge, digest_at


def move_aside(root_fd: int, state: JournalState) -> None:
    """Move every deleted entry to its backup name; ApplyConflict when one is gone or is
    not what was deleted (that one is put back first)."""
    for step in state.removals:
        parts = split_rel(step.rel)
        with open_chain(root_fd, parts[:-1]) as parent:
            try:
                os.rename(parts[-1], step.backup, src_dir_fd=parent, dst_dir_fd=parent)
            except FileNotFoundError:
                raise ApplyConflict([Conflict(step.rel, DELETED)]) from None
            try:
                same = digest_at(parent, step.backup) == step.digest
            except (TreeTooLarge, OSError, PathRefused):
                same = False
            if not same:
                _move_back(parent, step, parts[-1])
                raise ApplyConflict([Conflict(step.rel, CHANGED)])


def restore(root_fd: int, state: JournalState) -> list[str]:
    """Put every moved-aside entry back, last first; returns those left as found (their
    directory is gone, or something else now stands at their name)."""
    kept: list[str] = []
    for step in reversed(state.removals):
        parts = split_rel(step.rel)
        try:
            with open_chain(root_fd, parts[:-1]) as parent:
                if lstat_at(parent, step.backup) is None:
                    continue  # never moved, or already back
                if not _move_back(parent, step, parts[-1]):
                    kept.append(step.rel)
        except (FileNotFoundError, NotADirectoryError, PathRefused):
            kept.append(step.rel)
    return kept


def drop(root_fd: int, state: JournalState) -> list[str]:
    """After the commit point: remove the moved-aside entries. Best effort; returns what
    could not be removed."""
    leftovers: list[str] = []
    for step in state.removals:
        parts = split_rel(step.rel)
        try:
            with open_chain(root_fd, parts[:-1]) as parent:
                info = lstat_at(parent, step.backup)
                if info is None:
                    continue
                if stat_module.S_ISDIR(info.st_mode):
                    shutil.rmtree(step.backup, dir_fd=parent)
                else:
                    os.unlink(step.backup, dir_fd=parent)
        except (OSError, PathRefused):
            leftovers.append(f"{step.rel} ({step.backup})")
    return leftovers


def _move_back(parent: int, step: Unlink, name: str) -> bool:
    """Rename the backup to `name` unless something stands there (False: left aside)."""
    try:
        renameat.rename_noreplace(parent, step.backup, name)
        return True
    except renameat.Unsupported:
        pass
    except FileExistsError:
        return False
    if lstat_at(parent, name) is not None:
        return False
    with contextlib.suppress(FileNotFoundError):
        os.rename(step.backup, name, src_dir_fd=parent, dst_dir_fd=parent)
    return True
