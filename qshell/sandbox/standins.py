"""Stand-ins: the project's secrets, as a speculated command sees them, planted so a touch shows.

A proven command's jail binds an empty, unreadable file over each secret of the project
(jail.py `_masks`): it reads nothing, and nothing says it tried — right for a command that
also runs jailed live. A speculated command's live counterpart runs unjailed, so what it
derives from a secret (`sed 's/=.*/=/' .env > env.template`) or writes to one (`echo K=v >>
.env`) would differ from the live run, by a name the command may compute (`cat $(echo
.e)nv`). So on the kernel overlay (mount.py) each secret of the project is hidden instead by
a stand-in planted in the command's fresh upper layer before it starts (`plant`): a file
holding a random token of its own (never the secret) with its access time at the epoch, or an empty
opaque directory for a secret directory (with a stand-in for each of its files and
directories, so a read by name meets one too), and the directories on the way made as overlayfs
copies them up (the mode, owner and times of the view they stand in). The kernel updates
an upper file's access time through the overlay on read, mmap and sendfile (not on
copy_file_range, nor for O_NOATIME), so once the command ended, `StandIns.touched` names
each stand-in it read or listed (its access time moved), wrote, chmodded, renamed or
deleted (inode, size, mtime or ctime changed, a whiteout or another file there), or wrote
into (a directory's entries), and each file of the layer holding a token (a copy made
with copy_file_range); `remove` then takes the untouched stand-ins, and the directories
made for them that nothing else was written into, out of the layer, which then holds only
what the command did. `blind` says the layer's file system keeps no access times (a
`noatime` mount), so a read could not be seen. Files in the layer only; never follows a
symlink; any thread.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

OPAQUE_XATTR = "user.overlay.opaque"
PROBE_NAME = ".qshell-atime-probe"
MAX_MIRRORED = 2_000  # entries of one secret directory given stand-ins of their own
_KEPT: dict[int, bool] = {}  # atime_kept, by device
_KEPT_LOCK = threading.Lock()


@dataclass(frozen=True, slots=True)
class _Planted:
    ino: int
    size: int
    mtime_ns: int
    ctime_ns: int
    directory: bool


@dataclass(frozen=True, slots=True)
class _Made:
    mode: int
    uid: int
    gid: int


@dataclass
class StandIns:
    """The stand-ins planted in one command's upper layer, by path relative to `root`."""

    upper: Path
    root: Path
    tokens: dict[bytes, str] = field(default_factory=dict)  # each stand-in file's content
    planted: dict[str, _Planted] = field(default_factory=dict)
    made: dict[str, _Made] = field(default_factory=dict)  # directories made on the way
    blind: bool = False  # no access times kept: a read of a stand-in cannot be seen

    @property
    def paths(self) -> frozenset[Path]:
        """The secrets the stand-ins hide (absolute; the jail binds no mask over them)."""
        return frozenset(self.root / rel for rel in self.planted)

    def touched(self) -> list[str]:
        """The secrets (relative paths, sorted) the command read, listed, wrote, changed or
        removed, and the files of the layer that are a copy of a stand-in."""
        found = [rel for rel, was in self.planted.items() if not _as_planted(self.upper / rel, was)]
        if self.tokens:
            found += self._copies()
        return sorted(set(found))

    def remove(self) -> None:
        """Take the stand-ins, all untouched (`touched` found none), and the directories
        made for them that hold nothing else and keep the mode they were made with, out of
        the layer; OSError when one stays, which would be applied as a deletion."""
        touched = [
            rel for rel, was in self.planted.items() if not _as_planted(self.upper / rel, was)
        ]
        if touched:
            raise OSError(f"the stand-ins of {', '.join(sorted(touched))} were touched")
        for rel in sorted(self.planted, key=lambda r: -r.count("/")):
            path = self.upper / rel
            if self.planted[rel].directory:
                os.rmdir(path)
            else:
                os.unlink(path)
        for rel in sorted(self.made, key=lambda r: -r.count("/")):
            path = self.upper / rel
            with contextlib.suppress(OSError):
                info = os.lstat(path)
                same = _Made(stat.S_IMODE(info.st_mode), info.st_uid, info.st_gid)
                if stat.S_ISDIR(info.st_mode) and same == self.made[rel] and not os.listdir(path):
                    os.rmdir(path)

    def _copies(self) -> list[str]:
        found: list[str] = []
        sizes = {len(token) for token in self.tokens}
        for top, dirs, files in os.walk(self.upper):
            base = Path(top).relative_to(self.upper).as_posix()
            inside = [f"{base}/{d}" if base != "." else d for d in dirs]
            dirs[:] = [d for d, rel in zip(dirs, inside, strict=True) if rel not in self.planted]
            for name in files:  # never a stand-in directory: a listing moves its atime
                path = Path(top, name)
                rel = path.relative_to(self.upper).as_posix()
                if rel in self.planted:
                    continue
                with contextlib.suppress(OSError):
                    info = os.lstat(path)
                    if stat.S_ISREG(info.st_mode) and info.st_size in sizes:
                        source = self.tokens.get(_read(path))
                        if source is not None:
                            found.append(f"{source} (copied to {rel})")
        return found


