"""The base of a speculated command: the project tree as it was just before the command ran.

A command run on the kernel overlay (followup/overlay_run.py) may take a while, and the
user may save, create or delete files meanwhile; what the command changed is only known
afterwards. So before it starts, `take` records in one `scandir` walk that follows no
symlink every entry of the project — its type, inode, size, mtime_ns, ctime_ns and mode,
and for a directory its listing and attrs (the user's xattrs and ACLs, metadata.py: a
file's ctime tells a change of its own) — except what lies inside a `.git` directory (protected:
no command's change there is taken in, and git's own state is fingerprinted apart,
followup/gate.py). When the overlay takes the command's layer in (`Overlay.absorb`),
`Base.changed` compares a path the command changed, deleted or created — with every
descendant of a deleted or replaced directory — against the live tree: the first one that
differs is a conflict (the user's version stays). A directory counts as unchanged while
its type, inode, mode, attrs and listing are (its timestamps move with any temporary file
made and removed inside). Everything a base holds is also what the command may read
(`prints`: files by their stat signatures, symlinks by their targets, directories by
their names). Pure functions over the real tree; any thread.
"""

from __future__ import annotations

import contextlib
import os
import stat as stat_module
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from qshell.overlay.dirfd import PathRefused, lstat_at, open_chain, open_dir, split_rel
from qshell.overlay.metadata import attrs_at, attrs_digest
from qshell.overlay.reads import (
    MAX_TREE_FILES,
    SKIPPED_DIRS,
    Fingerprint,
    Signature,
    TooManyReads,
    of_link,
    of_listing,
)
from qshell.overlay.upper import DIR, UpperEntry, covered

BASE_CHANGED = "changed while the speculated command ran"


class Stamp(NamedTuple):
    """One entry of the tree as the base saw it."""

    mode: int  # st_mode: type and permission bits
    ino: int
    size: int
    mtime_ns: int
    ctime_ns: int

    @property
    def signature(self) -> Signature:
        return (self.ino, self.size, self.mtime_ns, self.ctime_ns)


def stamp(info: os.stat_result) -> Stamp:
    return Stamp(info.st_mode, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)


def same(known: Stamp | None, info: os.stat_result | None) -> bool:
    """Whether the live entry `info` (None: absent) is still the one the base recorded."""
    if known is None or info is None:
        return known is None and info is None
    if known.mode != info.st_mode or known.ino != info.st_ino:
        return False
    if stat_module.S_ISDIR(info.st_mode):
        return True  # its listing tells the rest
    return (known.size, known.mtime_ns, known.ctime_ns) == (
        info.st_size,
        info.st_mtime_ns,
        info.st_ctime_ns,
    )


