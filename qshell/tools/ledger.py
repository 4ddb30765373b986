"""ReadLedger: which files the model has read in this session, and what they held then.

`write_file` and `edit` may change an existing file only when the model has read it in
this session (whole or one page: `read_file` counts either way) and it still holds what
that read saw; a new file is written freely. `read_file` notes the SHA-256 and size of the
bytes it streamed (`Seen`), and a successful write or edit notes what it wrote, so the
model may go on editing its own work; `refusal` compares a file's current bytes with the
note and names what is wrong: never read, or changed since (another process, the user, a
command). The ledger is in memory only: a resumed session starts empty, so a file read
before the resume must be read again. Notes are kept per view: the views of the disk
(`RealView`, and an editor's `ClientView`) share the session's notes, while any other
view — a speculation's overlay — keeps its own, sees the session's beneath them, and never
adds to them; `adopt` makes an accepted speculation's notes the session's. It reads and
writes no file itself and decides no permission. Thread-safe: one lock guards the notes
(the loop's parallel reads and a speculation's thread share a ledger).
"""

from __future__ import annotations

import enum
import hashlib
import threading
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from qshell.tools.fileview import FileView, RealView

_Notes = dict[Path, "Seen"]


class Unread(enum.Enum):
    """Why the model does not know what an existing file holds."""

    NEVER_READ = "never_read"
    CHANGED = "changed"  # since it was last read


@dataclass(frozen=True, slots=True)
class Seen:
    """What a read (or a write) saw of a file: its size and the SHA-256 of its bytes."""

    size: int
    sha256: str

    @classmethod
    def of(cls, data: bytes) -> Seen:
        return cls(len(data), hashlib.sha256(data).hexdigest())


class Hashing:
    """A reader that hashes every byte read through it (`seen()` once it is done), so a
    tool streaming a file learns its fingerprint without reading it twice."""

    def __init__(self, fh: BinaryIO) -> None:
        self._fh = fh
        self._hash = hashlib.sha256()
        self._size = 0

    def read(self, size: int = -1) -> bytes:
        return self._took(self._fh.read(size))

    def readline(self, size: int = -1) -> bytes:
        return self._took(self._fh.readline(size))

    def seen(self) -> Seen:
        return Seen(self._size, self._hash.hexdigest())

    def _took(self, data: bytes) -> bytes:
        self._hash.update(data)
        self._size += len(data)
        return data


class ReadLedger:
    """The notes of one session (see the module's docstring)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._disk: _Notes = {}
        self._views: weakref.WeakKeyDictionary[FileView, _Notes] = weakref.WeakKeyDictionary()

    def note(self, view: FileView, path: Path, seen: Seen) -> None:
        """The model has seen `path` holding `seen` through `view` (a read, or its write)."""
        with self._lock:
            self._notes(view)[path] = seen

    def seen(self, view: FileView, path: Path) -> Seen | None:
        """The last note of `path` that `view` sees, or None when it was never read."""
        with self._lock:
            own = self._notes(view).get(path)
            return own if own is not None or _shares_disk(view) else self._disk.get(path)

    def problem(self, view: FileView, path: Path, current: bytes) -> Unread | None:
        """What stops an overwrite of `path`, which now holds `current`: None when the
        model has read it and it still holds what the read saw."""
        seen = self.seen(view, path)
        if seen is None:
            return Unread.NEVER_READ
        return Unread.CHANGED if seen != Seen.of(current) else None

    def adopt(self, view: FileView) -> None:
        """Make what was noted through `view` (an accepted speculation's overlay, now
        applied) the session's own."""
        with self._lock:
            self._disk.update(self._views.pop(view, {}))

    def _notes(self, view: FileView) -> _Notes:
        if _shares_disk(view):
            return self._disk
        return self._views.setdefault(view, {})


def _shares_disk(view: FileView) -> bool:
    """The disk and an editor's view of it hold the session's own notes."""
    return isinstance(view, RealView)
