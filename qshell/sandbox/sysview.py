"""The system's `/etc` as a speculated command sees it: one read-only overlay hiding its secrets.

A jail binds `/etc` read-only and then binds over each system secret there (jail.py
`_masks`: `/etc/shadow`, `/etc/ssh`, an unreadable `pg_hba.conf`, …) — one bubblewrap bind
each, and each bind makes bubblewrap read the whole mount table again: a dozen and a half
of them cost a speculated command 3 ms of CPU. A speculated command's line already runs in
mount and user namespaces of its own (mount.py), so there `/etc` is shown instead from a
read-only kernel overlay (no upper layer) whose top layer, `hidden`, holds for each of those
secrets an empty file of mode 000 (opened, it fails as a masked file does: permission denied;
written, the file system is read-only) or an empty opaque directory (listed, it is empty),
with the directories on the way taking the owner and mode of the ones they stand in for.
`furnish` makes that layer, or keeps the one made for an earlier command when it is the
same (`LAYOUT_NAME` beside it). An overlay shows a directory's own files, not what is
mounted inside it, so every file system mounted below `/etc` (`submounts`: a container's
`/etc/hosts`) is bound again by the jail, and a secret at or below one is left to a bind
of its own (`hideable`). Makes and reads files below the paths it is given, never
following a symlink; any thread.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
from collections.abc import Sequence
from pathlib import Path

from qshell.sandbox.jail import ETC
from qshell.sandbox.outside import OPAQUE_XATTR, made_already

MOUNTINFO = Path("/proc/self/mountinfo")
LAYOUT_NAME = "hidden.json"  # beside the layer: the secrets and directories it was made for
DIR, FILE = "dir", "file"


def submounts(top: Path = ETC, mountinfo: Path = MOUNTINFO) -> tuple[Path, ...]:
    """The outermost mount points strictly below `top` (none where the table cannot be
    read: then nothing is mounted there that this process can see either)."""
    try:
        lines = mountinfo.read_text(encoding="utf-8", errors="surrogateescape").splitlines()
    except OSError:
        return ()
    below = str(top).rstrip("/") + "/"  # an escape never stands for one of these characters
    fields = [line.split(" ", 5) for line in lines]
    inside = sorted(
        {Path(_unescaped(f[4])) for f in fields if len(f) > 4 and f[4].startswith(below)}
    )
    return tuple(p for p in inside if not any(p != q and p.is_relative_to(q) for q in inside))


def hideable(secrets: Sequence[Path], mounts: Sequence[Path], top: Path = ETC) -> tuple[Path, ...]:
    """Those of `secrets` strictly below `top` that the view hides: not at or below one of
    the file systems mounted there (`mounts`), which the jail binds again."""
    return tuple(
        path
        for path in secrets
        if path != top
        and path.is_relative_to(top)
        and not any(path.is_relative_to(mount) for mount in mounts)
    )


Entry = tuple[str, int, int, int]  # kind, mode, uid, gid


def furnish(layer: Path, secrets: Sequence[Path], top: Path = ETC) -> None:
    """Make at `layer` the top layer that hides `secrets` (below `top`, each a file or a
    directory there now; others are left out) in a view of `top`, unless the one there was
    made for the same secrets and directories."""
    entries, opaque, own = _layout(secrets, top)
    record = layer.parent / LAYOUT_NAME
    text = json.dumps([entries, opaque, own], sort_keys=True)
    if made_already(layer, record, text):
        return
    for rel in sorted(entries, key=lambda r: r.count("/")):
        path, (kind, _, uid, gid) = layer / rel, entries[rel]
        if kind == FILE:
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0))
            _dress(path, 0, uid, gid)
            continue
        os.mkdir(path, 0o700)
        if rel in opaque:
            os.setxattr(path, OPAQUE_XATTR, b"y", follow_symlinks=False)
    for rel in sorted(entries, key=lambda r: -r.count("/")):  # deepest first: a mode may shut
        kind, mode, uid, gid = entries[rel]
        if kind == DIR:
            _dress(layer / rel, mode, uid, gid, top / rel)
    _dress(layer, *own[1:], top)
    record.write_text(text, encoding="utf-8")


def _layout(secrets: Sequence[Path], top: Path) -> tuple[dict[str, Entry], list[str], Entry]:
    """What the layer holds, by path relative to `top`: (kind, mode, uid, gid) of each
    stand-in and each directory on the way, which of them are opaque, and `top`'s own."""
    entries: dict[str, Entry] = {}
    opaque: list[str] = []
    for path in secrets:
        try:
            info = os.lstat(path)
            ways = [os.lstat(parent) for parent in _between(top, path)]
        except OSError:
            continue
        if any(not stat.S_ISDIR(way.st_mode) for way in ways):
            continue  # reached through a symlink: not the view's
        rel = path.relative_to(top).as_posix()
        for parent, way in zip(_between(top, path), ways, strict=True):
            entries.setdefault(parent.relative_to(top).as_posix(), _entry(DIR, way))
        if stat.S_ISDIR(info.st_mode):
            entries[rel] = (DIR, 0o755, info.st_uid, info.st_gid)
            opaque.append(rel)
        elif not stat.S_ISLNK(info.st_mode):
            entries[rel] = (FILE, 0, info.st_uid, info.st_gid)
    return entries, sorted(opaque), _entry(DIR, os.stat(top))


def _between(top: Path, path: Path) -> list[Path]:
    """The directories strictly between `top` and `path`, outermost first."""
    return list(reversed([p for p in path.parents if p != top and p.is_relative_to(top)]))


def _entry(kind: str, info: os.stat_result) -> Entry:
    return (kind, stat.S_IMODE(info.st_mode), info.st_uid, info.st_gid)


def _dress(path: Path, mode: int, uid: int, gid: int, times: Path | None = None) -> None:
    """Give `path` the owner (root only may) and mode of the entry it stands in for, and
    the access and modification times of `times`."""
    if os.geteuid() == 0:
        with contextlib.suppress(OSError):
            os.chown(path, uid, gid, follow_symlinks=False)
    os.chmod(path, mode)
    if times is not None:
        with contextlib.suppress(OSError):
            real = os.lstat(times)
            os.utime(path, ns=(real.st_atime_ns, real.st_mtime_ns), follow_symlinks=False)


def _unescaped(field: str) -> str:
    """A mountinfo field with its octal escapes (`\\040` for a blank) read back."""
    parts = field.split("\\")
    out = [parts[0]]
    for part in parts[1:]:
        if len(part) >= 3 and all(c in "01234567" for c in part[:3]):
            out.append(chr(int(part[:3], 8)) + part[3:])
        else:
            out.append("\\" + part)
    return "".join(out)
