"""FileView: the file operations tools perform, so a speculation can swap in its overlay.

Tools never touch the filesystem directly: they call `ctx.view`. `RealView` (the default)
is the project as it is on disk. The speculation overlay (qshell/overlay/) provides
another FileView in which written files resolve to private copies, new files exist only in
the overlay, and directory listings merge both. A `StreamingView` (both of those) can also
open a file as a stream, so a reader takes a bounded amount of a huge file; `open_stream`
uses that where a view offers it and falls back to `read_bytes` for a view that can only
hand over whole files. Paths passed in are absolute and already resolved by the
PathResolver. Implementations must be thread-safe for concurrent reads.
"""

from __future__ import annotations

import io
import os
import stat as stat_module
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Protocol, runtime_checkable


@dataclass(frozen=True, slots=True)
class Entry:
    """One directory entry as a tool sees it."""

    name: str
    path: Path
    is_dir: bool
    is_file: bool
    size: int
    mtime: float


class FileView(Protocol):
    def read_bytes(self, path: Path) -> bytes:
        """The file's content; FileNotFoundError, IsADirectoryError, PermissionError as os does."""

    def write_bytes(self, path: Path, data: bytes, *, mode: int | None = None) -> None:
        """Replace or create the file (parents created); `mode` applies to a new file."""

    def stat(self, path: Path) -> os.stat_result:
        """os.stat semantics (follows symlinks); FileNotFoundError when absent."""

    def exists(self, path: Path) -> bool:
        """True when the path exists in this view."""

    def is_dir(self, path: Path) -> bool:
        """True for a directory in this view."""

    def is_file(self, path: Path) -> bool:
        """True for a regular file in this view."""

    def scandir(self, path: Path) -> list[Entry]:
        """The entries of a directory in this view, in no particular order."""


@runtime_checkable
class StreamingView(FileView, Protocol):
    def open_read(self, path: Path) -> BinaryIO:
        """The file opened for binary reading (seekable); the caller closes it. Raises as
        `read_bytes` does."""


def open_stream(view: FileView, path: Path) -> BinaryIO:
    """`path` opened for reading as `view` shows it: streamed where the view can, else read
    whole through `view.read_bytes`."""
    if isinstance(view, StreamingView):
        return view.open_read(path)
    return io.BytesIO(view.read_bytes(path))


class RealView:
    """The project as it is on disk."""

    def read_bytes(self, path: Path) -> bytes:
        return path.read_bytes()

    def open_read(self, path: Path) -> BinaryIO:
        return path.open("rb")

    def write_bytes(self, path: Path, data: bytes, *, mode: int | None = None) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        existed = path.exists()
        path.write_bytes(data)
        if mode is not None and not existed:
            os.chmod(path, stat_module.S_IMODE(mode))

    def stat(self, path: Path) -> os.stat_result:
        return path.stat()

    def exists(self, path: Path) -> bool:
        return path.exists()

    def is_dir(self, path: Path) -> bool:
        return path.is_dir()

    def is_file(self, path: Path) -> bool:
        return path.is_file()

    def scandir(self, path: Path) -> list[Entry]:
        entries = []
        with os.scandir(path) as it:
            for item in it:
                try:
                    info = item.stat()
                except OSError:
                    continue
                is_dir = stat_module.S_ISDIR(info.st_mode)
                entries.append(
                    Entry(
                        name=item.name,
                        path=Path(item.path),
                        is_dir=is_dir,
                        is_file=stat_module.S_ISREG(info.st_mode),
                        size=info.st_size,
                        mtime=info.st_mtime,
                    )
                )
        return entries


REAL_VIEW = RealView()