@dataclass
class Base:
    """Every entry below a root by root-relative path ("" is the root), and each directory's
    names (None: not walked — unreadable, or a `.git` directory) and attrs digest."""

    stamps: dict[str, Stamp] = field(default_factory=dict)
    listings: dict[str, frozenset[str] | None] = field(default_factory=dict)
    attrs: dict[str, str] = field(default_factory=dict)

    def _attrs_moved(self, parent: int, name: str, rel: str) -> bool:
        """Whether the directory `name` of `parent` has other attrs than the base saw."""
        found = attrs_at(parent, name, directory=True)
        return rel in self.attrs and attrs_digest(found or {}) != self.attrs[rel]

    def files(self) -> Iterator[tuple[str, Signature]]:
        """(path, stat signature) of every regular file the base holds."""
        for rel, known in self.stamps.items():
            if stat_module.S_ISREG(known.mode):
                yield rel, known.signature

    def links(self) -> Iterator[str]:
        """The path of every symlink the base holds."""
        return (rel for rel, known in self.stamps.items() if stat_module.S_ISLNK(known.mode))

    def prints(self, root: Path) -> Iterator[Fingerprint]:
        """What a command may read of the tree at `root` as the base saw it: each file by
        its stat signature, each symlink by its target, each directory walked by its names."""
        for rel, signature in self.files():
            yield Fingerprint(rel, 0, "", False, signature)
        for rel in self.links():
            with contextlib.suppress(OSError):
                yield of_link(rel, os.readlink(root / rel))
        for rel, names in self.listings.items():
            if names is not None:
                yield of_listing(rel, names)

    def changed(self, root_fd: int, rel: str, *, whole: bool = True) -> str | None:
        """The first path at `rel` — or, when `whole`, at or below it — whose live entry is
        not what the base recorded (gone, new, another inode, resized, touched, chmodded, a
        listing grown or shrunk); None when all are as they were."""
        parts = split_rel(rel)
        try:
            with open_chain(root_fd, parts[:-1]) as parent:
                info = lstat_at(parent, parts[-1])
                if not same(self.stamps.get(rel), info):
                    return rel
                if info is None or not stat_module.S_ISDIR(info.st_mode):
                    return None
                if self._attrs_moved(parent, parts[-1], rel):
                    return rel
                if not whole:
                    return None
                with open_chain(parent, parts[-1:]) as fd:
                    return self._tree_changed(fd, rel)
        except (FileNotFoundError, NotADirectoryError):
            return rel if rel in self.stamps else None
        except (PathRefused, OSError):
            return rel  # a parent became a symlink, or it cannot be read: not as it was

    def _tree_changed(self, top: int, top_rel: str) -> str | None:
        stack: list[tuple[int, str]] = [(os.dup(top), top_rel)]
        try:
            while stack:
                fd, rel = stack.pop()
                try:
                    found = self._dir_changed(fd, rel, stack)
                finally:
                    os.close(fd)
                if found is not None:
                    return found
            return None
        finally:
            for fd, _ in stack:
                os.close(fd)

    def _dir_changed(self, fd: int, rel: str, stack: list[tuple[int, str]]) -> str | None:
        """The first differing entry of directory `rel` (open at `fd`); its subdirectories
        are pushed on `stack`, open."""
        listing = self.listings.get(rel)
        if listing is None:
            return None if rel in self.listings else rel
        names = os.listdir(fd)
        if frozenset(names) != listing:
            return rel
        for name in sorted(names):
            child = f"{rel}/{name}"
            info = lstat_at(fd, name)
            if not same(self.stamps.get(child), info):
                return child
            if info is not None and stat_module.S_ISDIR(info.st_mode):
                if self._attrs_moved(fd, name, child):
                    return child
                with open_chain(fd, [name]) as sub:
                    stack.append((os.dup(sub), child))
        return None


def take(root: Path, stop: Callable[[], bool]) -> Base:
    """The base of the tree at `root`; TooManyReads past MAX_TREE_FILES regular files (a
    command reading them all could not be checked), a partial base once `stop()` says so."""
    base = Base()
    base.stamps[""] = stamp(os.lstat(root))
    stack, count = [(root, "")], 0
    while stack:
        directory, rel = stack.pop()
        try:
            with os.scandir(directory) as entries:
                found = list(entries)
        except OSError:
            base.listings[rel] = None  # unreadable: the command cannot read it either
            continue
        base.listings[rel] = frozenset(entry.name for entry in found)
        for entry in found:
            child = f"{rel}/{entry.name}" if rel else entry.name
            try:
                info = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            base.stamps[child] = stamp(info)
            if stat_module.S_ISDIR(info.st_mode):
                base.attrs[child] = attrs_digest(attrs_at(None, entry.path, directory=True) or {})
                if entry.name in SKIPPED_DIRS:
                    base.listings[child] = None
                else:
                    stack.append((Path(entry.path), child))
            elif stat_module.S_ISREG(info.st_mode):
                count += 1
                if count > MAX_TREE_FILES:
                    raise TooManyReads(f"it reads more than {MAX_TREE_FILES} files below {root}")
        if stop():
            break
    return base


def first_change(root: Path, base: Base, entries: Sequence[UpperEntry]) -> str | None:
    """The first path a command's layer `entries` touch that is not as `base` recorded it
    in the live tree at `root`: a written file, a whiteout or a replaced directory with
    everything below it, and for a plain directory the directory itself; None if none."""
    deep: set[str] = set()
    with open_dir(root) as root_fd:
        for entry in entries:
            if covered(entry.rel, deep):
                continue  # checked with the deleted or replaced directory above it
            whole = entry.kind != DIR or entry.opaque
            found = base.changed(root_fd, entry.rel, whole=whole)
            if found is not None:
                return found
            if whole:
                deep.add(entry.rel)
    return None