def plant(upper: Path, root: Path, hidden: Iterable[Path], layers: Sequence[Path] = ()) -> StandIns:
    """Plant in the fresh `upper` layer a stand-in for each of the `hidden` paths that is
    a file or directory inside `root` reached through directories only, in the view of
    `layers` (top first) over `root`; the others are left to the jail's masks."""
    found = StandIns(upper, root)
    wanted = sorted(rel for rel in (_inside(root, path) for path in hidden) if rel is not None)
    for rel in wanted:
        kind = _shown(root, layers, rel)
        if kind is None or any(rel.startswith(f"{done}/") for done in found.planted):
            continue
        _make_parents(found, root, layers, rel)
        _plant_one(found, rel, kind, root / rel)
        if kind == "dir":
            _mirror(found, root, rel)
    if not found.planted:
        return found
    _set_times(found, root, layers)
    for rel, was in found.planted.items():
        info = os.lstat(upper / rel)
        found.planted[rel] = _Planted(
            info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns, was.directory
        )
    found.blind = not atime_kept(upper.parent)
    return found


def atime_kept(where: Path) -> bool:
    """Whether the file system of the directory `where` updates the access time of a file
    read and of a directory listed, once it is older than a day (`relatime` does; `noatime`
    and `nodiratime` do not); tried once per file system and process."""
    try:
        device = os.stat(where).st_dev
    except OSError:
        return False
    with _KEPT_LOCK:
        if device not in _KEPT:
            _KEPT[device] = _try_atime(where)
        return _KEPT[device]


def _try_atime(where: Path) -> bool:
    probe = where / f"{PROBE_NAME}-{secrets.token_hex(4)}"
    try:
        probe.mkdir(mode=0o700)
        (probe / "f").write_bytes(b"x")
        for path in (probe / "f", probe):
            os.utime(path, ns=(0, os.lstat(path).st_mtime_ns))
        _read(probe / "f")
        os.listdir(probe)
        return all(os.lstat(path).st_atime_ns != 0 for path in (probe / "f", probe))
    except OSError:
        return False
    finally:
        with contextlib.suppress(OSError):
            (probe / "f").unlink()
        with contextlib.suppress(OSError):
            probe.rmdir()


def _inside(root: Path, path: Path) -> str | None:
    if path == root or not path.is_relative_to(root):
        return None
    return path.relative_to(root).as_posix()


def _shown(root: Path, layers: Sequence[Path], rel: str) -> str | None:
    """ "file" or "dir": what `rel` is in the view (a real file or directory of the
    project, under directories only, not covered by a layer); None otherwise."""
    parts = rel.split("/")
    for depth in range(1, len(parts) + 1):
        sub = "/".join(parts[:depth])
        for layer in layers:
            with contextlib.suppress(OSError):
                info = os.lstat(layer / sub)
                if depth == len(parts) or not stat.S_ISDIR(info.st_mode) or _opaque(layer / sub):
                    return None  # a layer replaced or removed it: nothing real to hide
    try:
        info = os.lstat(root / rel)
    except OSError:
        return None
    if any((root / p).is_symlink() for p in _ancestors(rel)):
        return None
    if stat.S_ISDIR(info.st_mode):
        return "dir"
    return "file" if stat.S_ISREG(info.st_mode) else None


def _make_parents(found: StandIns, root: Path, layers: Sequence[Path], rel: str) -> None:
    for sub in _ancestors(rel):
        if sub in found.made:
            continue
        source = _topmost(root, layers, sub)
        info = os.lstat(source)
        os.mkdir(found.upper / sub, 0o700)  # its own mode once what it holds is made
        found.made[sub] = _Made(stat.S_IMODE(info.st_mode), info.st_uid, info.st_gid)


