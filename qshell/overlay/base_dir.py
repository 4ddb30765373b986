"""Where overlays live: the private base directory, and which overlays this process owns.

Every overlay is a directory `<tempdir>/qshell-speculation-<uid>/<pid>/overlay-…/` holding
`upper/` and `incoming/`. This module makes and checks those private directories (0700,
owned by this user, not a symlink, writable by nobody else) and keeps the set of overlays
this process made and has not released, so that a sweep never takes a live one. It never
looks inside an overlay. Thread-safe: one lock guards the set and serialises making an
overlay against sweeping this process's own pid directory.
"""

from __future__ import annotations

import contextlib
import os
import stat as stat_module
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path

from qshell.dirs import PRIVATE_DIR_MODE
from qshell.overlay.errors import OverlayUnavailable

BASE_DIR_PREFIX = "qshell-speculation-"
OVERLAY_PREFIX = "overlay-"
UPPER_DIR_NAME = "upper"
INCOMING_DIR_NAME = "incoming"
UNSAFE_MODE_BITS = stat_module.S_IWGRP | stat_module.S_IWOTH
_LIVE: set[Path] = set()  # overlays this process made and has not released
_LIVE_LOCK = threading.Lock()  # guards _LIVE; serialises making overlays against sweeping


def default_base_dir() -> Path:
    return Path(tempfile.gettempdir()) / f"{BASE_DIR_PREFIX}{os.getuid()}"


def private_dir(path: Path, *, create: bool = True) -> None:
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


def new_overlay_dir(base: Path) -> Path:
    """A fresh, live overlay directory (with `upper/` and `incoming/`) under `base`."""
    private_dir(base)
    with _LIVE_LOCK:
        pid_dir = base / str(os.getpid())
        private_dir(pid_dir)
        try:
            directory = Path(tempfile.mkdtemp(prefix=OVERLAY_PREFIX, dir=pid_dir))
            os.mkdir(directory / UPPER_DIR_NAME, PRIVATE_DIR_MODE)
            os.mkdir(directory / INCOMING_DIR_NAME, PRIVATE_DIR_MODE)
        except OSError as exc:
            raise OverlayUnavailable(f"cannot create an overlay in {pid_dir}: {exc}") from exc
        _LIVE.add(directory)
    return directory


def release(directory: Path, remove: Callable[[Path], None] | None = None) -> None:
    """`directory` is no longer live; `remove` (when given) deletes it, and then its pid
    directory goes too once empty."""
    with _LIVE_LOCK:
        _LIVE.discard(directory)
    if remove is None:
        return
    remove(directory)
    with _LIVE_LOCK, contextlib.suppress(OSError):
        os.rmdir(directory.parent)


def overlays_in(directory: Path) -> list[Path]:
    """The overlay directories of a pid directory (or the overlay itself)."""
    if directory.name.startswith(OVERLAY_PREFIX):
        return [directory]
    children = [c for c in directory.iterdir() if c.name.startswith(OVERLAY_PREFIX)]
    return [c for c in children if c.is_dir() and not c.is_symlink()]


def released_overlays(pid_dir: Path) -> list[Path]:
    """The overlays in this process's `pid_dir` that it no longer owns (an earlier process
    with the same pid left them)."""
    with _LIVE_LOCK:
        return [c for c in overlays_in(pid_dir) if c not in _LIVE]


def existing_base(base_dir: Path | None) -> Path | None:
    """The base directory when it exists (checked private), else None."""
    base = base_dir if base_dir is not None else default_base_dir()
    try:
        private_dir(base, create=False)
    except FileNotFoundError:
        return None
    return base
