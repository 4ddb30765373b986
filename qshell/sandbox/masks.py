"""secret_paths: what a jail must hide of a project — every secret-looking file or directory.

It walks the whole tree under the root, ignored files included (a `.env` is usually
git-ignored), never following a symlink but resolving each one: a link to a secret file
gets its target masked (outside the project the jail's empty home or /tmp may hide it
already). What is secret is the caller's rule (`is_secret`, the read-scope rule of
tools/paths.py), so the sandbox and the proof hide the same files. A tree larger than
`max_entries` is refused rather than masked in part. `SecretIndex` keeps the answer for
one root and walks again only when a directory's modification time changed (a file was
added, removed or renamed); files whose secrecy depends on their content (`recheck`, a
git config holding a credential) are judged again every time. Pure apart from reading
directories; `SecretIndex` is guarded by a lock.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path

from qshell.sandbox.jail import SandboxUnavailable

MAX_ENTRIES = 500_000


def secret_paths(
    root: Path, is_secret: Callable[[Path], bool], *, max_entries: int = MAX_ENTRIES
) -> tuple[Path, ...]:
    """The secret files and directories under `root` (a secret directory is listed, not
    what is inside it), and the secret targets of the symlinks there."""
    return _walk(root, is_secret, max_entries, {}, lambda path: False, [])


def _walk(
    root: Path,
    is_secret: Callable[[Path], bool],
    max_entries: int,
    mtimes: dict[Path, int],
    recheck: Callable[[Path], bool],
    volatile: list[Path],
) -> tuple[Path, ...]:
    """secret_paths, recording each directory's modification time in `mtimes` and the
    files `recheck` picks in `volatile`."""
    found: list[Path] = []
    pending = [root]
    seen = 0
    while pending:
        directory = pending.pop()
        try:
            mtimes[directory] = directory.stat().st_mtime_ns
            entries = list(os.scandir(directory))
        except OSError:
            continue  # unreadable here is unreadable in the jail too
        seen += len(entries)
        if seen > max_entries:
            raise SandboxUnavailable(
                f"{root} has more than {max_entries:,} files to check for secrets"
            )
        for entry in entries:
            path = Path(entry.path)
            if entry.is_symlink():
                target = Path(os.path.realpath(path))
                if is_secret(path) or is_secret(target):
                    found.append(target)
            elif is_secret(path):
                found.append(path)
            elif recheck(path):
                volatile.append(path)
            elif entry.is_dir(follow_symlinks=False):
                pending.append(path)
    return tuple(sorted(set(found)))


class SecretIndex:
    """secret_paths of one root, walked again only when its tree changed."""

    def __init__(
        self,
        root: Path,
        is_secret: Callable[[Path], bool],
        *,
        recheck: Callable[[Path], bool] = lambda path: False,
        max_entries: int = MAX_ENTRIES,
    ) -> None:
        self.root = root
        self._is_secret = is_secret
        self._recheck = recheck  # files judged by content: is_secret asked each time
        self._max_entries = max_entries
        self._lock = threading.Lock()
        self._mtimes: dict[Path, int] = {}
        self._found: tuple[Path, ...] | None = None
        self._volatile: tuple[Path, ...] = ()

    def paths(self) -> tuple[Path, ...]:
        with self._lock:
            if self._found is None or self._changed():
                mtimes: dict[Path, int] = {}
                volatile: list[Path] = []
                self._found = _walk(
                    self.root, self._is_secret, self._max_entries, mtimes, self._recheck, volatile
                )
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
