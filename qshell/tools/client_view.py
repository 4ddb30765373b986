"""ClientView: a FileView whose file contents come from and go to a client (an editor).

An ACP client that advertises `fs/read_text_file` / `fs/write_text_file` holds the files
the user has open, unsaved edits included; the agent must read and write what the editor
shows. `ClientView` is the real disk (RealView) for everything but contents: `stat`,
`exists`, listings and ripgrep still see the disk, while `read_bytes`, `open_read` and
`write_bytes` go through the `read` and `write` callables the front-end supplies (each
blocks until the client answers, and raises OSError when it cannot). A file whose first
bytes on disk look binary is read from disk, since the client only speaks text; a file
that exists only as an unsaved buffer is not found (its path is absent on disk). Bytes
that are not UTF-8 are written to disk directly. It never decides anything; the path
resolver and the policy have run before a tool reaches it. Thread-safe when the callables
are (tools call it from the turn's worker and its parallel pool).
"""

from __future__ import annotations

import io
import os
import stat as stat_module
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

from qshell.tools.fileview import RealView

SNIFF_BYTES = 8192

ReadText = Callable[[Path], str]
WriteText = Callable[[Path, str], None]


class ClientView(RealView):
    """The disk, with file contents read (`read`) and written (`write`) by the client."""

    def __init__(self, *, read: ReadText | None = None, write: WriteText | None = None) -> None:
        self._read = read
        self._write = write

    def read_bytes(self, path: Path) -> bytes:
        if self._read is None:
            return super().read_bytes(path)
        with path.open("rb") as fh:  # not found, a directory, unreadable: as os says
            head = fh.read(SNIFF_BYTES)
        if b"\0" in head:
            return super().read_bytes(path)
        return self._read(path).encode("utf-8")

    def open_read(self, path: Path) -> BinaryIO:
        if self._read is None:
            return super().open_read(path)
        return io.BytesIO(self.read_bytes(path))

    def write_bytes(self, path: Path, data: bytes, *, mode: int | None = None) -> None:
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            text = None
        if self._write is None or text is None:
            super().write_bytes(path, data, mode=mode)
            return
        existed = path.exists()
        self._write(path, text)
        if mode is not None and not existed and path.exists():
            os.chmod(path, stat_module.S_IMODE(mode))
