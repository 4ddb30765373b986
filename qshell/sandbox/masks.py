"""secret_paths: what a jail must hide of a directory it shows — every secret-looking entry.

For the project it walks the whole tree under the root, ignored files included (a `.env`
is usually git-ignored), never following a symlink but resolving each one: a link to a
secret file gets its target masked (outside the project the jail's empty home or /tmp may
hide it already). A directory the jail binds back (a virtual environment, a toolchain) is
walked `BOUND_DEPTH` levels deep, not into the trees of installed packages
(`PACKAGE_TREES`: `lib/`, `site-packages/`, `node_modules/`, …), which is where tools keep
their configuration (`pip.conf` at a venv's top, `etc/npmrc` of a Node install under
`~/.nvm/versions/node/*/`) at a cost of milliseconds rather than seconds. What is secret
is the caller's rule (`is_secret`, the read-scope rule of tools/paths.py over
qshell/secret_names.py), so the sandbox and the proof hide the same files. A tree larger
than `max_entries` is refused rather than masked in part. `SecretIndex` keeps the answer for
one root and walks again only when a directory's modification time changed (a file was
added, removed or renamed); files whose secrecy depends on their content (`recheck`, a
git config holding a credential) are judged again every time. Pure apart from reading
directories; `SecretIndex` is guarded by a lock.
"""

from __future__ import annotations

import contextlib
import os
import stat
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from qshell.sandbox.jail import SandboxUnavailable

MAX_ENTRIES = 500_000
REJUDGE_S = 0.2  # how long a content verdict stands before its file is looked at again
# a directory below the root holding one of these, as its tool writes it, is an installed
# environment or a tool's cache (the CACHEDIR.TAG convention: mypy, pytest, ruff), rebuilt
# from files judged themselves: what is below it is not judged by content
CACHEDIR_SIGNATURE = b"Signature: 8a477f597d28d172789f06886806bc55"
CONTENT_SKIPPED = frozenset({"node_modules"})
GIT_PACKED = frozenset({"objects"})  # of `.git`: compressed; git_history.py judges them
Signature = tuple[int, int, int, int, int]
BOUND_DEPTH = 5  # the levels of a bound directory walked: `versions/node/v22/etc/npmrc`
# directories of a bound toolchain that hold installed packages' own files, not walked
PACKAGE_TREES = frozenset(
    {"lib", "lib32", "lib64", "libexec", "include", "share", "site-packages", "node_modules"}
    | {"__pycache__", "objects", "man", "doc", "docs", "src", "test", "tests"}
)


def secret_paths(
    root: Path, is_secret: Callable[[Path], bool], *, max_entries: int = MAX_ENTRIES
) -> tuple[Path, ...]:
    """The secret files and directories under `root` (a secret directory is listed, not
    what is inside it), and the secret targets of the symlinks there."""
    return tuple(sorted(_walk(root, is_secret, Walk(max_entries)).found))


# judges whether a regular file holds a secret, from its path and lstat
ContentJudge = Callable[[Path, os.stat_result], bool]


@dataclass(frozen=True, slots=True)
class Walk:
    """How far a walk goes: at most `max_entries` entries, `depth` levels below its root
    (None: all), never into a directory named in `skip`; `recheck` picks the files whose
    secrecy depends on their content and is judged by the caller's rule each time,
    `content` judges every other regular file by what it holds (`CONTENT_SKIPPED` apart)."""

    max_entries: int = MAX_ENTRIES
    depth: int | None = None
    skip: frozenset[str] = frozenset()
    recheck: Callable[[Path], bool] = lambda path: False
    content: ContentJudge | None = None


BOUND = Walk(depth=BOUND_DEPTH, skip=PACKAGE_TREES)


@dataclass
class _Tree:
    """What one walk found: the secrets (`found`, those of them found by content in
    `by_content`), each directory's modification time, the files `recheck` picked, the
    files judged by content with their stat signatures, and the regular files by inode."""

    found: set[Path] = field(default_factory=set)
    by_content: set[Path] = field(default_factory=set)
    mtimes: dict[Path, int] = field(default_factory=dict)
    volatile: list[Path] = field(default_factory=list)
    watched: dict[Path, Signature] = field(default_factory=dict)
    inodes: dict[int, list[Path]] = field(default_factory=dict)


def _walk(root: Path, is_secret: Callable[[Path], bool], walk: Walk) -> _Tree:
    """secret_paths as `walk` says, with what SecretIndex needs to tell when it changed."""
    tree = _Tree()
    pending = [(root, 0, walk.content is not None)]
    seen = 0
    while pending:
        directory, level, judged = pending.pop()
        try:
            tree.mtimes[directory] = directory.stat().st_mtime_ns
            entries = list(os.scandir(directory))
        except OSError:
            continue  # unreadable here is unreadable in the jail too
        seen += len(entries)
        if seen > walk.max_entries:
            raise SandboxUnavailable(
                f"{root} has more than {walk.max_entries:,} files to check for secrets"
            )
        judged = judged and (directory == root or not any(map(_installed_mark, entries)))
        for entry in entries:
            if _secret_entry(entry, is_secret, walk, tree, judged):
                continue
            if entry.is_dir(follow_symlinks=False) and _deeper(walk, level, entry.name):
                inside = judged and not _content_skipped(directory, entry.name)
                pending.append((Path(entry.path), level + 1, inside))
    _add_links(tree)
    return tree


