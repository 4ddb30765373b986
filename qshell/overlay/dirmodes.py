"""The directories of an apply: made, then given the mode the upper layer has, undone on rollback.

plan.py records each directory the apply makes and each existing one whose mode the
speculation changed as a `DirMode` (the mode, and for an existing directory its mode until
then). `make` creates the new directories (mkdir's default first, so the apply can fill
them); `set_modes`, after every file is in, gives each its mode — deepest first, a setgid bit
a new directory inherited from its parent kept, as mkdir would — and checks that an existing
one still has the mode it had when checked (else ApplyConflict: the user's chmod stays).
`restore_modes` (rolling back) puts each existing directory's mode back and makes each new
one writable again so it can be removed. Every step goes through no-follow descriptors.
Stateless functions; the overlay's lock serialises applies.
"""

from __future__ import annotations

import contextlib
import os
import stat as stat_module

from qshell.overlay.dirfd import PathRefused, open_chain, split_rel
from qshell.overlay.records import MODE_CHANGED, ApplyConflict, Conflict, DirMode, JournalState

NEW_DIR_MODE = 0o777  # before the umask, as mkdir -p creates directories


def make(root_fd: int, state: JournalState) -> None:
    """Create `state.dirs`, parents first; `state.dirs` keeps those this apply made."""
    created: list[str] = []
    for rel in state.dirs:
        parts = split_rel(rel)
        with open_chain(root_fd, parts[:-1]) as parent:
            try:
                os.mkdir(parts[-1], NEW_DIR_MODE, dir_fd=parent)
            except FileExistsError:
                continue  # someone else made it meanwhile: not ours to remove
            created.append(rel)
    state.dirs = created
    made = set(created)
    state.modes = [m for m in state.modes if m.before is not None or m.rel in made]


def _deepest_first(modes: list[DirMode]) -> list[DirMode]:
    return sorted(modes, key=lambda m: m.rel.count("/"), reverse=True)


def set_modes(root_fd: int, state: JournalState) -> None:
    """Give every recorded directory its mode; ApplyConflict when an existing one's mode
    changed since the check."""
    for item in _deepest_first(state.modes):
        with open_chain(root_fd, split_rel(item.rel)) as fd:
            now = stat_module.S_IMODE(os.fstat(fd).st_mode)
            if item.before is None:
                os.fchmod(fd, item.mode | (now & stat_module.S_ISGID))
            elif now == item.before:
                os.fchmod(fd, item.mode)
            elif now != item.mode:
                raise ApplyConflict([Conflict(item.rel, MODE_CHANGED)])


def restore_modes(root_fd: int, state: JournalState) -> None:
    """Rolling back: each existing directory gets its mode back (when it still has ours),
    each new one is made writable for its removal. Best effort."""
    for item in sorted(state.modes, key=lambda m: m.rel.count("/")):
        with (
            contextlib.suppress(OSError, PathRefused),
            open_chain(root_fd, split_rel(item.rel)) as fd,
        ):
            now = stat_module.S_IMODE(os.fstat(fd).st_mode)
            if item.before is None:
                os.fchmod(fd, now | stat_module.S_IRWXU)
            elif now == item.mode:
                os.fchmod(fd, item.before)
