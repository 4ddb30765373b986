"""Jail: the bubblewrap command line one sandboxed command runs under.

Inside, the system's top-level directories (SYSTEM_DIRS: `/usr`, `/etc`, `/opt`, …) are
bound read-only and the top-level symlinks made again, on a root that is itself read-only;
no other host mount is there, so `/proc/self/mountinfo` names no host path the command
cannot see anyway. `/dev` and `/proc` are fresh (the pid namespace is new, so no other
process's environment is there to read); `/tmp`, the user's home and every top-level
directory that is not the system's (`/home`, `/root`, `/var`, `/mnt`, `/srv`, a machine's
own `/work` or `/data`) are empty, size-capped tmpfs (so `~/.ssh`, `~/.aws`, every other
credential directory and other users' files are gone) but for the home directories the
command needs to run its programs (`home_binds`, read-only: the ones on `PATH`, an
interpreter's prefix); the project is bound read-only at its own path — or, for a
speculation, a writable directory is bound there instead, and the root itself is the
`outside` overlay's merged view, writable, rather than a read-only tmpfs with a tmpfs per
emptied directory (outside.py: its skeleton holds them, the mount points and the top-level
symlinks, and what the command writes outside every mount is seen after it ended); each
secret-looking file of the
project and of what is bound back (`masked`, masks.py, the names of
qshell/secret_names.py), and each system secret this user can read (`/etc/shadow`,
`/etc/ssh`, `/etc/pip.conf`, …), is bound over with an empty file and each secret
directory with an empty read-only one, so even `grep -r` finds nothing there — or, for a
file the caller gives a copy of (`replaced`: a git configuration without its
credentials), with that copy; on a speculation `/etc` may instead be shown from a
read-only view that hides its secrets (`etc_view`, sysview.py), one mount for them all.
The command
gets a new user namespace with every capability dropped (bubblewrap run by root would
otherwise keep root's: a `mount -o remount,rw /` would work), no network, no further user
namespaces, a new session (no terminal to inject keystrokes into), an empty `/run` and a
seccomp filter that refuses Unix sockets and the kernel's keyrings (seccomp.py: a
read-only file system does not stop a connect to a daemon's socket, nor a `keyctl read` of
the session's keys), and dies with qshell. `prlimit` caps its CPU time, memory, file size
and processes, and a pids cgroup (`pids_join`, pids.py) caps the processes where the
rlimit does not bind (root). One shell does what must come before bubblewrap (a
speculated command's overlay mounts, `PreJail`; joining the cgroup; opening the filter),
so a command line is `prlimit`, that shell (started by `unshare` for an overlay), bwrap.
The top of the file system is looked at again only when a directory it was read from
changed (`top_view`).
Pure: it builds argument lists, it runs nothing.
"""

from __future__ import annotations

import functools
import glob
import os
import stat
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from qshell.secret_names import SYSTEM_SECRETS, is_secret_name

GIB = 1 << 30
MIB = 1 << 20
SANDBOX_TMP = "/tmp"
ETC = Path("/etc")
SECCOMP_FD = 9
CAP_FAILED = 125  # the exit code when the command could not join its pids cgroup
# the top-level directories that hold the system (programs, libraries, configuration) and
# the ones the jail makes itself; every other one (/home, /root, /var, /mnt, /srv, a /work
# or /data of the machine's own) holds someone's data and is emptied
SYSTEM_DIRS = frozenset(
    {"usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32", "etc", "opt", "nix", "snap"}
    | {"gnu", "boot", "sys", "dev", "proc", "tmp", "run"}
)
MADE_DIRS = frozenset({"dev", "proc", "tmp", "run"})  # fresh in every jail, never bound
# system data kept inside an emptied directory that read-only commands ask about
SYSTEM_DATA = ("/var/lib/dpkg", "/var/lib/rpm", "/var/lib/pacman", "/var/lib/apt", "/var/lib/dnf")


class SandboxError(Exception):
    """Root of every exception the sandbox package raises, so a caller can catch one type."""


class SandboxUnavailable(SandboxError, OSError):
    """The sandbox cannot run here (`str()` says why, for the user). Still an OSError, which
    callers that run a command catch it as."""


@dataclass(frozen=True, slots=True)
class ResourceLimits:
    """Resource limits of one sandboxed command (and everything it starts)."""

    cpu_s: int = 600
    memory_bytes: int = 4 * GIB
    file_bytes: int = GIB
    processes: int = 4096
    tmp_bytes: int = 512 * MIB  # each of /tmp and $HOME
    home_bytes: int = 64 * MIB

    def prlimit_args(self) -> list[str]:
        return [
            f"--cpu={self.cpu_s}",
            f"--as={self.memory_bytes}",
            f"--fsize={self.file_bytes}",
            f"--nproc={self.processes}",
        ]


