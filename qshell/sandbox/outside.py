"""The world outside the project, for a speculated command: a skeleton, and what it wrote there.

A proven command's jail empties `/tmp`, `/run`, the home and every private top-level
directory with a tmpfs each (jail.py), and what a command writes there vanishes with it —
harmless for a read-only command, but a speculated one that writes `../sibling.txt`,
`~/.local/bin/tool` or `/tmp/report` would say "done" of a write nothing keeps, where a
live run makes it. So a speculated command's jail has for its root one more kernel overlay
(mount.py `OverlayMount.outside`, mounted in the command's own namespace beside the
project's, its options naming no host path), writable, bound at `/` (one bind, not one per
emptied directory): its lower layer is a skeleton made on the host before the command
(`layout` reads it off the jail's bubblewrap options, `furnish` makes it, or keeps the one
made for an earlier command when it is the same: no command writes a lower layer): each
emptied directory, every mount point bubblewrap makes with the directories on the way (the
system's directories, `/dev`, the project's parents, the home, what is bound back) and the
symlinks of the top level and of the emptied directories (`/bin`, `/var/run`), all empty;
its upper layer is a fresh private directory. Whatever the command writes outside the
project — a new directory beside `/usr` too — lands in that upper layer, on
the host, where `writes` finds it after the command ended (its pid namespace went with it,
so nothing writes any more): every entry there but a skeleton directory copied up as it was
(a parent of a write) is a write. A new entry directly in `/tmp` (the command's `TMPDIR`),
and anything in the home's `~/.cache` (a formatter's or a compiler's cache, which the XDG
base directory rules let anyone delete), is `temporary`, as a live run's temporary files
are; every other one — in the home, in `/run`,
beside the project, inside a skeleton directory under `/tmp` (the project's parents there, a
home under `/tmp`), a skeleton entry changed or deleted — is `lasting`, which a speculation
cannot keep. Makes and walks directories below the paths it is given, never following a
symlink; any thread.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import stat
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from qshell.sandbox.jail import (
    MADE_DIRS,
    SANDBOX_TMP,
    SandboxUnavailable,
    symlinks_in,
    top_view,
)

DIR, FILE, LINK = "dir", "file", "link"
SKELETON_MODE = 0o755  # as bubblewrap makes a tmpfs and the directories in it
OPAQUE_XATTR = "user.overlay.opaque"
MAX_LASTING = 20  # lasting writes named; the walk stops there
LAYOUT_NAME = "lower.json"  # beside the skeleton: the layout it was made for
_BINDS = frozenset({"--bind", "--ro-bind", "--dev-bind"})
_MOUNTS = _BINDS | {"--tmpfs", "--dev", "--proc"}
_MAKES = _MOUNTS | {"--dir", "--symlink"}
_TWO = _BINDS | {"--symlink", "--chmod"}
_ONE = frozenset({"--tmpfs", "--dir", "--remount-ro", "--dev", "--proc", "--size", "--perms"})
_ONE_MORE = frozenset({"--chdir", "--seccomp", "--cap-drop", "--cap-add", "--hostname"})
_NONE = frozenset(
    {"--unshare-user", "--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts"}
    | {"--unshare-cgroup-try", "--unshare-cgroup", "--unshare-all", "--disable-userns"}
    | {"--die-with-parent", "--new-session", "--as-pid-1", "--clearenv"}
)


@dataclass(frozen=True, slots=True)
class Made:
    """One entry of the skeleton: a directory, an empty file or a symlink to `target`."""

    kind: str
    target: str = ""


@dataclass(frozen=True, slots=True)
class Writes:
    """What a command left outside the project (paths as it saw them)."""

    temporary: list[str] = field(default_factory=list)  # new entries directly in /tmp
    lasting: list[str] = field(default_factory=list)  # everything else (at most MAX_LASTING)


def layout(args: Sequence[str], outside: Path) -> dict[str, Made]:
    """The skeleton, by path relative to the outside view's root, that the bubblewrap
    options `args` (bwrap first, no command) need where they bind a directory of the
    `outside` view: each such directory, each mount point made inside one and the
    directories on the way, and the symlinks the jail makes again in a private top-level
    directory. SandboxUnavailable for an option it does not know."""
    made: dict[str, Made] = {}
    mounts: dict[str, bool] = {}  # mount point → shown from the outside view (the latest)
    made_in: list[tuple[str, bool]] = []  # each mount, in turn
    roots: set[str] = set()  # the directories bound from the outside view
    top = str(outside)
    for op, params in _options(args[1:]):
        if op not in _MAKES:
            continue
        dest = params[-1]
        scratch = op == "--bind" and _under(params[0], top)
        if scratch:
            if (rel := os.path.relpath(params[0], top)) != ".":
                _add(made, rel, Made(DIR))
            roots.add(dest)
        elif roots.isdisjoint(_up_from(dest)):
            continue  # elsewhere: the system's, the project's own mounts
        elif (point := _owner(mounts, dest)) is not None and dest != point:
            kind = Made(LINK, params[0]) if op == "--symlink" else Made(_kind(op, Path(params[0])))
            _add(made, dest.lstrip("/"), kind)
        if op in _MOUNTS:
            mounts[dest] = scratch
            made_in.append((dest, scratch))
    for point, scratch in made_in:
        if scratch:
            for target, link in _links_made(point):
                _add(made, link.lstrip("/"), Made(LINK, target))
    return made


def _links_made(point: str) -> Sequence[tuple[str, str]]:
    """The symlinks (target, path) the jail makes again in the directory `point` shown
    from the outside view: at the root, the top level's and each private directory's; in
    a private top-level directory, its own."""
    view, name = top_view(), point.lstrip("/")
    if not name:
        return [*view.links, *(link for p in view.private for link in view.inner_links[p])]
    if "/" in name or name in MADE_DIRS:
        return ()
    links = view.inner_links.get(Path(point))
    return symlinks_in(Path(point)) if links is None else links


def made_already(layer: Path, record: Path, wanted: str) -> bool:
    """Whether the layer at `layer` is the one `wanted` describes (as `record`, written
    once it was made, says); when not, whatever is there goes and `layer` is made anew,
    empty (mode 0700), for the caller to fill and then record."""
    with contextlib.suppress(OSError):
        if layer.is_dir() and record.read_text(encoding="utf-8") == wanted:
            return True
    record.unlink(missing_ok=True)
    remove_tree(layer)
    layer.mkdir(mode=0o700)
    return False


def furnish(lower: Path, made: dict[str, Made]) -> None:
    """Make the skeleton `made` (layout) at `lower`, unless the skeleton there is that one
    already (`LAYOUT_NAME` beside it says): each entry only where every directory on its
    way is one of the skeleton's (never through a symlink)."""
    record = lower.parent / LAYOUT_NAME
    wanted = json.dumps({rel: [m.kind, m.target] for rel, m in sorted(made.items())})
    if made_already(lower, record, wanted):
        return
    os.chmod(lower, SKELETON_MODE)  # the root of a speculated command's file system
    for rel in sorted(made, key=lambda r: r.count("/")):
        parent = rel.rpartition("/")[0]
        if parent and made.get(parent) != Made(DIR):
            continue
        path, entry = lower / rel, made[rel]
        if entry.kind == DIR:
            os.mkdir(path)
            os.chmod(path, SKELETON_MODE)
        elif entry.kind == FILE:
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644))
        else:
            os.symlink(entry.target, path)
    record.write_text(wanted, encoding="utf-8")


