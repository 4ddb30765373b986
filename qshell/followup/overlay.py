"""The copy-on-write overlay a speculation writes into, and the FileView that shows it.

Writes land in a private directory (0700, from mkdtemp under `<tempdir>/qshell-speculation-
<uid>/<pid>/`) laid out as a Linux overlayfs upper directory: `upper/<project-relative path>`
holds each written file and nothing else; `meta.jsonl` (each original's sha256 and mode, or
that it did not exist), `incoming/` (whole copies about to be renamed in) and `journal.json`
sit beside it. `OverlayView` is the FileView tools get during a speculation: written files
resolve to their copies, listings merge both layers, all else reads the real tree. Every
path is resolved with symlinks followed; one outside the project root, or a symlink inside
the overlay, raises OverlayEscape here, and is a Conflict again at apply time (journal.py).
It never writes the real tree except through `apply`, never deletes or renames (no tool
does yet: the gate treats either as a boundary), and never uses a directory it does not
own. Thread-safe: one speculation thread writes and applies while parallel tool calls read;
a lock guards the bookkeeping and copies are renamed in whole, so a read sees one version.
"""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import os
import secrets
import shutil
import stat as stat_module
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path
from types import TracebackType

from qshell.dirs import PRIVATE_DIR_MODE, PRIVATE_FILE_MODE
from qshell.followup import journal
from qshell.followup.journal import ApplyConflict as ApplyConflict
from qshell.followup.journal import ApplyFailed, ApplyReport, Conflict, Original, PathRefused
from qshell.tools.fileview import REAL_VIEW, Entry
from qshell.tools.paths import PathResolver

log = logging.getLogger(__name__)

BASE_DIR_PREFIX = "qshell-speculation-"
OVERLAY_PREFIX = "overlay-"
UPPER_DIR_NAME = "upper"
INCOMING_DIR_NAME = "incoming"
META_NAME = "meta.jsonl"
UNSAFE_MODE_BITS = stat_module.S_IWGRP | stat_module.S_IWOTH
_CREATE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_APPEND_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC
_LIVE: set[Path] = set()  # overlays this process made and has not discarded
_LIVE_LOCK = threading.Lock()  # guards _LIVE; serialises making overlays against sweeping


class OverlayEscape(Exception):
    """A path resolves outside the project root, or through a symlink inside the overlay."""

    def __init__(self, path: os.PathLike[str] | str, reason: str) -> None:
        super().__init__(f"{path} {reason}")
        self.path, self.reason = str(path), reason


class OverlayUnavailable(Exception):
    """No safe private directory for an overlay (speculation is off), or it was discarded."""


def _error(code: int, path: object) -> OSError:
    return OSError(code, os.strerror(code), str(path))


def default_base_dir() -> Path:
    return Path(tempfile.gettempdir()) / f"{BASE_DIR_PREFIX}{os.getuid()}"


def _private_dir(path: Path, *, create: bool = True) -> None:
    """Make `path` 0700, or check it is ours, not a symlink and not writable by others."""
    try:
        if create:
            os.mkdir(path, PRIVATE_DIR_MODE)
    except FileExistsError:
        pass
    except OSError as exc:
        raise OverlayUnavailable(f"cannot create {path}: {exc.strerror}") from exc
    info = os.lstat(path)
    if not stat_module.S_ISDIR(info.st_mode):
        kind = "a symlink" if stat_module.S_ISLNK(info.st_mode) else "not a directory"
        raise OverlayUnavailable(f"{path} is {kind}")
    if info.st_uid != os.getuid():
        raise OverlayUnavailable(f"{path} belongs to uid {info.st_uid}, not {os.getuid()}")
    if info.st_mode & UNSAFE_MODE_BITS:
        raise OverlayUnavailable(f"{path} is writable by others (mode {info.st_mode & 0o777:o})")
    if stat_module.S_IMODE(info.st_mode) != PRIVATE_DIR_MODE:
        os.chmod(path, PRIVATE_DIR_MODE)


