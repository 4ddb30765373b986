"""Checkpoints: what each turn's file edits replaced, so that /undo can put it back.

Per turn it keeps, for every file an edit-kind tool wrote, the bytes and mode the file had
before the turn's first write to it (or that it did not exist), and, once the turn ends,
a hash of the content the turn left. `undo_last()` restores the most recent turn that
changed files; repeated calls walk further back. It must never lose a user's edit: a file
whose current content is not what the turn left (the user or another program changed it
since) is skipped and reported, not overwritten. It tracks only writes announced through
`save()` (the edit, write and move tools via the main ToolRunner), never shell commands,
and it never deletes directories. Everything lives in memory and lasts for the session.
Thread-safe: one lock guards all state, because tools may run in a pool.
"""

from __future__ import annotations

import hashlib
import os
import stat
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path

MAX_UNDO_TURNS = 100  # turns kept on the undo stack; older ones are forgotten
MAX_SAVED_FILE_BYTES = 32 * 1024 * 1024  # a larger file is noted but its bytes are not kept
_CHANGED_SINCE = "changed since the turn that wrote it (by you or another program); left as is"
_TOO_LARGE = f"it was over {MAX_SAVED_FILE_BYTES // (1024 * 1024)} MiB, too large to keep a copy of"
_UNREADABLE = "it could not be read before the turn wrote it, so no copy was kept"


@dataclass(frozen=True, slots=True)
class UndoReport:
    """What `undo_last()` did, with root-relative names (absolute outside the root)."""

    restored: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (name, reason)

    @property
    def empty(self) -> bool:
        return not (self.restored or self.deleted or self.skipped)


@dataclass(slots=True)
class _Saved:
    """One file as it was before the turn's first write to it."""

    data: bytes | None  # None: it did not exist (or no copy was kept, see `problem`)
    mode: int | None
    before: str | None  # hash of `data`; None when the file did not exist
    problem: str = ""  # why no copy was kept; undo then skips the file with this reason
    left: str | None = None  # hash of what the turn left, set by end_turn (None: absent)


def _hash_of(path: Path) -> str | None:
    """The SHA-256 of a file's content; None when it does not exist; raises OSError else."""
    try:
        with path.open("rb") as handle:
            return hashlib.file_digest(handle, "sha256").hexdigest()
    except FileNotFoundError:
        return None


def _hash_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class Checkpoints:
    """The undo stack of one session: one entry per turn that changed files."""

    def __init__(self, root: Path | None = None) -> None:
        """`root` names files in reports (default: the working directory, qshell's root)."""
        self.root = Path(root if root is not None else Path.cwd()).resolve()
        self._lock = threading.Lock()
        self._open: dict[Path, _Saved] | None = None
        self._stack: list[dict[Path, _Saved]] = []
        self.undone = 0  # turns undone so far

    def begin_turn(self) -> None:
        """Start recording a turn (an unfinished earlier turn is ended first)."""
        with self._lock:
            self._finish_open()
            self._open = {}

    def save(self, path: Path) -> None:
        """Record `path` as it is now, before a write; only the first call per turn counts.

        Called without `begin_turn()`, it opens a turn that the next `end_turn()` closes.
        Directories are not recorded. A file that cannot be read is recorded as unreadable
        (undo will skip it rather than guess).
        """
        path = Path(path)
        with self._lock:
            if self._open is None:
                self._open = {}
            if path in self._open:
                return
            try:
                info = path.stat()
            except FileNotFoundError:
                self._open[path] = _Saved(data=None, mode=None, before=None)
                return
            except OSError:
                self._open[path] = _Saved(None, None, None, problem=_UNREADABLE)
                return
            if stat.S_ISDIR(info.st_mode):
                return
            if info.st_size > MAX_SAVED_FILE_BYTES:
                self._open[path] = _Saved(None, None, None, problem=_TOO_LARGE)
                return
            try:
                data = path.read_bytes()
            except OSError:
                self._open[path] = _Saved(None, None, None, problem=_UNREADABLE)
                return
            self._open[path] = _Saved(data, stat.S_IMODE(info.st_mode), _hash_bytes(data))

    def end_turn(self) -> None:
        """Hash what the turn left; a turn that changed no file leaves no undo entry."""
        with self._lock:
            self._finish_open()

    @property
    def can_undo(self) -> bool:
        with self._lock:
            return bool(self._stack)

    def undo_last(self) -> UndoReport:
        """Restore the most recent turn that changed files (empty report when there is none).

        The entry is used up even when some files are skipped, so the next call goes one
        turn further back.
        """
        with self._lock:
            if not self._stack:
                return UndoReport()
            entry = self._stack.pop()
            self.undone += 1
            report = UndoReport()
            for path in sorted(entry):
                self._restore(path, entry[path], report)
            return report

    def clear(self) -> None:
        """Forget every checkpoint (for /clear)."""
        with self._lock:
            self._open = None
            self._stack.clear()

    def _finish_open(self) -> None:
        """Close the open turn: hash each file now and keep the ones the turn changed."""
        if self._open is None:
            return
        changed: dict[Path, _Saved] = {}
        for path, saved in self._open.items():
            try:
                saved.left = _hash_of(path)
            except OSError:
                saved.left = "unreadable"
            if saved.problem or saved.left != saved.before:
                changed[path] = saved
        self._open = None
        if changed:
            self._stack.append(changed)
            del self._stack[:-MAX_UNDO_TURNS]

    def _name(self, path: Path) -> str:
        if path == self.root or path.is_relative_to(self.root):
            return path.relative_to(self.root).as_posix() or "."
        return str(path)

    def _restore(self, path: Path, saved: _Saved, report: UndoReport) -> None:
        name = self._name(path)
        if saved.problem:
            report.skipped.append((name, saved.problem))
            return
        try:
            if path.is_dir():
                report.skipped.append((name, "it is a directory now; left as is"))
                return
            current = _hash_of(path)
        except OSError as exc:
            report.skipped.append((name, f"cannot read it: {exc.strerror or exc}"))
            return
        if current != saved.left:
            report.skipped.append((name, _CHANGED_SINCE))
            return
        try:
            if saved.data is None:
                path.unlink(missing_ok=True)
                report.deleted.append(name)
            else:
                _write_atomically(path, saved.data, saved.mode)
                report.restored.append(name)
        except OSError as exc:
            report.skipped.append((name, f"cannot write it: {exc.strerror or exc}"))


def _write_atomically(path: Path, data: bytes, mode: int | None) -> None:
    """Replace `path` with `data` (written beside it, then renamed) and set its mode."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".undo", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        if mode is not None:
            os.chmod(temp, mode)
        os.replace(temp, path)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise
