"""Digests of what a deletion removes: a file, a symlink or a whole directory tree.

A deletion is applied only if the real entry still is what it was when the speculation
deleted it, so `digest_at` sums up an entry — a file's content and mode, a symlink's
target, a directory's names and the digest of each entry below it — read through
descriptors that never follow a symlink (dirfd.py). A tree of more than `MAX_TREE_ENTRIES`
entries raises `TreeTooLarge` (the caller makes it a boundary, as for reads). Pure
functions over directory descriptors; any thread.
"""

from __future__ import annotations

import hashlib
import os
import stat as stat_module

from qshell.overlay.dirfd import hash_at, lstat_at, open_chain
from qshell.overlay.errors import OverlayError

MAX_TREE_ENTRIES = 50_000  # entries one deleted directory may hold


class TreeTooLarge(OverlayError):
    """A deleted directory holds more entries than a digest covers."""


def digest_at(parent: int, name: str, *, limit: int = MAX_TREE_ENTRIES) -> str | None:
    """The digest of entry `name` of the directory `parent`; None when there is none."""
    budget = [limit]
    return _digest(parent, name, budget)


def _digest(parent: int, name: str, budget: list[int]) -> str | None:
    info = lstat_at(parent, name)
    if info is None:
        return None
    budget[0] -= 1
    if budget[0] < 0:
        raise TreeTooLarge(f"{name} holds more than {MAX_TREE_ENTRIES} entries")
    mode = info.st_mode
    if stat_module.S_ISREG(mode):
        found = hash_at(parent, name)
        if found is None:
            return None
        return f"file:{stat_module.S_IMODE(found[1].st_mode):o}:{found[0]}"
    if stat_module.S_ISLNK(mode):
        target = os.readlink(name, dir_fd=parent)
        return "link:" + hashlib.sha256(os.fsencode(target)).hexdigest()
    if not stat_module.S_ISDIR(mode):
        return f"special:{stat_module.S_IFMT(mode):o}"
    tree = hashlib.sha256()
    with open_chain(parent, [name]) as fd:
        for child in sorted(os.listdir(fd)):
            tree.update(os.fsencode(child) + b"\0")
            tree.update((_digest(fd, child, budget) or "gone").encode() + b"\n")
    return f"dir:{stat_module.S_IMODE(mode):o}:{tree.hexdigest()}"
