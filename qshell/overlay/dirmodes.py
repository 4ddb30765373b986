"""The directories of an apply: made, given the upper layer's mode and attrs, undone on rollback.

plan.py (dirnotes.py) records each directory the apply makes and each existing one whose
mode or attrs (the user's xattrs and ACLs, metadata.py) the speculation changed as a
`DirMode` (the mode and attrs, and for an existing directory those it had until then).
`make` creates the new directories (mkdir's default first, so the apply can fill them);
`set_modes`, after every file is in, gives each its attrs, then its mode — deepest first,
a setgid bit a new directory inherited from its parent kept, as mkdir would — and checks
that an existing one still has the mode and attrs it had when checked (else ApplyConflict:
the user's chmod, setfattr or setfacl stays). `restore_modes` (rolling back) puts each existing directory's attrs and mode back
when what it has is ours — each attr as it was or as we set it, an apply cut short between
two of them included — and makes each new one writable again so it can be removed. Every
step goes through no-follow descriptors (attrs through the parent's, so a directory nobody
may read has them set too). Stateless functions; the overlay's lock serialises applies.
"""

from __future__ import annotations

import contextlib
import os
import stat as stat_module

from qshell.overlay.dirfd import PathRefused, open_chain, split_rel
from qshell.overlay.metadata import Attrs, decode_attrs, entry_path, read_attrs, write_attrs
from qshell.overlay.records import (
    ATTRS_CHANGED,
    MODE_CHANGED,
    ApplyConflict,
    Conflict,
    DirMode,
    JournalState,
)

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


def _attrs(item: DirMode) -> tuple[Attrs, Attrs] | None:
    """(the attrs `item` gives, those it had until then), or None when it keeps its own."""
    if item.attrs is None:
        return None
    return decode_attrs(item.attrs), decode_attrs(item.attrs_before or {})


def set_modes(root_fd: int, state: JournalState) -> None:
    """Give every recorded directory its attrs and mode; ApplyConflict when an existing
    one's mode or attrs changed since the check."""
    for item in _deepest_first(state.modes):
        parts = split_rel(item.rel)
        with open_chain(root_fd, parts[:-1]) as parent, open_chain(parent, parts[-1:]) as fd:
            path, attrs = entry_path(parent, parts[-1]), _attrs(item)
            now = stat_module.S_IMODE(os.fstat(fd).st_mode)
            if item.before is None:
                if attrs is not None:
                    write_attrs(path, attrs[0], directory=True)
                os.fchmod(fd, item.mode | (now & stat_module.S_ISGID))
                continue
            if now not in (item.before, item.mode):
                raise ApplyConflict([Conflict(item.rel, MODE_CHANGED)])
            if attrs is not None:
                if read_attrs(path, directory=True) not in attrs:
                    raise ApplyConflict([Conflict(item.rel, ATTRS_CHANGED)])
                write_attrs(path, attrs[0], directory=True)
            if stat_module.S_IMODE(os.fstat(fd).st_mode) != item.mode:
                os.fchmod(fd, item.mode)


def _ours(path: str, attrs: tuple[Attrs, Attrs]) -> bool:
    """Whether each attr of the directory at `path` is as it was or as the apply sets it."""
    have = read_attrs(path, directory=True)
    new, old = attrs
    return all(have.get(name) in (new.get(name), old.get(name)) for name in {*have, *new, *old})


def restore_modes(root_fd: int, state: JournalState) -> None:
    """Rolling back: each existing directory gets its attrs and mode back (when it still
    has ours), each new one is made writable for its removal. Best effort."""
    for item in sorted(state.modes, key=lambda m: m.rel.count("/")):
        parts = split_rel(item.rel)
        with (
            contextlib.suppress(OSError, PathRefused),
            open_chain(root_fd, parts[:-1]) as parent,
            open_chain(parent, parts[-1:]) as fd,
        ):
            now = stat_module.S_IMODE(os.fstat(fd).st_mode)
            if item.before is None:
                os.fchmod(fd, now | stat_module.S_IRWXU)
                continue
            path, attrs = entry_path(parent, parts[-1]), _attrs(item)
            if attrs is None:
                if now == item.mode:
                    os.fchmod(fd, item.before)
                continue
            if now in (item.mode, item.before) and _ours(path, attrs):
                write_attrs(path, attrs[1], directory=True)
                os.fchmod(fd, item.before)
