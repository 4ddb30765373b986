"""Files judged by content: which project files hold a secret, and copies of them without it.

The output scanner (qshell.redaction) finds a secret in what a command prints only while
it keeps its shape: `tail -n +2 key.txt`, `rev`, `base64` or `fold -w 5` print a private
key the scanner cannot tell from other text. So a file that holds a secret — whatever its
name — is itself a secret: `holds_secret(path)` scans the file's bytes (as UTF-8, any other byte
kept as it is, and each finding's offsets taken back to bytes) and remembers the verdict by the file's
stat signature (device, inode, size, mtime, ctime), so a file is read again only once it
changed. The jail shows such a file as `Copies.copy_of`'s copy — each secret the
scanner found replaced by a `#0` marker, which the file tools never write anywhere, every
other byte kept — so `tail`, `rev` and `base64` there transform only markers; without a
jail, a proven command that would read such a file asks (permissions/shell_scope.py).
A file in UTF-16 or gzip is judged by the text it decodes to too (`decoded`), and masked
whole when that holds a secret. Files larger than `MAX_SCANNED_BYTES` (data, models,
archives) are not judged: the output scanner alone covers what a command prints of them. Thread-safe: the verdicts and the
copies are kept under a lock.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
import tempfile
import threading
import weakref
import zlib
from pathlib import Path

from qshell.redaction import Finding, marker, scan
from qshell.sandbox.masks import Signature, signature

MAX_SCANNED_BYTES = 8 * 1024 * 1024
GZIP_MAGIC = b"\x1f\x8b"
GZIP_WINDOW = 16 + zlib.MAX_WBITS  # zlib's window bits that read a gzip header
MAX_VERDICTS = 200_000  # verdicts remembered; past that the oldest are dropped

_lock = threading.Lock()
_verdicts: dict[Path, tuple[Signature, bool]] = {}


def holds_secret(path: Path, info: os.stat_result | None = None) -> bool:
    """Whether the regular file at `path` (not followed if a symlink; `info` its lstat,
    when the caller has it) holds a secret the scanner finds. A file that cannot be read,
    or is too large to judge, holds none to leak."""
    try:
        info = info or path.lstat()
    except OSError:
        return False
    if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_SCANNED_BYTES or not info.st_size:
        return False
    mark = signature(info)
    with _lock:
        known = _verdicts.get(path)
    if known is not None and known[0] == mark:
        return known[1]
    data = _read(path)
    verdict = data is not None and (bool(findings(data)) or any(map(scan, decoded(data))))
    with _lock:
        if len(_verdicts) >= MAX_VERDICTS:
            _verdicts.pop(next(iter(_verdicts)))
        _verdicts[path] = (mark, verdict)
    return verdict


def findings(data: bytes) -> list[Finding]:
    """The secrets in `data`, read as UTF-8 (a byte that is not UTF-8 kept as it is), at byte
    offsets."""
    text = data.decode("utf-8", "surrogateescape")
    found = scan(text)
    if len(text) == len(data):  # one byte a character: the offsets are the bytes'
        return found
    return [
        Finding(f.kind, _bytes_before(text, f.start), _bytes_before(text, f.end)) for f in found
    ]


def _bytes_before(text: str, at: int) -> int:
    return len(text[:at].encode("utf-8", "surrogateescape"))


def decoded(data: bytes) -> list[str]:
    """The text `data` holds in an encoding the scanner cannot read through: UTF-16 (a byte
    order mark, or every other byte zero) and gzip (`zcat` prints it). A file that holds a
    secret only so is masked whole: a copy could not put markers in its bytes."""
    texts: list[str] = []
    head = data[:4096]
    if head.startswith((b"\xff\xfe", b"\xfe\xff")) or head.count(0) * 3 > len(head):
        order = (
            "utf-16-be"
            if head.startswith(b"\xfe\xff") or head[1::2].count(0) < head[::2].count(0)
            else "utf-16-le"
        )
        texts.append(data.decode(order, "replace"))
    if head.startswith(GZIP_MAGIC):
        try:
            inflated = zlib.decompressobj(GZIP_WINDOW).decompress(data, MAX_SCANNED_BYTES)
        except zlib.error:
            inflated = b""
        texts.append(inflated.decode("latin-1"))
    return texts


def without_secrets(data: bytes) -> bytes:
    """`data` with each secret the scanner finds replaced by its `#0` marker."""
    parts: list[bytes] = []
    last = 0
    for finding in findings(data):
        parts += [data[last : finding.start], marker(finding.kind, 0).encode("ascii")]
        last = finding.end
    return b"".join(parts) + data[last:]


def _read(path: Path, limit: int = MAX_SCANNED_BYTES) -> bytes | None:
    """The file's bytes (at most `limit` and one more), never through a symlink; None when
    it cannot be read."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        with os.fdopen(fd, "rb") as source:
            fd = -1
            return source.read(limit + 1)
    except OSError:
        return None
    finally:
        if fd >= 0:
            os.close(fd)


class Copies:
    """Copies of files with what they must not show taken out, one per content, kept in a
    private directory for as long as this object lives (a session's JailLauncher holds
    them). `shown` makes a copy's bytes; `limit` bounds the files copied. A file is read
    again only once its stat signature changed (every jailed command asks for its copy)."""

    limit = MAX_SCANNED_BYTES
    prefix = "qshell-redacted-"

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._made: dict[str, Path | None] = {}
        self._of_file: dict[Path, tuple[Signature, Path | None]] = {}
        self._directory: Path | None = None

    def copy_of(self, path: Path) -> Path | None:
        """The copy of the file at `path` as it is now, or None when there is none to give
        (unreadable, too large, nothing to take out, or `shown` could not make it)."""
        try:
            mark = signature(path.lstat())
        except OSError:
            return None
        with self._lock:
            known = self._of_file.get(path)
        if known is not None and known[0] == mark:
            return known[1]
        copy = self._copy_of(path)
        with self._lock:
            self._of_file[path] = (mark, copy)
        return copy

    def _copy_of(self, path: Path) -> Path | None:
        data = _read(path, self.limit)
        if data is None or len(data) > self.limit:
            return None
        digest = hashlib.sha256(data).hexdigest()
        with self._lock:
            if digest not in self._made:
                shown = self.shown(data, self._private())
                self._made[digest] = None if shown is None else self._kept(digest, shown)
            return self._made[digest]

    def shown(self, data: bytes, directory: Path) -> bytes | None:
        """What a copy of a file holding `data` shows; None when there is no copy to give
        (`directory` is the private one, for helpers that need a working directory)."""
        shown = without_secrets(data)
        return None if shown == data else shown

    def _kept(self, digest: str, shown: bytes) -> Path:
        copy = self._private() / digest
        copy.write_bytes(shown)
        copy.chmod(0o444)
        return copy

    def _private(self) -> Path:
        if self._directory is None:
            self._directory = Path(tempfile.mkdtemp(prefix=self.prefix))
            weakref.finalize(self, shutil.rmtree, self._directory, True)
        return self._directory
