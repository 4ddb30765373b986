"""The check before an apply: may every written file go in, and is everything read unchanged?

`plan` compares each written file with the real tree — same content, mode, xattrs and ACLs
as when the overlay copied it (or still absent for a new one), no symlink on the way, and
writable by this user, as is its directory — each deleted entry (a `Removal`: file, symlink
or whole directory) with the digest it had when the speculation deleted it (trees.py), and
each file the speculation read with its fingerprint (reads.py). A file or directory at or
below a deleted one is new, in a directory the apply makes after the deletion (a replaced
directory); `made` names the directories that must exist even when empty. Each directory
gets the mode and attrs it has in the upper layer where the speculation changed them
(dirnotes.py: overlayfs copies a directory up with its new mode, xattrs and ACLs). A setuid
or setgid bit, or file capabilities, are never brought in from a speculation: a file or
directory carrying one is a conflict (a setgid bit a new directory inherits from its real
parent excepted). A destination with more than one hard link (the user's link made while the
speculation ran: a speculation's own change to such a file is refused, overlay_run.py and
upper.snapshot) is edited in place (`Step.in_place`), as a real edit would keep the link.
Files that are one inode in the upper layer (a command's `ln`: a kernel overlay keeps a link
made inside its layer) are joined as one `Step.link_group`, applied as one inode with every
name; a group that would also take in a destination with hard links of its own, or that has
a name the apply does not bring in, is a conflict. It returns the journal the apply would
follow and every conflict at once; it touches nothing. Write permission is judged from the
mode bits for this user's class (owner, group, other), not `os.access`: for root, which may
write anything, a file or directory with no write bit at all counts as read-only, since
someone made it so. Pure functions over directory descriptors; any thread.
"""

from __future__ import annotations

import os
import secrets
import stat as stat_module
from collections.abc import Sequence
from pathlib import Path

from qshell.overlay import reads
from qshell.overlay.dirfd import (
    BLOCKED,
    ESCAPED,
    READ_FLAGS,
    PathRefused,
    dir_info,
    hash_at,
    lstat_at,
    open_chain,
    open_dir,
    split_rel,
)
from qshell.overlay.dirnotes import DirNotes
from qshell.overlay.metadata import attrs_at, attrs_digest, has_capability
from qshell.overlay.reads import Fingerprint
from qshell.overlay.records import (
    APPEARED,
    ATTRS_CHANGED,
    BACKUP_PREFIX,
    BAD_COPY,
    CAPABILITY,
    CHANGED,
    DELETED,
    DIR_READ_ONLY,
    LINKED_TWICE,
    MODE_CHANGED,
    READ_CHANGED,
    READ_ONLY,
    SET_ID,
    SET_ID_BITS,
    STAGE_PREFIX,
    UNJOINED,
    Conflict,
    JournalState,
    Original,
    Phase,
    Removal,
    Step,
    Unlink,
)
from qshell.overlay.trees import TreeTooLarge, digest_at

_WRITE = 0o2
_WRITE_AND_SEARCH = 0o3


def may_write(info: os.stat_result, *, directory: bool = False) -> bool:
    """Whether this user may write the file (or make and replace entries in the directory)
    that `info` describes, by its mode bits."""
    mode = info.st_mode
    euid = os.geteuid()
    if euid == 0:
        return bool(mode & 0o222)
    if info.st_uid == euid:
        bits = (mode >> 6) & 0o7
    elif info.st_gid == os.getegid() or info.st_gid in os.getgroups():
        bits = (mode >> 3) & 0o7
    else:
        bits = mode & 0o7
    want = _WRITE_AND_SEARCH if directory else _WRITE
    return bits & want == want


def _inspect(base: int, parts: Sequence[str]) -> tuple[list[str], os.stat_result | None]:
    """(missing ancestors, lstat of the leaf or None); PathRefused for a symlink on the way."""
    for depth in range(1, len(parts)):
        info = lstat_at(base, "/".join(parts[:depth]))
        if info is None:
            return ["/".join(parts[:i]) for i in range(depth, len(parts))], None
        if not stat_module.S_ISDIR(info.st_mode):
            raise PathRefused(ESCAPED if stat_module.S_ISLNK(info.st_mode) else BLOCKED)
    leaf = lstat_at(base, "/".join(parts))
    if leaf is not None and stat_module.S_ISLNK(leaf.st_mode):
        raise PathRefused(ESCAPED)
    return [], leaf