@dataclass(frozen=True, slots=True)
class PreJail:
    """What a jail's command line does before bubblewrap starts, for a speculated command
    (mount.py `OverlayMount.setup`): `prefix` (argv: `unshare -rm --`) starts the jail's own
    shell (`Jail._joined`), which runs `steps` first, each variable of `variables` given
    to them as "$name"; a step that fails ends the command line with its status."""

    prefix: tuple[str, ...] = ()
    variables: tuple[tuple[str, str], ...] = ()
    steps: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Jail:
    """How to run commands for the project at `root` inside bubblewrap (`bwrap`)."""

    bwrap: str
    root: Path
    home: Path | None = None
    masked: tuple[Path, ...] = ()  # secret files and directories to hide (masks.py)
    replaced: tuple[tuple[Path, Path], ...] = ()  # (copy, file): files shown as the copy
    home_binds: tuple[Path, ...] = ()  # read-only inside the empty home or /tmp
    alias_binds: tuple[tuple[Path, Path], ...] = ()  # (source, where) read-only, likewise
    limits: ResourceLimits = field(default_factory=ResourceLimits)
    prlimit: str | None = None
    writable: Path | None = None  # bound read-write at `root` instead of the project
    writable_files: tuple[Path, ...] = ()  # existing files outside it the command may write
    seccomp: Path | None = None  # a compiled filter (seccomp.filter_file) to load
    pids_join: Path | None = None  # a pids cgroup's file (PidsCap.group) to write 0 to first
    # the merged view (outside the jail) the emptied directories are bound from, each at
    # its own path below it, instead of a tmpfs each (outside.py; a speculated command)
    outside: Path | None = None
    setup: PreJail | None = None  # what runs before bubblewrap (the kernel overlay's mounts)
    # a speculated command's `/etc`: shown from this read-only view (sysview.py), which
    # hides `etc_hidden`, with the file systems mounted below `/etc` bound again
    etc_view: Path | None = None
    etc_hidden: frozenset[Path] = frozenset()
    etc_mounts: tuple[Path, ...] = ()

    def argv(self, command: Sequence[str], made: Sequence[str] | None = None) -> list[str]:
        """The full command line that runs `command` in the jail, in the project root
        (`made`: what `bwrap_args` gave, if the caller has it already)."""
        args = self._joined(list(self.bwrap_args() if made is None else made))
        args += ["--chdir", str(self.root), "--", *command]
        if self.prlimit is None:
            return args
        return [self.prlimit, *self.limits.prlimit_args(), "--", *args]

    def bwrap_args(self) -> list[str]:
        """bubblewrap and the options that make the jail's file system (no command yet)."""
        args = [self.bwrap, *_NAMESPACES]
        if self.outside is not None:  # the root: what is written outside any mount is seen
            args += ["--bind", str(self.outside), "/"]
        hidden = [Path(SANDBOX_TMP), *self._top_level(args)]
        args += ["--dev", "/dev", "--proc", "/proc"]
        args += self._emptied(Path(SANDBOX_TMP), self.limits.tmp_bytes)
        args += self._emptied(Path("/run"), None)
        home = self.home
        if home is not None and _under(home, Path(SANDBOX_TMP)):
            args += ["--dir", str(home)]  # empty, like the tmpfs a home elsewhere gets
        elif home is not None and home != Path("/") and home not in hidden:
            args += self._emptied(home, self.limits.home_bytes)
            hidden.append(home)
        binds = [(path, path) for path in self.home_binds] + list(self.alias_binds)
        for source, dest in binds:
            if any(_under(dest, h) for h in hidden) and source.exists():
                args += ["--ro-bind", str(source), str(dest)]
        if self.writable is not None:
            args += ["--bind", str(self.writable), str(self.root)]
        elif any(_under(self.root, h) for h in hidden):
            args += ["--ro-bind", str(self.root), str(self.root)]
        args += self._masks(hidden)
        for path in self.writable_files:
            args += ["--bind", str(path), str(path)]
        if self.outside is None:
            args += ["--remount-ro", "/"]
        return args

    def _emptied(self, path: Path, size: int | None) -> list[str]:
        """The options that make `path` an empty directory: a tmpfs (of `size` bytes), or
        on a speculation, its skeleton's in the `outside` view that is the root."""
        if self.outside is not None:
            return ["--dir", str(path)]
        return [*([] if size is None else ["--size", str(size)]), "--tmpfs", str(path)]

    def _top_level(self, args: list[str]) -> list[Path]:
        """Add to `args` what makes the top of the file system: each system directory bound
        read-only, each symlink made again, every other directory an empty tmpfs (its
        symlinks made again) with the system's package databases and any system directory
        that is a symlink into it given back; the files there are left out. Returns the
        emptied directories."""
        view = top_view()
        for target, link in () if self.outside is not None else view.links:
            args += ["--symlink", target, link]  # else the skeleton has them (`layout`)
        for path in view.system:
            if path == ETC and self.etc_view is not None:
                args += ["--ro-bind", str(self.etc_view), str(path)]
                for mount in self.etc_mounts:
                    args += ["--ro-bind", str(mount), str(mount)]
            else:
                args += ["--ro-bind", str(path), str(path)]
        for path in view.private:
            args += self._emptied(path, self.limits.home_bytes)
            if self.outside is None:  # else the skeleton has them (`layout`)
                for target, link in view.inner_links.get(path, ()):
                    args += ["--symlink", target, link]
        for path in view.inside:
            args += ["--ro-bind", str(path), str(path)]
        return list(view.private)

    def _joined(self, args: list[str]) -> list[str]:
        """`args` (bwrap's) run by one shell, started by the setup's prefix, that first
        runs the setup's steps, moves itself into the pids cgroup and opens the seccomp
        filter on SECCOMP_FD for bwrap to read (none of these: `args`)."""
        setup = self.setup or PreJail()
        variables = list(setup.variables)
        steps = list(setup.steps)
        if self.pids_join is not None:
            variables.append(("join", str(self.pids_join)))
            steps.append(f'echo 0 > "$join" || exit {CAP_FAILED}')
        run = 'exec "$@"'
        if self.seccomp is not None:
            variables.append(("filter", str(self.seccomp)))
            args = [*args, "--seccomp", str(SECCOMP_FD)]
            run += f' {SECCOMP_FD}<"$filter"'
        if not variables and not steps:
            return [*setup.prefix, *args]
        return [*setup.prefix, *shell_line(variables, steps, run, args)]

    def _masks(self, hidden: list[Path]) -> list[str]:
        args: list[str] = []
        shown = (self.root, *self.home_binds, *(dest for _, dest in self.alias_binds))

        def seen(path: Path) -> bool:  # not hidden by an empty tmpfs already
            return not any(_under(path, h) for h in hidden) or any(_under(path, s) for s in shown)

        viewed = self.etc_hidden if self.etc_view is not None and ETC in top_view().system else ()
        for path in (*self.masked, *system_secrets()):
            if not seen(path) or path in viewed:  # the view of /etc hides it already
                continue
            if path.is_dir() and not path.is_symlink():
                args += ["--tmpfs", str(path), "--remount-ro", str(path)]
            elif path.exists():
                args += ["--ro-bind", "/dev/null", str(path)]
        for copy, path in self.replaced:
            if seen(path) and path.is_file():
                args += ["--ro-bind", str(copy), str(path)]
        return args

    def environ(self, environ: Mapping[str, str]) -> dict[str, str]:
        """`environ` as the command sees it inside: temporary files go to the private /tmp."""
        inside = dict(environ)
        for name in ("TMPDIR", "TMP", "TEMP"):
            if name in inside or name == "TMPDIR":
                inside[name] = SANDBOX_TMP
        return inside


