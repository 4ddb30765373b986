"""Where overlays live: a private base directory outside the project, and its pid directories.

Every overlay is a directory `<base>/<pid>/overlay-…/` holding `upper/` and
its `lock` (lease.py). The base is, in order, `<tempdir>/qshell-speculation-<uid>`,
`$XDG_RUNTIME_DIR/qshell-speculation` and `<state dir>/speculation`: the first that does
not lie inside the project root, since a base inside it could be written by an accepted
speculation (`cd /tmp && qshell`, or `TMPDIR=$HOME/tmp` for a project in `$HOME`); when
all do, or an explicit base does, there is no overlay (OverlayUnavailable: speculation is
off). This module makes and checks those private directories (0700, owned by this user,
not a symlink, writable by nobody else) and never looks inside an overlay; an overlay whose
journal no recovery may follow is moved whole into the base's `set-aside/` folder. Thread-safe:
making an overlay and removing a pid directory hold that directory's flock.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat as stat_module
import tempfile
from collections.abc import Mapping
from pathlib import Path

from qshell.dirs import PRIVATE_DIR_MODE, Dirs
from qshell.overlay import lease
from qshell.overlay.errors import OverlayUnavailable
from qshell.overlay.lease import Lease

BASE_DIR_PREFIX = "qshell-speculation-"
RUNTIME_BASE_NAME = "qshell-speculation"
STATE_BASE_NAME = "speculation"
OVERLAY_PREFIX = "overlay-"
UPPER_DIR_NAME = "upper"
ASIDE_DIR_NAME = "set-aside"  # overlays whose journal no recovery may follow, kept
UNSAFE_MODE_BITS = stat_module.S_IWGRP | stat_module.S_IWOTH
MAX_PID_DIR_ATTEMPTS = 5  # a sweep may remove an empty pid directory as we open it


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


def new_overlay_dir(base: Path) -> tuple[Path, Lease]:
    """A fresh overlay directory (with `upper/` and its held lock) under `base`."""
    with contextlib.suppress(OSError):  # the state dir may not exist yet; private_dir says
        base.parent.mkdir(parents=True, exist_ok=True, mode=PRIVATE_DIR_MODE)
    private_dir(base)
    pid_dir = base / str(os.getpid())
    for _ in range(MAX_PID_DIR_ATTEMPTS):
        private_dir(pid_dir)
        try:
            with lease.locked_dir(pid_dir, wait=True) as fd:
                assert fd is not None
                if not lease.still_linked(fd, pid_dir):
                    continue  # a sweep removed it as we opened it: make it again
                return _make_overlay(pid_dir)
        except FileNotFoundError:
            continue
    raise OverlayUnavailable(f"cannot keep a pid directory in {base}")


def _make_overlay(pid_dir: Path) -> tuple[Path, Lease]:
    try:
        directory = Path(tempfile.mkdtemp(prefix=OVERLAY_PREFIX, dir=pid_dir))
    except OSError as exc:
        raise OverlayUnavailable(f"cannot create an overlay in {pid_dir}: {exc}") from exc
    try:
        held = lease.take(directory)
    except OSError as exc:
        shutil.rmtree(directory, ignore_errors=True)
        raise OverlayUnavailable(f"cannot lock the overlay {directory}: {exc}") from exc
    try:
        os.mkdir(directory / UPPER_DIR_NAME, PRIVATE_DIR_MODE)
    except OSError as exc:
        shutil.rmtree(directory, ignore_errors=True)
        held.release()
        raise OverlayUnavailable(f"cannot create an overlay in {pid_dir}: {exc}") from exc
    return directory, held


def remove_overlay(directory: Path) -> None:
    """Delete an overlay directory (its lease still held by the caller), then its pid
    directory once empty — unless an overlay is being made there right now."""
    shutil.rmtree(directory, onerror=_open_up)
    remove_if_empty(directory.parent)


def _open_up(func: object, path: str, exc_info: object) -> None:
    """rmtree's error handler: a directory it could not read — the mode-000 `work/` a kernel
    overlay leaves when a command was killed mid-run — is made readable and removed."""
    with contextlib.suppress(OSError):
        if stat_module.S_ISDIR(os.lstat(path).st_mode):
            os.chmod(path, PRIVATE_DIR_MODE)
            shutil.rmtree(path, ignore_errors=True)


def set_aside_overlay(directory: Path) -> Path:
    """Move an overlay (its lease held by the caller) out of the sweeps' way, whole, to
    `<base>/set-aside/<pid>-<name>-…/`; returns where it went. A rename within the base:
    nothing is copied or deleted, and no later sweep looks there (it reads only pid
    directories)."""
    base = directory.parent.parent
    aside = base / ASIDE_DIR_NAME
    private_dir(aside)
    target = Path(tempfile.mkdtemp(prefix=f"{directory.parent.name}-{directory.name}-", dir=aside))
    os.rename(directory, target)  # over the empty directory just made: never another's
    return target


def remove_if_empty(pid_dir: Path) -> None:
    with contextlib.suppress(OSError), lease.locked_dir(pid_dir, wait=False) as fd:
        if fd is not None:
            os.rmdir(pid_dir)


def overlays_in(directory: Path) -> list[Path]:
    """The overlay directories of a pid directory (or the overlay itself)."""
    if directory.name.startswith(OVERLAY_PREFIX):
        return [directory]
    children = [c for c in directory.iterdir() if c.name.startswith(OVERLAY_PREFIX)]
    return [c for c in children if c.is_dir() and not c.is_symlink()]


def existing_base(base_dir: Path | None) -> Path | None:
    """The base directory when it exists (checked private), else None."""
    base = base_dir if base_dir is not None else default_base_dir()
    try:
        private_dir(base, create=False)
    except FileNotFoundError:
        return None
    return base
