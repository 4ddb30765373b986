"""What a speculation read of the real tree, fingerprinted, so accept can tell it changed.

A speculation builds its answer on what it read; a file changed since then makes the answer
stale and, if the speculation also writes it, would lose the user's edit on accept. So every
read of a real file records a `Fingerprint`, checked again by `unchanged` when the overlay
is applied (any mismatch is a conflict). A read through the view hashes the content it
actually read (sha256 of the first HASH_LIMIT_BYTES): a read that reached the end of a file
no longer than that is `whole`, and only the content is compared (a touch is no change; an
edit of the same size in the same timestamp tick is). For longer files, and for the files
a shell command walks recursively (hashing a whole tree twice would cost more than the
command), the stat signature (inode, size, mtime_ns, ctime_ns) vouches for the rest: it
changes with every write and chmod; only a same-size in-place write within one timestamp
tick, past the hashed prefix, escapes it. A read through a symlink inside the project also
fingerprints the link itself by its target (`links_on`): re-pointed, it would read another
file, however alike. A shell command's named read is `of_path` (a file by content, a
directory by `walk`). Listings and stats are not recorded: they reveal
names and sizes, not content, and a file created where the user made one meanwhile is a
conflict of its own. Pure functions and an unshared stream object; any thread.
"""

from __future__ import annotations

import hashlib
import io
import os
import stat as stat_module
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass
from pathlib import Path

from qshell.overlay.dirfd import READ_FLAGS, PathRefused, open_chain, split_rel
from qshell.overlay.errors import OverlayError

HASH_LIMIT_BYTES = 8 << 20  # content hashed per read file; the stat signature covers the rest
MAX_TREE_FILES = 50_000  # files one recursive read may record; more is a boundary
CHECK_CHUNK_BYTES = 1 << 20
MAX_LINK_HOPS = 40  # as the kernel's limit on symlinks followed in one lookup
SKIPPED_DIRS = frozenset({".git"})  # git rewrites its own files; no speculation writes there
Signature = tuple[int, int, int, int]


class TooManyReads(OverlayError):
    """A recursive read covers more files than a speculation can record."""


@dataclass(frozen=True, slots=True)
class Fingerprint:
    """One real file as a speculation saw it."""

    rel: str  # root-relative, symlinks resolved
    hashed: int  # bytes from the start that `sha256` covers (0: signature only)
    sha256: str
    whole: bool  # `sha256` covers the whole file: compare the content, not the signature
    signature: Signature
    link: str | None = None  # of a symlink read through: its target, all that is compared
    listing: str | None = None  # of a directory listed: the sha256 of its sorted names

    def stronger_than(self, other: Fingerprint) -> bool:
        """True when this one saw the same file state as `other`, and more of it."""
        if self.signature != other.signature:
            return False
        return (self.whole and not other.whole) or self.hashed > other.hashed


def signature(info: os.stat_result) -> Signature:
    return (info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)


def of_bytes(rel: str, data: bytes, info: os.stat_result) -> Fingerprint:
    """The fingerprint of a whole read: `data` is everything read from the file."""
    hashed = data[:HASH_LIMIT_BYTES]
    whole = len(data) <= HASH_LIMIT_BYTES
    return Fingerprint(rel, len(hashed), hashlib.sha256(hashed).hexdigest(), whole, signature(info))


def of_signature(rel: str, info: os.stat_result) -> Fingerprint:
    return Fingerprint(rel, 0, "", False, signature(info))


def of_link(rel: str, target: str) -> Fingerprint:
    """The fingerprint of the symlink at `rel` a read went through: its target string."""
    return Fingerprint(rel, 0, "", False, (0, 0, 0, 0), target)


def of_listing(rel: str, names: Collection[str]) -> Fingerprint:
    """The fingerprint of the directory at `rel` a walk listed: which names it holds."""
    return Fingerprint(rel, 0, "", False, (0, 0, 0, 0), listing=_names_sha256(names))


def _names_sha256(names: Collection[str]) -> str:
    return hashlib.sha256("\0".join(sorted(names)).encode("utf-8", "surrogateescape")).hexdigest()


def links_on(root: Path, path: Path) -> list[Fingerprint]:
    """The symlinks inside `root` that resolving the absolute `path` goes through, as the
    kernel would meet them (links in a link's target too, at most MAX_LINK_HOPS)."""
    found: list[Fingerprint] = []
    pending = list(path.parts)
    current, hops = Path(path.anchor), 0
    while pending:
        part = pending.pop(0)
        if part in (path.anchor, "."):
            current = Path(path.anchor) if part == path.anchor else current
            continue
        if part == "..":
            current = current.parent
            continue
        candidate = current / part
        try:
            target = os.readlink(candidate)
        except OSError:  # not a symlink (or missing): a plain component
            current = candidate
            continue
        hops += 1
        if hops > MAX_LINK_HOPS:
            break
        if candidate.is_relative_to(root) and candidate != root:
            found.append(of_link(candidate.relative_to(root).as_posix(), target))
        pending[:0] = Path(target).parts  # an absolute target starts again at the anchor
    return found


def of_fd(rel: str, fd: int) -> Fingerprint:
    """Fingerprint the regular file open at `fd` by reading it from the start."""
    info = os.fstat(fd)
    digest = hashlib.sha256()
    hashed = 0
    while hashed < HASH_LIMIT_BYTES:
        chunk = os.pread(fd, min(CHECK_CHUNK_BYTES, HASH_LIMIT_BYTES - hashed), hashed)
        if not chunk:
            return Fingerprint(rel, hashed, digest.hexdigest(), True, signature(info))
        digest.update(chunk)
        hashed += len(chunk)
    whole = not os.pread(fd, 1, hashed)
    return Fingerprint(rel, hashed, digest.hexdigest(), whole, signature(info))