def shell_line(
    variables: Sequence[tuple[str, str]], steps: Sequence[str], run: str, args: Sequence[str]
) -> list[str]:
    """The `sh -c` command line that runs `steps`, then `run` (`exec "$@"`: `args`), each
    of `variables` given as "$name" (values passed as arguments, never in the script)."""
    taken = " ".join(f'{name}="${index}"' for index, (name, _) in enumerate(variables, 1))
    parts = [taken, f"shift {len(variables)}"] if variables else []
    script = "; ".join([*parts, *steps, run])
    return ["sh", "-c", script, "sh", *(value for _, value in variables), *args]


_NAMESPACES = (
    "--unshare-user",
    "--unshare-ipc",
    "--unshare-pid",
    "--unshare-net",
    "--unshare-uts",
    "--unshare-cgroup-try",
    "--disable-userns",
    "--cap-drop",
    "ALL",
    "--die-with-parent",
    "--new-session",
)


@dataclass(frozen=True, slots=True)
class TopView:
    """The top of this machine's file system, as every jail shows it: the top-level
    symlinks (target, path), the system directories, the private ones (`private_dirs`) with
    the symlinks in each, and the system data inside those (`system_inside`). `watched`:
    the directories whose listings it was read from, and `key` their modification times
    then; while they are the same, so is the view."""

    links: tuple[tuple[str, str], ...]
    system: tuple[Path, ...]
    private: tuple[Path, ...]
    inner_links: Mapping[Path, tuple[tuple[str, str], ...]]
    inside: tuple[Path, ...]
    watched: tuple[Path, ...]
    key: tuple[int, ...]


