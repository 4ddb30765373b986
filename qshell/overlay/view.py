"""`OverlayView`: the FileView a speculation's tools get, the real tree with its writes on top.

A written file resolves to its copy in `upper/`, a listing merges both layers (the real
directory's entry stands for a directory both have), a deleted entry — and everything inside
a deleted or replaced directory that the overlay does not hold — is missing, as on the
kernel overlay, and everything else reads the real tree. Writes go to `Overlay.write`.
Reading a real file's content — whole (`read_bytes`) or streamed (`open_read`, so a reader
takes only what it needs, as on the real disk) — records its fingerprint with the overlay
(reads.py), and that of each symlink on its way; listings and stats are not recorded. Reads of `upper/` go through descriptors
that never follow a symlink (else OverlayEscape), and no open blocks on a FIFO swapped in
after a check. Thread-safe as the Overlay it wraps: copies are renamed in whole, so a read
sees one version.
"""

from __future__ import annotations

import contextlib
import errno
import io
import os
import stat as stat_module
from contextlib import AbstractContextManager
from pathlib import Path
from typing import BinaryIO, Protocol

from qshell.overlay import reads
from qshell.overlay.dirfd import READ_FLAGS
from qshell.overlay.errors import OverlayEscape, os_error
from qshell.overlay.reads import Fingerprint
from qshell.tools.fileview import REAL_VIEW, Entry

_OPEN_FLAGS = READ_FLAGS | os.O_NONBLOCK  # a FIFO swapped in must not block the open
GONE = "gone"  # Layer.kind of a deleted entry


class Layer(Protocol):
    """What the view reads of its overlay (overlay.Overlay)."""

    def locate(self, path: os.PathLike[str] | str) -> tuple[str, Path]:
        """(root-relative path, resolved real path); OverlayEscape when outside the root."""

    def kind(self, rel: str) -> str | None:
        """'file' for a written file, 'dir' for a directory of the upper layer, 'gone' for
        a deleted real entry, else None."""

    def covers(self, rel: str) -> bool:
        """Whether the real entry at `rel` is deleted or replaced."""

    def children(self, rel: str) -> set[str]:
        """The names the upper layer holds in directory `rel`."""

    def upper_dir(self, parts: list[str], *, create: bool = False) -> AbstractContextManager[int]:
        """A descriptor for `upper/parts…`, never through a symlink."""

    def write(self, path: os.PathLike[str] | str, data: bytes, mode: int | None) -> None:
        """Write a whole file into the upper layer."""

    def record_read(self, print_: Fingerprint) -> None:
        """Note what a read of a real file saw."""

    def record_links(self, path: os.PathLike[str] | str) -> None:
        """Note the symlinks a read of `path` goes through."""