class Overlay:
    """One speculation's copy-on-write layer over the project at `resolver.root`."""

    def __init__(self, resolver: PathResolver, directory: Path) -> None:
        self.resolver = resolver
        self.root = resolver.root
        self.directory = directory
        self.upper = directory / UPPER_DIR_NAME
        self.view = OverlayView(self)
        self._lock = threading.Lock()
        self._originals: dict[str, Original] = {}
        self._dirs: dict[str, set[str]] = {"": set()}  # each upper directory → child names
        self._discarded = False

    @classmethod
    def create(cls, root: Path, resolver: PathResolver, *, base_dir: Path | None = None) -> Overlay:
        """A fresh overlay; OverlayUnavailable when the private parent is unsafe."""
        if Path(root).resolve() != resolver.root:
            raise OverlayUnavailable(f"{root} is not the resolver's root {resolver.root}")
        base = base_dir if base_dir is not None else default_base_dir()
        _private_dir(base)
        with _LIVE_LOCK:
            pid_dir = base / str(os.getpid())
            _private_dir(pid_dir)
            try:
                directory = Path(tempfile.mkdtemp(prefix=OVERLAY_PREFIX, dir=pid_dir))
                os.mkdir(directory / UPPER_DIR_NAME, PRIVATE_DIR_MODE)
                os.mkdir(directory / INCOMING_DIR_NAME, PRIVATE_DIR_MODE)
            except OSError as exc:
                raise OverlayUnavailable(f"cannot create an overlay in {pid_dir}: {exc}") from exc
            _LIVE.add(directory)
        return cls(resolver, directory)

    def __enter__(self) -> Overlay:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.discard()

    @property
    def written(self) -> list[str]:
        """Root-relative paths of every file written so far, sorted."""
        with self._lock:
            return sorted(self._originals)

    @property
    def has_writes(self) -> bool:
        with self._lock:
            return bool(self._originals)

    def original(self, rel: str) -> Original | None:
        with self._lock:
            return self._originals.get(rel)

    def check_conflicts(self) -> list[Conflict]:
        """Why written files could not be applied now (empty: apply would go through)."""
        with self._lock:
            self._check_open()
            try:
                return journal.plan(self.root, self.upper, list(self._originals.values()))[1]
            except (OSError, PathRefused) as exc:
                raise ApplyFailed(f"cannot check the overlay: {exc}") from exc

    def apply(self) -> ApplyReport:
        """Apply every written file, all or nothing; the overlay stays until `discard()`.

        Raises ApplyConflict (nothing applied) or ApplyFailed (rolled back).
        """
        with self._lock:
            self._check_open()
            target = self.directory / journal.JOURNAL_NAME
            return journal.apply_files(
                self.root, self.upper, target, list(self._originals.values())
            )

    def discard(self) -> None:
        """Remove the overlay directory. Idempotent; a pending journal is recovered first."""
        with self._lock:
            if self._discarded:
                return
            self._discarded = True
        with _LIVE_LOCK:
            _LIVE.discard(self.directory)
        if _recover_overlay(self.directory):  # else kept for the sweep at the next start
            shutil.rmtree(self.directory, ignore_errors=True)
            with _LIVE_LOCK, contextlib.suppress(OSError):
                os.rmdir(self.directory.parent)  # the pid directory, once empty

    def _check_open(self) -> None:
        if self._discarded:
            raise OverlayUnavailable(f"the overlay {self.directory} was discarded")

    def locate(self, path: os.PathLike[str] | str) -> tuple[str, Path]:
        """(root-relative path, resolved real path); OverlayEscape when outside the root."""
        raw = Path(path)
        if not raw.is_absolute():
            raise OverlayEscape(raw, "is not an absolute path")
        resolved = Path(os.path.realpath(raw))
        if not self.resolver.is_inside_root(resolved):
            raise OverlayEscape(raw, f"resolves outside the project root {self.root}")
        rel = resolved.relative_to(self.root).as_posix()
        return ("" if rel == "." else rel), resolved

    def kind(self, rel: str) -> str | None:
        """'file' for a written file, 'dir' for a directory of the upper layer, else None."""
        with self._lock:
            self._check_open()
            if rel in self._originals:
                return "file"
            return "dir" if rel in self._dirs else None

    def children(self, rel: str) -> set[str]:
        with self._lock:
            return set(self._dirs.get(rel, ()))

    @contextlib.contextmanager
    def upper_dir(self, parts: list[str], *, create: bool = False) -> Iterator[int]:
        """A descriptor for `upper/parts…`, never through a symlink (else OverlayEscape)."""
        self._check_open()
        mode = journal.NEW_DIR_MODE if create else None
        try:
            with (
                journal.open_dir(self.upper) as top,
                journal.open_chain(top, parts, create_mode=mode) as fd,
            ):
                yield fd
        except PathRefused:
            where = self.upper.joinpath(*parts)
            raise OverlayEscape(where, "goes through a symlink inside the overlay") from None

    def write(self, path: os.PathLike[str] | str, data: bytes, mode: int | None) -> None:
        rel, resolved = self.locate(path)
        parts = rel.split("/")
        with self._lock:
            self._check_open()
            original = self._originals.get(rel)
            if original is None:
                if rel in self._dirs:
                    raise _error(errno.EISDIR, path)
                self._check_parents(parts, path)
                original = _snapshot(rel, resolved, mode)
            with self.upper_dir(parts[:-1], create=True) as parent:
                self._put(parent, parts[-1], data, original.mode)
            if rel not in self._originals:
                self._originals[rel] = original
                for depth, name in enumerate(parts):
                    self._dirs.setdefault("/".join(parts[:depth]), set()).add(name)
                line = json.dumps(asdict(original)) + "\n"
                fd = os.open(self.directory / META_NAME, _APPEND_FLAGS, PRIVATE_FILE_MODE)
                with open(fd, "w", encoding="utf-8", closefd=True) as meta:
                    meta.write(line)

    def _check_parents(self, parts: list[str], path: os.PathLike[str] | str) -> None:
        """ENOTDIR when an ancestor is a file in this view, as the OS would say."""
        for depth in range(1, len(parts)):
            prefix = "/".join(parts[:depth])
            if prefix in self._dirs:
                continue
            if prefix in self._originals:
                raise _error(errno.ENOTDIR, path)
            try:
                info = os.stat(self.root / prefix)
            except FileNotFoundError:
                return  # missing: made with the file
            if not stat_module.S_ISDIR(info.st_mode):
                raise _error(errno.ENOTDIR, path)

    def _put(self, parent: int, name: str, data: bytes, mode: int | None) -> None:
        """Write a whole copy into `incoming/`, then rename it over `upper/…/name`."""
        temp = self.directory / INCOMING_DIR_NAME / secrets.token_hex(8)
        fd = os.open(temp, _CREATE_FLAGS, journal.NEW_FILE_MODE)
        try:
            with open(fd, "wb", closefd=True) as out:
                out.write(data)
                if mode is not None:
                    os.fchmod(out.fileno(), mode)
            os.replace(temp, name, dst_dir_fd=parent)
        except BaseException:
            temp.unlink(missing_ok=True)
            raise