_TOPS: dict[Path, TopView] = {}  # the last view looked at, by top directory


def top_view(top: Path = Path("/")) -> TopView:
    """This machine's TopView (of `top`): the last one while no directory it was read
    from changed — a stat each, instead of listing `/` and the private directories and
    statting what is in them for every command —, else a fresh look."""
    last = _TOPS.get(top)
    if last is not None and _mtimes(last.watched) == last.key:
        return last
    view = _TOPS[top] = _look_at_top(top)
    return view


def _look_at_top(top: Path) -> TopView:
    private = private_dirs(top)
    data_parents = {Path(p).parent for p in SYSTEM_DATA}
    targets = {Path(top, name).resolve().parent for name in SYSTEM_DIRS}
    watched = tuple(dict.fromkeys([top, *private, *sorted(data_parents | targets)]))
    key = _mtimes(watched)  # before the look: a change during it shows at the next one
    links: list[tuple[str, str]] = []
    system: list[Path] = []
    for path in _top_entries(top):
        if path.name in MADE_DIRS:
            continue
        if path.is_symlink():
            links.append((os.readlink(path), str(path)))
        elif path.name in SYSTEM_DIRS and path.is_dir():
            system.append(path)
    inner = {path: tuple(symlinks_in(path)) for path in private}
    inside = tuple(system_inside(private))
    return TopView(tuple(links), tuple(system), tuple(private), inner, inside, watched, key)


def _mtimes(paths: Sequence[Path]) -> tuple[int, ...]:
    found = []
    for path in paths:
        try:
            found.append(os.stat(path).st_mtime_ns)
        except OSError:
            found.append(-1)
    return tuple(found)


def private_dirs(top: Path = Path("/")) -> list[Path]:
    """The top-level directories that are not the system's (SYSTEM_DIRS), each to be
    replaced by an empty tmpfs: homes, /root, /var (its symlinks are made again), mounted
    media, and whatever else the machine keeps at the top."""
    try:
        names = sorted(os.listdir(top))
    except OSError:
        return []
    found = []
    for name in names:
        path = top / name
        if name not in SYSTEM_DIRS and path.is_dir() and not path.is_symlink():
            found.append(path)
    return found


def system_inside(private: list[Path]) -> list[Path]:
    """What of the system lies inside the emptied directories and is given back read-only:
    the package databases (`dpkg -s` must not say a package is missing) and the target of
    a system directory that is a symlink into one (`/opt -> var/opt`)."""
    found = [Path(p) for p in SYSTEM_DATA if Path(p).is_dir()]
    for name in sorted(SYSTEM_DIRS):
        link = Path("/", name)
        if link.is_symlink():
            target = link.resolve()
            if any(_under(target, d) for d in private) and target.is_dir():
                found.append(target)
    return [p for p in found if any(_under(p, d) for d in private)]


def _top_entries(top: Path = Path("/")) -> list[Path]:
    try:
        return [top / name for name in sorted(os.listdir(top))]
    except OSError:
        return []


@functools.cache
def system_secrets() -> tuple[Path, ...]:
    """The system's own secrets this user can read, each masked like a project secret:
    SYSTEM_SECRETS, every entry under /etc that others may not read (root can read them
    all: a service's password, a Wi-Fi key, a registry login) and every one there whose
    name is secret (secret_names.py: a `pip.conf`, an `npmrc`). Walked once a process."""
    found = [Path(p) for pattern in SYSTEM_SECRETS for p in sorted(glob.glob(pattern))]
    for top, dirs, files in os.walk("/etc"):
        for name in [*dirs, *files]:
            path = Path(top, name)
            try:
                info = path.lstat()
            except OSError:
                continue
            if stat.S_ISLNK(info.st_mode):
                continue
            if not info.st_mode & stat.S_IROTH or is_secret_name(path):
                found.append(path)
        dirs[:] = [d for d in dirs if Path(top, d) not in found]  # masked whole
    return tuple(p for p in dict.fromkeys(found) if os.access(p, os.R_OK))


def symlinks_in(directory: Path) -> list[tuple[str, str]]:
    """(target, path) of each of `directory`'s symlinks, made again inside its tmpfs or
    skeleton (/var has /var/run and /var/lock pointing at /run)."""
    found: list[tuple[str, str]] = []
    try:
        children = sorted(directory.iterdir())
    except OSError:
        return found
    for child in children:
        if child.is_symlink():
            found.append((os.readlink(child), str(child)))
    return found


def _under(path: Path, directory: Path) -> bool:
    """`path.is_relative_to(directory)` for absolute, normalised paths, as string
    comparisons (a jail's command line asks it hundreds of times)."""
    inner, outer = str(path), str(directory)
    return inner == outer or inner.startswith(outer.rstrip("/") + "/")