def writes(upper: Path, lower: Path, caches: Sequence[Path] = ()) -> Writes:
    """What a command left in the outside view's `upper` layer over the skeleton `lower`:
    new entries directly in /tmp and whatever is in the `caches` directories (a home's
    `~/.cache`: data that may be deleted any time, by the XDG base directory rules) —
    `temporary` —, and every other entry that is not a skeleton directory copied up as it
    was (`lasting`, up to MAX_LASTING)."""
    found = Writes()
    tmp = SANDBOX_TMP.lstrip("/")
    kept = [str(cache).lstrip("/") for cache in caches]
    pending = [""]
    while pending and len(found.lasting) < MAX_LASTING:
        rel = pending.pop()
        try:
            with os.scandir(upper / rel if rel else upper) as entries:
                children = sorted(entry.name for entry in entries)
        except OSError:
            found.lasting.append(f"/{rel}")  # unreadable: a directory the command made so
            continue
        for name in children:
            child = f"{rel}/{name}" if rel else name
            if _kept_as_made(upper / child, lower / child):
                pending.append(child)
            elif rel == tmp or any(_under(child, cache) for cache in kept):
                found.temporary.append(f"/{child}")
            else:
                found.lasting.append(f"/{child}")
    return found


def remove_tree(path: Path) -> None:
    """Remove `path` and everything below it, whatever modes a command left there (a
    directory it made unreadable too); SandboxUnavailable when something stays, so that no
    command runs on what an earlier one left."""
    if not os.path.lexists(path):
        return
    shutil.rmtree(path, ignore_errors=True)
    if os.path.lexists(path) and os.path.isdir(path) and not os.path.islink(path):
        _open_up(str(path))
        for top, dirs, _ in os.walk(path):
            for name in dirs:
                _open_up(os.path.join(top, name))
        shutil.rmtree(path, ignore_errors=True)
    if os.path.lexists(path):
        raise SandboxUnavailable(f"{path}, what a command left, could not be removed")