def _secret_entry(
    entry: os.DirEntry[str],
    is_secret: Callable[[Path], bool],
    walk: Walk,
    tree: _Tree,
    judged: bool,
) -> bool:
    """Note `entry` in `tree`; True when the walk has nothing more to do with it (a secret,
    a symlink, a file)."""
    path = Path(entry.path)
    if entry.is_symlink():
        target = Path(os.path.realpath(path))
        if is_secret(path) or is_secret(target):
            tree.found.add(target)
        return True
    if is_secret(path):
        tree.found.add(path)
        return True
    if walk.recheck(path):
        tree.volatile.append(path)
        return True
    if not entry.is_file(follow_symlinks=False):
        return False
    tree.inodes.setdefault(entry.inode(), []).append(path)
    if judged and walk.content is not None:
        try:
            info = entry.stat(follow_symlinks=False)
        except OSError:
            return True
        tree.watched[path] = signature(info)
        if walk.content(path, info):
            tree.found.add(path)
            tree.by_content.add(path)
    return True


def _installed_mark(entry: os.DirEntry[str]) -> bool:
    """Whether `entry` marks its directory as an installed environment or a cache, written
    as the tool that makes one writes it: a `pyvenv.cfg` file naming its interpreter's
    `home`, a `CACHEDIR.TAG` file opening with the convention's signature, a `conda-meta`
    directory with its `history`. (A name alone would let any directory opt out.)"""
    name = entry.name
    try:
        if name == "conda-meta":
            return entry.is_dir(follow_symlinks=False) and os.path.isfile(
                os.path.join(entry.path, "history")
            )
        if name not in ("pyvenv.cfg", "CACHEDIR.TAG") or not entry.is_file(follow_symlinks=False):
            return False
        with open(entry.path, "rb") as source:
            head = source.read(4096)
    except OSError:
        return False
    if name == "CACHEDIR.TAG":
        return head.startswith(CACHEDIR_SIGNATURE)
    return any(line.split(b"=")[0].strip() == b"home" for line in head.splitlines())


def _content_skipped(directory: Path, name: str) -> bool:
    """Whether the files below `directory/name` are left unjudged by content: installed
    packages (`node_modules`; a virtual environment is told by its `pyvenv.cfg`, a cache by
    its `CACHEDIR.TAG`) and git's compressed objects."""
    if name in CONTENT_SKIPPED:
        return True
    return directory.name == ".git" and name in GIT_PACKED


def _add_links(tree: _Tree) -> None:
    """Add to `tree.found` every other name of a secret file with more than one hard link:
    `ln .env notes.txt` makes `notes.txt` the same file — masked whole, as `.env` is, even
    where what it holds was found by content. (A name outside the project is not known:
    `ln ~/.pgpass pg.txt` is judged by what it holds, as any file; masking every file with
    a link elsewhere would hide whole trees a backup or a package store links.)"""
    for path in list(tree.found - tree.by_content):
        try:
            info = path.lstat()
        except OSError:
            continue
        if not stat.S_ISREG(info.st_mode) or info.st_nlink < 2:
            continue
        for other in tree.inodes.get(info.st_ino, ()):
            with contextlib.suppress(OSError):
                if other.lstat().st_dev == info.st_dev:
                    tree.found.add(other)
                    tree.by_content.discard(other)


def signature(info: os.stat_result) -> Signature:
    """What changes whenever a file's bytes may have changed."""
    return (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)


def _deeper(walk: Walk, level: int, name: str) -> bool:
    """Whether a walk at `level` goes on into the directory `name`."""
    if walk.depth is not None and level + 1 >= walk.depth:
        return False
    return name.lower() not in walk.skip


class SecretIndex:
    """secret_paths of one root as `walk` says, walked again only when its tree changed;
    the files judged by content are looked at again (stat, and read when changed) at most
    every `REJUDGE_S` seconds."""

    def __init__(
        self, root: Path, is_secret: Callable[[Path], bool], walk: Walk | None = None
    ) -> None:
        self.root = root
        self._is_secret = is_secret
        self._walk = walk or Walk()  # its recheck: files judged by content, asked each time
        self._lock = threading.Lock()
        self._tree: _Tree | None = None
        self._judged_at = 0.0

    def paths(self) -> tuple[Path, ...]:
        return self.snapshot()[0]

    def by_content(self) -> frozenset[Path]:
        """The files of `paths` that are secret for what they hold, not for their name."""
        return self.snapshot()[1]

    def snapshot(self) -> tuple[tuple[Path, ...], frozenset[Path]]:
        """`paths` and `by_content` from one look at the tree (each look stats every
        directory of it)."""
        with self._lock:
            tree = self._current()
            again = tuple(p for p in tree.volatile if self._is_secret(p))
            return tuple(sorted({*tree.found, *again})), frozenset(tree.by_content)

    def _current(self) -> _Tree:
        tree = self._tree
        if tree is None or self._changed(tree):
            tree = self._tree = _walk(self.root, self._is_secret, self._walk)
            self._judged_at = time.monotonic()
        elif tree.watched and time.monotonic() - self._judged_at >= REJUDGE_S:
            self._rejudge(tree)
            self._judged_at = time.monotonic()
        return tree

    def _rejudge(self, tree: _Tree) -> None:
        """Judge again each file written in place since it was last judged."""
        judge = self._walk.content
        assert judge is not None
        for path, mark in tree.watched.items():
            try:
                info = path.lstat()
            except OSError:
                continue  # gone: its directory changed, so the next look walks again
            if signature(info) == mark:
                continue
            tree.watched[path] = signature(info)
            if judge(path, info):
                tree.found.add(path)
                tree.by_content.add(path)
            else:
                tree.found.discard(path)
                tree.by_content.discard(path)

    @staticmethod
    def _changed(tree: _Tree) -> bool:
        for directory, mtime in tree.mtimes.items():
            try:
                if directory.stat().st_mtime_ns != mtime:
                    return True
            except OSError:
                return True
        return False