def walk(top: Path, root: Path, stop: Callable[[], bool]) -> Iterator[Fingerprint]:
    """The signature fingerprint of every regular file below `top` (which is inside
    `root`) and the listing of every directory there, `top` included — a file made later
    changes what `ls`, `find` or a test runner's discovery would answer — symlinks not
    followed and `.git/` skipped; TooManyReads past MAX_TREE_FILES. Stops early when
    `stop()` says so."""
    stack, count = [top], 0
    while stack:
        directory = stack.pop()
        try:
            with os.scandir(directory) as entries:
                found = list(entries)
        except OSError:
            continue  # unreadable: the command cannot read it either
        rel = directory.relative_to(root).as_posix()
        yield of_listing("" if rel == "." else rel, [entry.name for entry in found])
        for entry in found:
            try:
                info = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if stat_module.S_ISDIR(info.st_mode) and entry.name not in SKIPPED_DIRS:
                stack.append(Path(entry.path))
            elif stat_module.S_ISREG(info.st_mode):
                count += 1
                if count > MAX_TREE_FILES:
                    raise TooManyReads(f"it reads more than {MAX_TREE_FILES} files below {top}")
                yield of_signature(Path(entry.path).relative_to(root).as_posix(), info)
        if stop():
            return


def of_path(
    rel: str, resolved: Path, root: Path, stop: Callable[[], bool]
) -> list[Fingerprint] | None:
    """What a shell command reading the real entry at `resolved` (`rel` below `root`) rests
    on: a file by its content, a directory by `walk` (`stop()` ends it early; TooManyReads);
    nothing for a special file, None when there is no entry to read."""
    try:
        info = os.stat(resolved)
    except OSError:
        return None
    if stat_module.S_ISDIR(info.st_mode):
        return list(walk(resolved, root, stop))
    if not stat_module.S_ISREG(info.st_mode):
        return []
    try:
        fd = os.open(resolved, READ_FLAGS | os.O_NONBLOCK)
    except OSError:
        return []
    try:
        return [of_fd(rel, fd)]
    finally:
        os.close(fd)


def unchanged(root_fd: int, print_: Fingerprint) -> bool:
    """True when the file (or the symlink) is still what `print_` recorded (through no
    symlink)."""
    if print_.listing is not None:
        return _same_listing(root_fd, print_)
    try:
        parts = split_rel(print_.rel)
        with open_chain(root_fd, parts[:-1]) as parent:
            if print_.link is not None:
                return os.readlink(parts[-1], dir_fd=parent) == print_.link
            fd = os.open(parts[-1], READ_FLAGS | os.O_NONBLOCK, dir_fd=parent)
    except (OSError, PathRefused):
        return False
    try:
        info = os.fstat(fd)
        if not stat_module.S_ISREG(info.st_mode):
            return False
        if print_.whole:
            return (
                info.st_size == print_.hashed and _prefix_sha256(fd, print_.hashed) == print_.sha256
            )
        if signature(info) != print_.signature:
            return False
        return print_.hashed == 0 or _prefix_sha256(fd, print_.hashed) == print_.sha256
    finally:
        os.close(fd)


def _same_listing(root_fd: int, print_: Fingerprint) -> bool:
    """True when the directory `print_` listed still holds the same names (through no
    symlink)."""
    try:
        with open_chain(root_fd, split_rel(print_.rel) if print_.rel else []) as fd:
            names = os.listdir(fd)
    except (OSError, PathRefused):
        return False
    return _names_sha256(names) == print_.listing


def _prefix_sha256(fd: int, length: int) -> str:
    digest = hashlib.sha256()
    done = 0
    while done < length:
        chunk = os.pread(fd, min(CHECK_CHUNK_BYTES, length - done), done)
        if not chunk:
            break
        digest.update(chunk)
        done += len(chunk)
    return digest.hexdigest()


class RecordingFile(io.RawIOBase):
    """A read-only stream over the regular file open at `fd` that hashes the prefix it has
    read in order and hands its Fingerprint to `record` when closed."""

    def __init__(self, fd: int, rel: str, record: Callable[[Fingerprint], None]) -> None:
        super().__init__()
        self._fd = fd
        self._rel = rel
        self._record = record
        self._info = os.fstat(fd)
        self._digest = hashlib.sha256()
        self._hashed = 0
        self._position = 0
        self._reached_end = False

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def fileno(self) -> int:
        return self._fd

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        view = memoryview(buffer).cast("B")
        count = os.readv(self._fd, [view])
        if self._position == self._hashed and self._hashed < HASH_LIMIT_BYTES:
            take = min(count, HASH_LIMIT_BYTES - self._hashed)
            self._digest.update(view[:take])
            self._hashed += take
            self._reached_end = self._reached_end or (count == 0)
        self._position += count
        return count

    def seek(self, offset: int, whence: int = os.SEEK_SET) -> int:
        self._position = os.lseek(self._fd, offset, whence)
        return self._position

    def tell(self) -> int:
        return self._position

    def fingerprint(self) -> Fingerprint:
        whole = self._reached_end and self._hashed < HASH_LIMIT_BYTES
        sha = self._digest.hexdigest()
        return Fingerprint(self._rel, self._hashed, sha, whole, signature(self._info))

    def close(self) -> None:
        if self.closed:
            return
        try:
            self._record(self.fingerprint())
        finally:
            os.close(self._fd)
            super().close()
