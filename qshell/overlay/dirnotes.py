"""What the overlay knows of its directories' own metadata: modes, xattrs and ACLs.

A directory the speculation touches is copied up — by the kernel when a command writes in
it, chmods it or sets its attrs (the user's xattrs and ACLs, metadata.py), by the overlay
when a tool writes a file in it — with the real one's mode and attrs. Whether the
speculation then changed them is told by comparing, so `DirNotes` keeps for each directory
the mode and attrs digest it was copied up with (`copied_modes`, `copied_attrs`: still the
same, it changes nothing, and the real directory keeps whatever the user gives it
meanwhile) and, for each real directory a command changed, the mode or attrs it had then
(`modes_before`, `attrs_before`: a change the user made since is a conflict, and the user's
version stays). The first note of a directory stays. `changes` (for plan.py) turns them
into the `DirMode` steps an apply takes — each directory gets exactly the upper one's mode
and attrs (a made one's inherited there from its upper parent, as a live mkdir inherits
them from the real one) — and the conflicts that stop it (a
setuid or setgid bit is never brought in, one a new directory inherits from its real parent
excepted). Not thread-safe: the overlay's lock guards it; `changes` only reads.
"""

from __future__ import annotations

import stat as stat_module
from collections.abc import Sequence
from dataclasses import dataclass, field

from qshell.overlay.dirfd import dir_info, lstat_at, open_chain, split_rel
from qshell.overlay.metadata import Attrs, attrs_at, attrs_digest, encode_attrs
from qshell.overlay.records import (
    ATTRS_CHANGED,
    MODE_CHANGED,
    SET_ID,
    SET_ID_BITS,
    Conflict,
    DirMode,
)


@dataclass
class DirNotes:
    """Each directory's mode and attrs from before the speculation changed them."""

    copied_modes: dict[str, int] = field(default_factory=dict)
    copied_attrs: dict[str, str] = field(default_factory=dict)
    modes_before: dict[str, int] = field(default_factory=dict)
    attrs_before: dict[str, str] = field(default_factory=dict)

    def note_copy_up(self, rel: str, mode: int, attrs: str) -> None:
        """The upper directory `rel` was made as a copy with this mode and attrs digest."""
        self.copied_modes.setdefault(rel, mode)
        self.copied_attrs.setdefault(rel, attrs)

    def note_layer_dir(
        self, rel: str, mode: int, attrs: str, real_mode: int, real_attrs: str
    ) -> None:
        """A command's layer holds the existing directory `rel` with this mode and attrs
        digest, the real one having the others: each the same is a copy-up, each not a
        change the command made."""
        if mode == real_mode:
            self.copied_modes.setdefault(rel, mode)
        else:
            self.modes_before.setdefault(rel, real_mode)
        if attrs == real_attrs:
            self.copied_attrs.setdefault(rel, attrs)
        else:
            self.attrs_before.setdefault(rel, real_attrs)

    def changes(
        self, root_fd: int, upper_fd: int, made: Sequence[str], existing: Sequence[str]
    ) -> tuple[list[DirMode], list[Conflict]]:
        """The metadata steps for each directory the apply makes (`made`) and each existing
        one the upper layer has (`existing`), and the conflicts that stop them."""
        modes: list[DirMode] = []
        conflicts: list[Conflict] = []
        for rel, there in [*((r, False) for r in made), *((r, True) for r in existing)]:
            found = self._change(root_fd, upper_fd, rel, there)
            if isinstance(found, Conflict):
                conflicts.append(found)
            elif found is not None:
                modes.append(found)
        return modes, conflicts

    def _change(
        self, root_fd: int, upper_fd: int, rel: str, existing: bool
    ) -> DirMode | Conflict | None:
        upper = lstat_at(upper_fd, rel)
        if upper is None or not stat_module.S_ISDIR(upper.st_mode):
            return None  # a parent of a new file the upper layer has not got: mkdir's default
        mode = stat_module.S_IMODE(upper.st_mode)
        parts = split_rel(rel)
        with open_chain(upper_fd, parts[:-1]) as parent:
            attrs = attrs_at(parent, parts[-1], directory=True) or {}
        real = lstat_at(root_fd, rel) if existing else None
        if real is None or not stat_module.S_ISDIR(real.st_mode):
            parent_info = dir_info(root_fd, parts[:-1])
            inherited = parent_info is not None and parent_info.st_mode & stat_module.S_ISGID
            if mode & SET_ID_BITS & ~(stat_module.S_ISGID if inherited else 0):
                return Conflict(rel, SET_ID)
            return DirMode(rel, mode, None, encode_attrs(attrs))
        before = stat_module.S_IMODE(real.st_mode)
        new_mode = self._mode(rel, mode, before)
        new_attrs = self._attrs(root_fd, parts, attrs)
        if isinstance(new_mode, Conflict):
            return new_mode
        if isinstance(new_attrs, Conflict):
            return new_attrs
        if new_mode is None and new_attrs is None:
            return None
        if new_mode is not None and new_mode & SET_ID_BITS & ~before:
            return Conflict(rel, SET_ID)
        step = DirMode(rel, before if new_mode is None else new_mode, before)
        if new_attrs is not None:
            step.attrs, step.attrs_before = encode_attrs(attrs), encode_attrs(new_attrs[1])
        return step

    def _mode(self, rel: str, mode: int, before: int) -> int | Conflict | None:
        """The mode the existing directory `rel` gets from an upper one with `mode`: None
        when it keeps its own `before` (copied up unchanged, or the same)."""
        if self.copied_modes.get(rel) == mode or before == mode:
            return None
        if self.modes_before.get(rel, before) != before:
            return Conflict(rel, MODE_CHANGED)
        return mode

    def _attrs(
        self, root_fd: int, parts: list[str], attrs: Attrs
    ) -> tuple[Attrs, Attrs] | Conflict | None:
        """(the attrs, the real ones until then) the existing directory at `parts` gets
        from an upper one with `attrs`: None when it keeps its own."""
        rel = "/".join(parts)
        digest = attrs_digest(attrs)
        if self.copied_attrs.get(rel) == digest:
            return None
        with open_chain(root_fd, parts[:-1]) as parent:
            real = attrs_at(parent, parts[-1], directory=True)
        if real is None or attrs_digest(real) == digest:
            return None
        if self.attrs_before.get(rel, attrs_digest(real)) != attrs_digest(real):
            return Conflict(rel, ATTRS_CHANGED)
        return attrs, real
