"""PidsCap: a cgroup whose `pids.max` caps the processes of each jailed command, root's too.

RLIMIT_NPROC (prlimit's `--nproc`) binds no process whose user is the initial namespace's
root: the kernel exempts uid 0 whatever its capabilities, and a user namespace that maps
root to root changes nothing (mapping it to another uid would shut it out of a root-owned
project and its overlay). A cgroup's `pids.max` binds every process in the cgroup and its
children. `open_cap()` finds a pids controller this process may make cgroups in — cgroup
v1's `pids` hierarchy, or a v2 cgroup (its own or its parent) whose `cgroup.subtree_control`
hands the pids controller down — and makes this process's cgroup there (`qshell-<pid>`);
`group(limit)` makes one child per command with that `pids.max`, which the command joins
before bubblewrap starts (jail.py) by writing `0` to the file `group` returns: in v1 its
`tasks`, which moves the writing thread alone and so takes no global lock (through
`cgroup.procs` the move, with the cgroup namespace bubblewrap makes next, cost a command
10 ms here), in v2 its `cgroup.procs`. Nothing inside can leave it: the cgroup file system
is read-only in the jail and no capability is left. A child whose command ended is removed by
a later `group()`, the rest at exit; the directory of a qshell that died is removed by the
next one that opens. Only root gets one: the rlimit binds every other uid. Where none of
this is possible `open_cap()` is None and the rlimit stays the only cap. Thread-safe.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import itertools
import os
import threading
import time
from pathlib import Path

PROC_CGROUP = Path("/proc/self/cgroup")
PROC_MOUNTS = Path("/proc/self/mounts")
PREFIX = "qshell-"
GRACE_S = 30.0  # a group this young may be waiting for its command: never swept


class PidsCap:
    """This process's pids cgroup, `directory`, and the per-command groups made in it;
    a command joins one by writing `0` to its `join` file."""

    def __init__(self, directory: Path, join: str) -> None:
        self.directory = directory
        self.join = join
        self._lock = threading.Lock()
        self._made: dict[Path, float] = {}
        self._count = itertools.count()

    def group(self, limit: int) -> Path:
        """A new cgroup for one command, allowed `limit` processes (OSError when it
        cannot be made): the file the command writes `0` to, to join it."""
        with self._lock:
            self._sweep(time.monotonic() - GRACE_S)
            path = self.directory / f"c{next(self._count)}"
            path.mkdir()
            self._made[path] = time.monotonic()
        try:
            (path / "pids.max").write_text(f"{limit}\n")
        except OSError:
            with self._lock:
                self._remove(path)
            raise
        return path / self.join

    def close(self) -> None:
        """Remove every group whose processes ended, then this process's cgroup."""
        with self._lock:
            self._sweep(float("inf"))
        with contextlib.suppress(OSError):
            self.directory.rmdir()

    def _sweep(self, before: float) -> None:
        for path, made in list(self._made.items()):
            if made < before and not _populated(path):
                self._remove(path)

    def _remove(self, path: Path) -> None:
        with contextlib.suppress(OSError):
            path.rmdir()  # a cgroup with processes left refuses (EBUSY): kept for later
            self._made.pop(path, None)


@functools.cache
def open_cap() -> PidsCap | None:
    """This process's PidsCap, made once, for root; None for another user, whom the rlimit
    binds already (joining a cgroup costs a command milliseconds), and where no pids cgroup
    can be made."""
    if os.geteuid() != 0:
        return None
    for base, join in _candidates():
        _remove_stale(base)
        directory = base / f"{PREFIX}{os.getpid()}"
        try:
            directory.mkdir(exist_ok=True)
            (directory / "pids.max").write_text("max\n")
        except OSError:
            with contextlib.suppress(OSError):
                directory.rmdir()
            continue
        cap = PidsCap(directory, join)
        atexit.register(cap.close)
        return cap
    return None


def _candidates() -> list[tuple[Path, str]]:
    """The cgroup directories where this process could make a capped child, each with the
    file a command joins through: its own cgroup in a v1 pids hierarchy (`tasks`), and its
    v2 cgroup or that one's parent when it hands the pids controller down (`cgroup.procs`)."""
    mounts = _cgroup_mounts()
    found: list[tuple[Path, str]] = []
    for line in _read(PROC_CGROUP).splitlines():
        _, controllers, where = line.split(":", 2)
        if "pids" in controllers.split(",") and "v1" in mounts:
            found.append((mounts["v1"] / where.lstrip("/"), "tasks"))
        elif controllers == "" and "v2" in mounts:
            own = mounts["v2"] / where.lstrip("/")
            for directory in (own, own.parent):
                if "pids" in _read(directory / "cgroup.subtree_control").split():
                    found.append((directory, "cgroup.procs"))
    return found


def _cgroup_mounts() -> dict[str, Path]:
    """Where the v1 pids hierarchy ("v1") and the v2 hierarchy ("v2") are mounted."""
    found: dict[str, Path] = {}
    for line in _read(PROC_MOUNTS).splitlines():
        fields = line.split()
        if len(fields) < 4:
            continue
        where, kind, options = Path(fields[1]), fields[2], fields[3].split(",")
        if kind == "cgroup" and "pids" in options:
            found.setdefault("v1", where)
        elif kind == "cgroup2":
            found.setdefault("v2", where)
    return found


def _remove_stale(base: Path) -> None:
    """Remove the cgroups a qshell that is gone left in `base` (their groups first)."""
    try:
        children = [p for p in base.iterdir() if p.name.startswith(PREFIX)]
    except OSError:
        return
    for directory in children:
        pid = directory.name.removeprefix(PREFIX)
        if not pid.isdigit() or int(pid) == os.getpid() or _alive(int(pid)):
            continue
        with contextlib.suppress(OSError):
            for group in directory.iterdir():
                if group.is_dir():
                    group.rmdir()
            directory.rmdir()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # someone else's process: alive
    return True


def _populated(group: Path) -> bool:
    return bool(_read(group / "cgroup.procs").strip())


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""