def _check(
    root_fd: int, upper_fd: int, item: Original, token: str, removed: set[str]
) -> Conflict | tuple[Step, list[str]]:
    """The journal step for one file and its missing directories, or why it cannot apply."""
    parts = split_rel(item.rel)
    try:
        copy = _inspect(upper_fd, parts)[1]
    except PathRefused:
        copy = None
    if copy is None or not stat_module.S_ISREG(copy.st_mode):
        return Conflict(item.rel, BAD_COPY)
    new_mode = stat_module.S_IMODE(copy.st_mode)  # as the speculation left it (a chmod too)
    if copy.st_mode & SET_ID_BITS or (item.mode or 0) & SET_ID_BITS:
        return Conflict(item.rel, SET_ID)
    if _capable(upper_fd, item.rel):
        return Conflict(item.rel, CAPABILITY)
    fresh = _fresh_dirs(parts, removed)
    if fresh is not None:  # in a directory the apply makes after a deletion
        return Step(item.rel, f"{STAGE_PREFIX}{token}", None, new_mode, None), fresh
    try:
        missing, info = _inspect(root_fd, parts)
    except PathRefused as exc:
        return Conflict(item.rel, exc.reason)
    parent = dir_info(root_fd, parts[: len(parts) - 1 - len(missing)])
    if parent is None or not may_write(parent, directory=True):
        return Conflict(item.rel, DIR_READ_ONLY)
    staged = f"{STAGE_PREFIX}{token}"
    if not item.existed:
        if info is not None:
            return Conflict(item.rel, APPEARED)
        return Step(item.rel, staged, None, new_mode, None), missing
    if info is None:
        return Conflict(item.rel, DELETED)
    found = hash_at(root_fd, item.rel)
    if found is None or found[0] != item.sha256:
        return Conflict(item.rel, CHANGED)
    mode = stat_module.S_IMODE(found[1].st_mode)
    if mode != item.mode:
        return Conflict(item.rel, MODE_CHANGED)
    if item.attrs is not None and attrs_digest(attrs_at(root_fd, item.rel) or {}) != item.attrs:
        return Conflict(item.rel, ATTRS_CHANGED)  # the user's setfattr, setfacl: it stays
    if not may_write(found[1]):
        return Conflict(item.rel, READ_ONLY)
    backup = f"{BACKUP_PREFIX}{token}"
    step = Step(item.rel, staged, backup, new_mode, item.sha256, expect_mode=mode)
    if found[1].st_nlink > 1:  # a hard link: written in place, as a real edit keeps it
        step.in_place, step.dest_ino = True, found[1].st_ino
    return step, []


def _capable(upper_fd: int, rel: str) -> bool:
    try:
        fd = os.open(rel, READ_FLAGS | os.O_NONBLOCK, dir_fd=upper_fd)
    except OSError:
        return False
    try:
        return has_capability(fd)
    finally:
        os.close(fd)


def _join_links(upper_fd: int, steps: Sequence[Step], stopped: bool) -> list[Conflict]:
    """Give the steps whose upper copies are one inode their `link_group` (the first of
    them); the conflicts of a group that cannot be applied as one inode. A group with a
    name the plan holds no step for (`stopped`: one is a conflict already) is one; so is a
    group with a destination edited in place, whose other names the apply cannot join."""
    groups: dict[int, list[Step]] = {}
    links: dict[int, int] = {}
    for step in steps:
        info = lstat_at(upper_fd, step.rel)
        if info is not None and stat_module.S_ISREG(info.st_mode) and info.st_nlink > 1:
            groups.setdefault(info.st_ino, []).append(step)
            links[info.st_ino] = info.st_nlink
    conflicts: list[Conflict] = []
    for inode, members in groups.items():
        if len(members) != links[inode]:
            if not stopped:
                conflicts += [Conflict(s.rel, UNJOINED) for s in members]
        elif any(s.in_place for s in members):
            conflicts += [Conflict(s.rel, LINKED_TWICE) for s in members if s.in_place]
        else:
            for step in members:
                step.link_group = members[0].rel
    return conflicts


