"""Where overlays live: a private base directory outside the project, and which overlays this
process owns.

Every overlay is a directory `<base>/<pid>/overlay-…/` holding `upper/` and `incoming/`.
The base is, in order, `<tempdir>/qshell-speculation-<uid>`,
`$XDG_RUNTIME_DIR/qshell-speculation` and `<state dir>/speculation`: the first that does
not lie inside the project root, since a base inside it could be written by an accepted
speculation (`cd /tmp && qshell`, or `TMPDIR=$HOME/tmp` for a project in `$HOME`); when
all do, or an explicit base does, there is no overlay (OverlayUnavailable: speculation is
off). This module makes and checks those private directories (0700, owned by this user,
not a symlink, writable by nobody else) and keeps the set of overlays this process made
and has not released, so that a sweep never takes a live one. It never looks inside an
overlay. Thread-safe: one lock guards the set and serialises making an
overlay against sweeping this process's own pid directory.
"""

from __future__ import annotations

import contextlib
import os
import stat as stat_module
import tempfile
import threading
from collections.abc import Callable, Mapping
from pathlib import Path

from qshell.dirs import PRIVATE_DIR_MODE, Dirs
from qshell.overlay.errors import OverlayUnavailable

BASE_DIR_PREFIX = "qshell-speculation-"
RUNTIME_BASE_NAME = "qshell-speculation"
STATE_BASE_NAME = "speculation"
OVERLAY_PREFIX = "overlay-"
UPPER_DIR_NAME = "upper"
INCOMING_DIR_NAME = "incoming"
UNSAFE_MODE_BITS = stat_module.S_IWGRP | stat_module.S_IWOTH
_LIVE: set[Path] = set()  # overlays this process made and has not released
_LIVE_LOCK = threading.Lock()  # guards _LIVE; serialises making overlays against sweeping


def default_base_dir() -> Path:
    """The first choice of base: the per-user directory under the temp dir."""
    return Path(tempfile.gettempdir()) / f"{BASE_DIR_PREFIX}{os.getuid()}"


def candidate_bases(environ: Mapping[str, str] | None = None) -> list[Path]:
    """Every base an overlay may use, in order of preference."""
    environ = os.environ if environ is None else environ
    bases = [default_base_dir()]
    runtime = environ.get("XDG_RUNTIME_DIR", "")
    if os.path.isabs(runtime):
        bases.append(Path(runtime) / RUNTIME_BASE_NAME)
    bases.append(Dirs.from_environ(environ).state / STATE_BASE_NAME)
    return bases


def inside(path: Path, root: Path) -> bool:
    """True when `path` (its existing part resolved) is `root` or lies below it."""
    real = Path(os.path.realpath(path))
    return real == root or real.is_relative_to(root)


def choose_base(
    root: Path, base_dir: Path | None = None, environ: Mapping[str, str] | None = None
) -> Path:
    """The base for a new overlay of the project at `root` (resolved): never inside it."""
    if base_dir is not None:
        if inside(base_dir, root):
            raise OverlayUnavailable(
                f"the overlay directory {base_dir} is inside the project root {root}"
            )
        return base_dir
    for base in candidate_bases(environ):
        if not inside(base, root):
            return base
    raise OverlayUnavailable(
        f"every private directory for overlays is inside the project root {root}; "
        "set TMPDIR to a directory outside the project to speculate"
    )


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
    with contextlib.suppress(OSError):  # the state dir may not exist yet; private_dir says
        base.parent.mkdir(parents=True, exist_ok=True, mode=PRIVATE_DIR_MODE)
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