def _plant_one(found: StandIns, rel: str, kind: str, real: Path, *, opaque: bool = True) -> None:
    """Plant the stand-in of `real` at `rel` in the layer (a `kind` "dir" or "file")."""
    mode, path = stat.S_IMODE(os.lstat(real).st_mode), found.upper / rel
    found.planted[rel] = _Planted(0, 0, 0, 0, kind == "dir")
    if kind == "dir":
        os.mkdir(path, 0o700)
        if opaque:  # what the real directory holds stays below, unseen
            os.setxattr(path, OPAQUE_XATTR, b"y", follow_symlinks=False)
        os.chmod(path, mode | 0o700)
        return
    token = f"qshell stands in here for a secret {secrets.token_hex(16)}\n".encode()
    found.tokens[token] = rel
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        os.write(fd, token)
        os.fchmod(fd, mode | 0o600)  # readable and writable: a try shows, it does not fail
    finally:
        os.close(fd)


def _mirror(found: StandIns, root: Path, top: str) -> None:
    """Plant below the stand-in of the secret directory `top` a stand-in for each of its
    files and directories (its symlinks and special files left out), so that a read by a
    name the command computes, not only a listing, meets one; up to MAX_MIRRORED entries
    (beyond, the rest is only hidden: the directory is opaque)."""
    count = 0
    for where, dirs, files in os.walk(root / top):
        base = Path(where).relative_to(root).as_posix()
        for name in sorted(dirs) + sorted(files):
            rel, real = f"{base}/{name}", Path(where, name)
            with contextlib.suppress(OSError):
                info = os.lstat(real)
                kind = "dir" if stat.S_ISDIR(info.st_mode) else "file"
                if not (stat.S_ISDIR(info.st_mode) or stat.S_ISREG(info.st_mode)):
                    continue
                if count >= MAX_MIRRORED:
                    return
                _plant_one(found, rel, kind, real, opaque=False)
                count += 1
        dirs[:] = [d for d in dirs if f"{base}/{d}" in found.planted]


def _set_times(found: StandIns, root: Path, layers: Sequence[Path]) -> None:
    """Each stand-in's access time to the epoch (any read moves it) and modification time
    to the secret's; each directory made, deepest first, the owner, mode and times of the
    one it shows (recorded as made: what `remove` compares)."""
    for rel in found.planted:
        real = os.lstat(root / rel)
        os.utime(found.upper / rel, ns=(0, real.st_mtime_ns), follow_symlinks=False)
    for rel in sorted(found.made, key=lambda r: -r.count("/")):
        path, source = found.upper / rel, os.lstat(_topmost(root, layers, rel))
        if os.geteuid() == 0:  # as a copy-up keeps the owner
            with contextlib.suppress(OSError):
                os.chown(path, source.st_uid, source.st_gid, follow_symlinks=False)
        os.chmod(path, stat.S_IMODE(source.st_mode))
        os.utime(path, ns=(source.st_atime_ns, source.st_mtime_ns), follow_symlinks=False)
        mine = os.lstat(path)
        found.made[rel] = _Made(stat.S_IMODE(mine.st_mode), mine.st_uid, mine.st_gid)


def _as_planted(path: Path, was: _Planted) -> bool:
    """Whether the stand-in at `path` is as planted: same type, inode, size and times (its
    access time still the epoch). Never lists a directory, which would move its own."""
    try:
        info = os.lstat(path)
    except OSError:
        return False
    same = (info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns) == (
        was.ino,
        was.size,
        was.mtime_ns,
        was.ctime_ns,
    )
    if not same or info.st_atime_ns != 0:  # an entry made inside moves the times too
        return False
    return stat.S_ISDIR(info.st_mode) if was.directory else stat.S_ISREG(info.st_mode)


def _topmost(root: Path, layers: Sequence[Path], rel: str) -> Path:
    """The directory at `rel` that the view shows: the topmost layer's, else the real one."""
    for layer in layers:
        if (layer / rel).is_dir() and not (layer / rel).is_symlink():
            return layer / rel
    return root / rel


def _ancestors(rel: str) -> list[str]:
    parts = rel.split("/")
    return ["/".join(parts[:depth]) for depth in range(1, len(parts))]


def _opaque(path: Path) -> bool:
    try:
        return os.getxattr(path, OPAQUE_XATTR, follow_symlinks=False) == b"y"
    except OSError:
        return False


def _read(path: Path) -> bytes:
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        return os.read(fd, 1 << 16)
    finally:
        os.close(fd)
