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

import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from qshell.sandbox.jail import SandboxUnavailable

MAX_ENTRIES = 500_000
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
    return _walk(root, is_secret, Walk(max_entries), {}, [])


@dataclass(frozen=True, slots=True)
class Walk:
    """How far a walk goes: at most `max_entries` entries, `depth` levels below its root
    (None: all), never into a directory named in `skip`; `recheck` picks the files whose
    secrecy depends on their content."""

    max_entries: int = MAX_ENTRIES
    depth: int | None = None
    skip: frozenset[str] = frozenset()
    recheck: Callable[[Path], bool] = lambda path: False


BOUND = Walk(depth=BOUND_DEPTH, skip=PACKAGE_TREES)


def _walk(
    root: Path,
    is_secret: Callable[[Path], bool],
    walk: Walk,
    mtimes: dict[Path, int],
    volatile: list[Path],
) -> tuple[Path, ...]:
    """secret_paths as `walk` says, recording each directory's modification time in
    `mtimes` and the files `walk.recheck` picks in `volatile`."""
    found: list[Path] = []
    pending = [(root, 0)]
    seen = 0
    while pending:
        directory, level = pending.pop()
        try:
            mtimes[directory] = directory.stat().st_mtime_ns
            entries = list(os.scandir(directory))
        except OSError:
            continue  # unreadable here is unreadable in the jail too
        seen += len(entries)
        if seen > walk.max_entries:
            raise SandboxUnavailable(
                f"{root} has more than {walk.max_entries:,} files to check for secrets"
            )
        for entry in entries:
            path = Path(entry.path)
            if entry.is_symlink():
                target = Path(os.path.realpath(path))
                if is_secret(path) or is_secret(target):
                    found.append(target)
            elif is_secret(path):
                found.append(path)
            elif walk.recheck(path):
                volatile.append(path)
            elif entry.is_dir(follow_symlinks=False) and _deeper(walk, level, entry.name):
                pending.append((path, level + 1))
    return tuple(sorted(set(found)))


def _deeper(walk: Walk, level: int, name: str) -> bool:
    """Whether a walk at `level` goes on into the directory `name`."""
    if walk.depth is not None and level + 1 >= walk.depth:
        return False
    return name.lower() not in walk.skip


class SecretIndex:
    """secret_paths of one root as `walk` says, walked again only when its tree changed."""

    def __init__(
        self, root: Path, is_secret: Callable[[Path], bool], walk: Walk | None = None
    ) -> None:
        self.root = root
        self._is_secret = is_secret
        self._walk = walk or Walk()  # its recheck: files judged by content, asked each time
        self._lock = threading.Lock()
        self._mtimes: dict[Path, int] = {}
        self._found: tuple[Path, ...] | None = None
        self._volatile: tuple[Path, ...] = ()

    def paths(self) -> tuple[Path, ...]:
        with self._lock:
            if self._found is None or self._changed():
                mtimes: dict[Path, int] = {}
                volatile: list[Path] = []
                self._found = _walk(self.root, self._is_secret, self._walk, mtimes, volatile)
                self._mtimes, self._volatile = mtimes, tuple(volatile)
            again = tuple(p for p in self._volatile if self._is_secret(p))
            return tuple(sorted({*self._found, *again}))

    def _changed(self) -> bool:
        for directory, mtime in self._mtimes.items():
            try:
                if directory.stat().st_mtime_ns != mtime:
                    return True
            except OSError:
                return True
        return False