class OverlayView:
    """The FileView of a speculation: the real tree with the overlay's files on top."""

    def __init__(self, overlay: Layer) -> None:
        self._overlay = overlay

    def read_bytes(self, path: Path) -> bytes:
        rel, resolved = self._overlay.locate(path)
        kind = self._overlay.kind(rel)
        if kind is None:
            fd = _open_real(resolved)
            self._overlay.record_links(path)
            with open(fd, "rb", closefd=True) as source:
                info = os.fstat(fd)
                data = source.read()
            self._overlay.record_read(reads.of_bytes(rel, data, info))
            return data
        with open(self._open_upper(rel, kind, path), "rb", closefd=True) as source:
            return source.read()

    def open_read(self, path: Path) -> BinaryIO:
        """A stream of the file as this view shows it; a real file's read is recorded when
        the stream closes."""
        rel, resolved = self._overlay.locate(path)
        kind = self._overlay.kind(rel)
        if kind is None:
            fd = _open_real(resolved)
            try:
                self._overlay.record_links(path)
                raw = reads.RecordingFile(fd, rel, self._overlay.record_read)
            except BaseException:
                os.close(fd)
                raise
            return io.BufferedReader(raw)
        return open(self._open_upper(rel, kind, path), "rb", closefd=True)

    def _open_upper(self, rel: str, kind: str, path: Path) -> int:
        if kind == GONE:
            raise os_error(errno.ENOENT, path)
        if kind == "dir":
            raise os_error(errno.EISDIR, path)
        parts = rel.split("/")
        with self._overlay.upper_dir(parts[:-1]) as parent:
            try:
                return os.open(parts[-1], _OPEN_FLAGS, dir_fd=parent)
            except OSError as exc:
                if exc.errno == errno.ELOOP:
                    raise OverlayEscape(path, "is a symlink inside the overlay") from None
                raise

    def write_bytes(self, path: Path, data: bytes, *, mode: int | None = None) -> None:
        self._overlay.write(path, data, mode)

    def stat(self, path: Path) -> os.stat_result:
        return self._stat(*self._overlay.locate(path))

    def _stat(self, rel: str, resolved: Path) -> os.stat_result:
        kind = self._overlay.kind(rel)
        if kind is None:
            return os.stat(resolved)
        if kind == GONE:
            raise os_error(errno.ENOENT, resolved)
        parts = rel.split("/") if rel else []
        if kind == "file":
            with self._overlay.upper_dir(parts[:-1]) as parent:
                return os.stat(parts[-1], dir_fd=parent, follow_symlinks=False)
        with contextlib.suppress(OSError):
            info = os.stat(resolved)
            if stat_module.S_ISDIR(info.st_mode) and not self._overlay.covers(rel):
                return info  # a real directory the overlay also has: the real one's stat
        with self._overlay.upper_dir(parts) as fd:
            return os.fstat(fd)

    def exists(self, path: Path) -> bool:
        rel, resolved = self._overlay.locate(path)
        kind = self._overlay.kind(rel)
        return kind != GONE and (kind is not None or resolved.exists())

    def is_dir(self, path: Path) -> bool:
        rel, resolved = self._overlay.locate(path)
        kind = self._overlay.kind(rel)
        return kind == "dir" or (kind is None and resolved.is_dir())

    def is_file(self, path: Path) -> bool:
        rel, resolved = self._overlay.locate(path)
        kind = self._overlay.kind(rel)
        return kind == "file" or (kind is None and resolved.is_file())

    def scandir(self, path: Path) -> list[Entry]:
        rel, resolved = self._overlay.locate(path)
        kind = self._overlay.kind(rel)
        if kind == "file":
            raise os_error(errno.ENOTDIR, path)
        if kind == GONE:
            raise os_error(errno.ENOENT, path)
        try:
            real = [] if self._overlay.covers(rel) else REAL_VIEW.scandir(resolved)
        except (FileNotFoundError, NotADirectoryError):
            if kind is None:
                raise
            real = []  # a directory only the overlay has
        merged = {
            entry.name: entry
            for entry in real
            if self._overlay.kind(f"{rel}/{entry.name}" if rel else entry.name) != GONE
        }
        for name in self._overlay.children(rel):
            child = f"{rel}/{name}" if rel else name
            if name in merged and merged[name].is_dir and self._overlay.kind(child) == "dir":
                continue  # the real directory's entry stands for both
            info, is_dir = self._stat(child, resolved / name), self._overlay.kind(child) == "dir"
            path = resolved / name
            merged[name] = Entry(name, path, is_dir, not is_dir, info.st_size, info.st_mtime)
        return list(merged.values())


def _open_real(resolved: Path) -> int:
    """A descriptor for the regular file `resolved`, as opening it for reading would give
    (IsADirectoryError for a directory, OSError for anything else that is not a file)."""
    fd = os.open(resolved, _OPEN_FLAGS)
    try:
        mode = os.fstat(fd).st_mode
        if stat_module.S_ISDIR(mode):
            raise os_error(errno.EISDIR, resolved)
        if not stat_module.S_ISREG(mode):
            raise os_error(errno.EINVAL, resolved)
    except BaseException:
        os.close(fd)
        raise
    return fd