def _snapshot(rel: str, resolved: Path, mode: int | None) -> Original:
    """Hash and mode of the real file about to be shadowed, or that it does not exist."""
    try:
        info = os.lstat(resolved)
    except FileNotFoundError:
        return Original(rel, False, None, None if mode is None else stat_module.S_IMODE(mode))
    if stat_module.S_ISDIR(info.st_mode):
        raise _error(errno.EISDIR, resolved)
    if not stat_module.S_ISREG(info.st_mode):
        raise OverlayEscape(resolved, "is not a regular file")
    if not os.access(resolved, os.W_OK):
        raise _error(errno.EACCES, resolved)
    with journal.open_dir(resolved.parent) as parent:
        found = journal.hash_at(parent, resolved.name)
    if found is None:
        raise OverlayEscape(resolved, "changed while it was being copied")
    return Original(rel, True, found[0], stat_module.S_IMODE(found[1].st_mode))


class OverlayView:
    """The FileView of a speculation: the real tree with the overlay's files on top."""

    def __init__(self, overlay: Overlay) -> None:
        self._overlay = overlay

    def read_bytes(self, path: Path) -> bytes:
        rel, resolved = self._overlay.locate(path)
        kind = self._overlay.kind(rel)
        if kind is None:
            return REAL_VIEW.read_bytes(resolved)
        if kind == "dir":
            raise _error(errno.EISDIR, path)
        parts = rel.split("/")
        with self._overlay.upper_dir(parts[:-1]) as parent:
            try:
                fd = os.open(parts[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=parent)
            except OSError as exc:
                if exc.errno == errno.ELOOP:
                    raise OverlayEscape(path, "is a symlink inside the overlay") from None
                raise
        with open(fd, "rb", closefd=True) as source:
            return source.read()

    def write_bytes(self, path: Path, data: bytes, *, mode: int | None = None) -> None:
        self._overlay.write(path, data, mode)

    def stat(self, path: Path) -> os.stat_result:
        return self._stat(*self._overlay.locate(path))

    def _stat(self, rel: str, resolved: Path) -> os.stat_result:
        kind = self._overlay.kind(rel)
        if kind is None:
            return os.stat(resolved)
        parts = rel.split("/") if rel else []
        if kind == "file":
            with self._overlay.upper_dir(parts[:-1]) as parent:
                return os.stat(parts[-1], dir_fd=parent, follow_symlinks=False)
        with contextlib.suppress(OSError):
            info = os.stat(resolved)
            if stat_module.S_ISDIR(info.st_mode):
                return info  # a real directory the overlay also has: the real one's stat
        with self._overlay.upper_dir(parts) as fd:
            return os.fstat(fd)

    def exists(self, path: Path) -> bool:
        rel, resolved = self._overlay.locate(path)
        return self._overlay.kind(rel) is not None or resolved.exists()

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
            raise _error(errno.ENOTDIR, path)
        try:
            merged = {entry.name: entry for entry in REAL_VIEW.scandir(resolved)}
        except (FileNotFoundError, NotADirectoryError):
            if kind is None:
                raise
            merged = {}  # a directory only the overlay has
        for name in self._overlay.children(rel):
            child = f"{rel}/{name}" if rel else name
            if name in merged and merged[name].is_dir and self._overlay.kind(child) == "dir":
                continue  # the real directory's entry stands for both
            info, is_dir = self._stat(child, resolved / name), self._overlay.kind(child) == "dir"
            path = resolved / name
            merged[name] = Entry(name, path, is_dir, not is_dir, info.st_size, info.st_mtime)
        return list(merged.values())


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process
    return True


def _stale_dirs(base: Path) -> list[Path]:
    """Pid directories of dead processes, and leftovers of an earlier process with our pid."""
    with os.scandir(base) as it:
        pids = [int(e.name) for e in it if e.name.isdigit() and e.is_dir(follow_symlinks=False)]
    stale = [base / str(pid) for pid in pids if pid not in (0, os.getpid()) and not _alive(pid)]
    if os.getpid() in pids:
        with _LIVE_LOCK:
            mine = base / str(os.getpid())
            stale += [c for c in _overlays_in(mine) if c not in _LIVE]
    return stale


def _overlays_in(directory: Path) -> list[Path]:
    """The overlay directories of a pid directory (or the overlay itself)."""
    if directory.name.startswith(OVERLAY_PREFIX):
        return [directory]
    children = [c for c in directory.iterdir() if c.name.startswith(OVERLAY_PREFIX)]
    return [c for c in children if c.is_dir() and not c.is_symlink()]


def _recover_overlay(directory: Path) -> bool:
    """Finish or roll back an interrupted apply; False (with a warning) when that failed."""
    try:
        outcome = journal.recover_journal(directory / journal.JOURNAL_NAME)
    except (OSError, ValueError) as exc:
        log.warning("could not recover the interrupted apply in %s: %s", directory, exc)
        return False
    if outcome is not None and outcome.kept:
        log.warning("kept files edited after an interrupted apply: %s", ", ".join(outcome.kept))
    return True


def _existing_base(base_dir: Path | None) -> Path | None:
    base = base_dir if base_dir is not None else default_base_dir()
    try:
        _private_dir(base, create=False)
    except FileNotFoundError:
        return None
    return base


def recover(base_dir: Path | None = None) -> int:
    """Recover the journals of overlays no live process owns; returns how many there were."""
    base = _existing_base(base_dir)
    stale = _stale_dirs(base) if base is not None else []
    found = [o for s in stale for o in _overlays_in(s) if (o / journal.JOURNAL_NAME).exists()]
    return sum(_recover_overlay(o) for o in found)


def sweep_stale(base_dir: Path | None = None) -> int:
    """Remove overlays of processes that no longer run, recovering their journals first.

    Returns how many stale directories (dead pid directories, plus leftovers of an earlier
    process that had this pid) were removed. One whose journal cannot be recovered is kept
    for the next start. OverlayUnavailable when the base directory is unsafe.
    """
    base = _existing_base(base_dir)
    removed = 0
    for stale in _stale_dirs(base) if base is not None else []:
        if all([_recover_overlay(o) for o in _overlays_in(stale)]):
            shutil.rmtree(stale, ignore_errors=True)
            removed += 1
    return removed