def _fresh_dirs(parts: Sequence[str], removed: set[str]) -> list[str] | None:
    """When `parts` is at or below a deleted entry: the directories from that entry down to
    its parent, which the apply makes (else None)."""
    for depth in range(1, len(parts) + 1):
        if "/".join(parts[:depth]) in removed:
            return ["/".join(parts[:i]) for i in range(depth, len(parts))]
    return None


def _check_removal(root_fd: int, item: Removal, token: str) -> Conflict | Unlink:
    """The journal step that deletes one real entry, or why it cannot."""
    parts = split_rel(item.rel)
    try:
        with open_chain(root_fd, parts[:-1]) as parent:
            if not may_write(os.fstat(parent), directory=True):
                return Conflict(item.rel, DIR_READ_ONLY)
            found = digest_at(parent, parts[-1])
    except FileNotFoundError:
        return Conflict(item.rel, DELETED)
    except TreeTooLarge:
        return Conflict(item.rel, CHANGED)
    if found is None:
        return Conflict(item.rel, DELETED)
    if found != item.digest:
        return Conflict(item.rel, CHANGED)
    return Unlink(item.rel, f"{BACKUP_PREFIX}{token}", item.digest)


def _check_made(root_fd: int, rel: str, removed: set[str]) -> Conflict | list[str]:
    """The directories to make so that directory `rel` exists, or why it cannot."""
    parts = split_rel(rel)
    fresh = _fresh_dirs(parts, removed)
    if fresh is not None:
        return [*fresh, rel]
    missing, info = _inspect(root_fd, parts)
    if info is None:
        return [*missing, rel]
    if not stat_module.S_ISDIR(info.st_mode):
        return Conflict(rel, APPEARED)
    return []


def plan(
    root: Path,
    upper: Path,
    pending: Sequence[Original],
    read: Sequence[Fingerprint] = (),
    removals: Sequence[Removal] = (),
    made: Sequence[str] = (),
    notes: DirNotes | None = None,
) -> tuple[JournalState, list[Conflict]]:
    """The journal an apply would follow, and every conflict that stops it. Touches nothing.

    `read` holds the fingerprints of the real files the speculation read: any that changed
    is a conflict too; `removals` the real entries it deleted, `made` the directories it
    made (empty ones included), `notes` what the overlay knows of its directories' modes and
    attrs from before the speculation changed them (dirnotes.py).
    """
    token = secrets.token_hex(6)
    state = JournalState(str(root), Phase.STAGING, [], [])
    conflicts: list[Conflict] = []
    dirs: dict[str, None] = {}
    removed = {r.rel for r in removals}
    with open_dir(root) as root_fd, open_dir(upper) as upper_fd:
        for index, gone in enumerate(removals):
            try:
                step = _check_removal(root_fd, gone, f"{token}-r{index}")
            except PathRefused as exc:
                step = Conflict(gone.rel, exc.reason)
            if isinstance(step, Conflict):
                conflicts.append(step)
            else:
                state.removals.append(step)
        for index, item in enumerate(pending):
            try:
                result = _check(root_fd, upper_fd, item, f"{token}-{index}", removed)
            except PathRefused as exc:
                result = Conflict(item.rel, exc.reason)
            if isinstance(result, Conflict):
                conflicts.append(result)
                continue
            state.files.append(result[0])
            dirs.update(dict.fromkeys(result[1]))
        conflicts += _join_links(upper_fd, state.files, bool(conflicts))
        existing: list[str] = []
        for rel in made:
            try:
                needed = _check_made(root_fd, rel, removed)
            except PathRefused as exc:
                needed = Conflict(rel, exc.reason)
            if isinstance(needed, Conflict):
                conflicts.append(needed)
            elif needed:
                dirs.update(dict.fromkeys(needed))
            else:
                existing.append(rel)
        notes = DirNotes() if notes is None else notes
        state.modes, refused = notes.changes(root_fd, upper_fd, list(dirs), existing)
        conflicts += refused
        stopped = {c.path for c in conflicts}
        for print_ in read:
            if print_.rel not in stopped and not reads.unchanged(root_fd, print_):
                conflicts.append(Conflict(print_.rel, READ_CHANGED))
                stopped.add(print_.rel)
    state.dirs = sorted(dirs, key=lambda d: d.count("/"))
    return state, conflicts