def _open_up(directory: str) -> None:
    """Make `directory` (never a symlink) listable and writable by its owner."""
    if not os.path.islink(directory):
        with contextlib.suppress(OSError):
            os.chmod(directory, 0o700)


def _kept_as_made(upper: Path, lower: Path) -> bool:
    """Whether `upper` is the skeleton directory `lower` copied up as it was (a parent of
    something the command wrote): a directory of the same mode, not made anew (opaque)."""
    try:
        mine, made = os.lstat(upper), os.lstat(lower)
    except OSError:
        return False
    if not (stat.S_ISDIR(mine.st_mode) and stat.S_ISDIR(made.st_mode)):
        return False
    if stat.S_IMODE(mine.st_mode) != stat.S_IMODE(made.st_mode):
        return False
    try:
        return os.getxattr(upper, OPAQUE_XATTR, follow_symlinks=False) != b"y"
    except OSError:
        return True


def _options(args: Sequence[str]) -> list[tuple[str, list[str]]]:
    found: list[tuple[str, list[str]]] = []
    index = 0
    while index < len(args):
        op = args[index]
        count = 2 if op in _TWO else 1 if op in _ONE | _ONE_MORE else 0
        if count == 0 and op not in _NONE:
            raise SandboxUnavailable(f"the jail's option {op!r} is not known to its skeleton")
        found.append((op, list(args[index + 1 : index + 1 + count])))
        index += 1 + count
    return found


def _owner(mounts: dict[str, bool], dest: str) -> str | None:
    """The mount point of the outside view that `dest` lies in (the deepest mount there,
    the latest of equals), or None when another mount shows it."""
    for point in _up_from(dest):
        if point in mounts:
            return point if mounts[point] else None
    return None


def _up_from(path: str) -> list[str]:
    """`path` (absolute) and each directory above it, deepest first: `/a/b`, `/a`, `/`."""
    found = [path]
    while path != "/":
        path = path.rpartition("/")[0] or "/"
        found.append(path)
    return found


def _kind(op: str, source: Path) -> str:
    if op in _BINDS:
        return DIR if source.is_dir() else FILE
    return DIR


def _add(made: dict[str, Made], rel: str, entry: Made) -> None:
    """Add `rel` and each directory on its way to `made` (a directory already there
    stays one)."""
    parts = rel.split("/")
    for depth in range(1, len(parts)):
        made.setdefault("/".join(parts[:depth]), Made(DIR))
    made.setdefault(rel, entry)


def _under(path: str, directory: str) -> bool:
    return path == directory or path.startswith(directory.rstrip("/") + "/")
