"""What a kernel overlay left in the upper directory, turned into the overlay's records.

A command run on the kernel overlay (sandbox/) writes its own upper layer (a fresh `layer`
above the overlay's `upper/` and the project) as overlayfs does: a written or new file at
its path, a deletion as a whiteout (a character device 0:0), and a directory that replaces
the one below (its old content gone) with the xattr `user.overlay.opaque=y`. `scan` lists
those entries through no-follow descriptors and refuses (`UpperRefused`) a symlink or any other
special file there; `refuse_privileged` refuses setuid/setgid bits and file capabilities;
`changed_paths` names what they change (`note_dir_modes` notes each plain directory's
mode, copied up or chmodded), `drop` removes those a caller
does not want applied (build artefacts the project ignores) from the layer; `merge` moves
the rest into `upper/` as if the command had written it directly (each directory with the
mode the layer gave it; names the command hard-linked stay one inode, and a tool's write to
one of them is made in place, `rewrite_linked`; a tool's write to any copy keeps the copy's
mode, `copy_mode`, as a real write keeps a chmod); `reconcile` makes the
overlay's records from `upper/`, exactly as tool writes would have: each file's original
read from the real tree (or the original the overlay already had), each whiteout or replaced
directory a `Removal` of the real entry with its digest (trees.py); `snapshot` is that
original, and refuses a tool's write to a real file with other hard links (`HardLinked`).
Functions over one overlay's directories; the overlay's lock serialises them.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import shutil
import stat as stat_module
from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from qshell.overlay.dirfd import PathRefused, hash_at, lstat_at, open_chain, open_dir, split_rel
from qshell.overlay.dirnotes import DirNotes
from qshell.overlay.errors import HardLinked, OverlayError, OverlayEscape, os_error
from qshell.overlay.metadata import (
    ACL_XATTRS,
    attrs_at,
    attrs_digest,
    entry_path,
    has_capability,
    write_attrs,
)
from qshell.overlay.plan import may_write
from qshell.overlay.records import Original, Removal
from qshell.overlay.staging import NEW_FILE_MODE
from qshell.overlay.trees import digest_at

OPAQUE_XATTR = "user.overlay.opaque"
FILE, WHITEOUT, DIR = "file", "whiteout", "dir"
MAX_UPPER_ENTRIES = 100_000
NEW_DIR_MODE = 0o777  # before the umask, as mkdir -p makes directories
_CREATE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
INCOMING_PREFIX = ".qshell-incoming-"  # a tool's copy being written, beside its name
_REWRITE_FLAGS = os.O_WRONLY | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC
WRITE_LINKED = "has other hard links, which a speculated write would not keep in step"


class UpperRefused(OverlayError):
    """The upper layer holds something an apply may not bring in (`str()` says what)."""


@dataclass(frozen=True, slots=True)
class UpperEntry:
    rel: str
    kind: str  # FILE | WHITEOUT | DIR
    mode: int = 0  # permission bits (with setuid, setgid, sticky) of a file or directory
    opaque: bool = False  # a directory that replaces the real one
    attrs: str = ""  # a directory's metadata.attrs_digest (its user xattrs and ACLs)


def scan(upper: Path) -> list[UpperEntry]:
    """Every entry of `upper/`, parents before children."""
    found: list[UpperEntry] = []
    with open_dir(upper) as top:
        for entry in _walk(top, ""):
            found.append(entry)
            if len(found) > MAX_UPPER_ENTRIES:
                raise UpperRefused(
                    f"the command left more than {MAX_UPPER_ENTRIES} changed entries"
                )
    return found


def _walk(fd: int, prefix: str) -> Iterator[UpperEntry]:
    for name in sorted(os.listdir(fd)):
        rel = f"{prefix}/{name}" if prefix else name
        info = os.stat(name, dir_fd=fd, follow_symlinks=False)
        mode = info.st_mode
        if stat_module.S_ISREG(mode):
            yield UpperEntry(rel, FILE, stat_module.S_IMODE(mode))
        elif stat_module.S_ISCHR(mode) and info.st_rdev == 0:
            yield UpperEntry(rel, WHITEOUT)
        elif stat_module.S_ISDIR(mode):
            attrs = attrs_digest(attrs_at(fd, name, directory=True) or {})
            with open_chain(fd, [name]) as child:
                yield UpperEntry(rel, DIR, stat_module.S_IMODE(mode), _opaque(child), attrs)
                yield from _walk(child, rel)
        else:
            what = "a symlink" if stat_module.S_ISLNK(mode) else "a special file"
            raise UpperRefused(f"the command made {rel} {what}, which qshell never applies")


def _opaque(fd: int) -> bool:
    try:
        return os.getxattr(fd, OPAQUE_XATTR) == b"y"
    except OSError:
        return False


def changed_paths(entries: list[UpperEntry]) -> list[str]:
    """What a layer's entries change: each file and whiteout, and each replaced (opaque)
    directory with a trailing slash, as git names directories."""
    return [f"{e.rel}/" if e.kind == DIR else e.rel for e in entries if e.kind != DIR or e.opaque]


def retouched(root: Path, entries: list[UpperEntry]) -> list[str]:
    """The plain (not opaque) directories of a layer that a command made or whose mode or
    attrs it changed (a chmod, setfattr or setfacl copies a directory up), each with a
    trailing slash: changes of their own, which `changed_paths` does not name."""
    return [
        f"{e.rel}/"
        for e in entries
        if e.kind == DIR and not e.opaque and e.rel and _real_dir(root / e.rel) != (e.mode, e.attrs)
    ]


def note_dirs(root: Path, entries: list[UpperEntry], notes: DirNotes) -> None:
    """Note in `notes` each plain directory of a layer that the real tree at `root` has:
    its mode and attrs, as copied up unchanged or as the command changed them from the real
    one's (dirnotes.py; a change the user makes later is a conflict, plan.py)."""
    for entry in entries:
        if entry.kind != DIR or entry.opaque or not entry.rel:
            continue
        real = _real_dir(root / entry.rel)
        if real is not None:
            notes.note_layer_dir(entry.rel, entry.mode, entry.attrs, *real)


def _real_dir(path: Path) -> tuple[int, str] | None:
    """(mode, attrs digest) of the directory at `path`, never through a final symlink;
    None when there is none."""
    mode = dir_mode(path)
    if mode is None:
        return None
    return mode, attrs_digest(attrs_at(None, path, directory=True) or {})


def dress_top(top: Path, root: Path, *, mode: bool = True) -> tuple[int, str]:
    """Give an upper layer's top directory `top` the attrs — and with `mode` the mode — of
    the project directory `root`, since overlayfs shows a layer's own top directory in place
    of the project's: `.` is then the project's to a command, and what a command or a tool
    makes at the top inherits the project's default ACL there, as it would in the project.
    Without `mode` only the default ACL is given (the overlay's private `upper/`). Returns
    the (mode, attrs digest) `top` then has, for `_real_dir` to compare with afterwards."""
    real = attrs_at(None, root, directory=True) or {}
    wanted = real if mode else {k: v for k, v in real.items() if k == ACL_XATTRS[1]}
    given = stat_module.S_IMODE(os.stat(root if mode else top).st_mode)
    write_attrs(os.fspath(top), wanted, directory=True)
    os.chmod(top, given)  # after the attrs: an access ACL sets the mode bits
    found = _real_dir(top)
    assert found is not None
    return found


def top_changed(top: Path, dressed: tuple[int, str]) -> bool:
    """Whether a command changed the mode or attrs of its layer's top directory `top` (the
    project directory's own, to it) from those `dress_top` gave it."""
    return _real_dir(top) != dressed


def dir_mode(path: Path) -> int | None:
    """The permission bits (setuid, setgid and sticky included) of the directory at `path`,
    never through a final symlink; None when there is none."""
    try:
        info = os.lstat(path)
    except OSError:
        return None
    return stat_module.S_IMODE(info.st_mode) if stat_module.S_ISDIR(info.st_mode) else None


def drop(layer: Path, entries: list[UpperEntry], unwanted: Collection[str]) -> list[UpperEntry]:
    """Remove from `layer` what `unwanted` names among its `changed_paths` — a replaced
    directory whole — and the plain directories that leaves empty; the entries that remain."""
    whole = {e.rel for e in entries if e.kind == DIR and e.opaque and f"{e.rel}/" in unwanted}
    gone = {e.rel for e in entries if e.kind != DIR and e.rel in unwanted}
    if not gone and not whole:
        return entries
    with open_dir(layer) as top:
        for rel in sorted(whole | gone):
            if rel in whole or not covered(rel, whole):
                parts = split_rel(rel)
                with open_chain(top, parts[:-1]) as parent:
                    _remove_at(parent, parts[-1], lstat_at(parent, parts[-1]))
        gone |= {e.rel for e in entries if covered(e.rel, whole)}
        emptied = {
            rel.rsplit("/", depth)[0] for rel in gone for depth in range(1, rel.count("/") + 1)
        }
        for entry in reversed(entries):  # children first
            if entry.kind != DIR or entry.opaque or entry.rel not in emptied or entry.rel in gone:
                continue
            parts = split_rel(entry.rel)
            with open_chain(top, parts[:-1]) as parent, open_chain(parent, parts[-1:]) as fd:
                if not os.listdir(fd):
                    os.rmdir(parts[-1], dir_fd=parent)
                    gone.add(entry.rel)
    return [e for e in entries if e.rel not in gone]


def refuse_privileged(layer: Path, root: Path) -> None:
    """UpperRefused when `layer` holds a setuid or setgid file, a file with capabilities
    (`security.capability`), a setuid directory, or a setgid one that neither inherits the
    bit from its parent nor had it in the real tree at `root`: a speculation never applies
    privilege."""
    with open_dir(layer) as top:
        found = _privileged(top, "", bool(os.stat(root).st_mode & stat_module.S_ISGID), root)
    if found is not None:
        raise UpperRefused(f"the command made {found}, which qshell never applies")


def _privileged(fd: int, prefix: str, parent_setgid: bool, root: Path) -> str | None:
    for name in sorted(os.listdir(fd)):
        rel = f"{prefix}/{name}" if prefix else name
        mode = os.stat(name, dir_fd=fd, follow_symlinks=False).st_mode
        if stat_module.S_ISREG(mode):
            if mode & (stat_module.S_ISUID | stat_module.S_ISGID):
                return f"{rel} setuid or setgid"
            if has_capability(fd, name):
                return f"{rel} carry file capabilities"
        elif stat_module.S_ISDIR(mode):
            setgid = bool(mode & stat_module.S_ISGID)
            if mode & stat_module.S_ISUID or (
                setgid and not parent_setgid and not _setgid(root / rel)
            ):
                return f"{rel} a setuid or setgid directory"
            with open_chain(fd, [name]) as child:
                found = _privileged(child, rel, setgid, root)
            if found is not None:
                return found
    return None


def _setgid(path: Path) -> bool:
    try:
        return bool(os.lstat(path).st_mode & stat_module.S_ISGID)
    except OSError:
        return False


def merge(layer: Path, upper: Path, entries: list[UpperEntry]) -> None:
    """Move a command's layer into `upper/`, parents first: a file or whiteout replaces what
    `upper/` had at its path, an opaque directory replaces it whole (moved as it is), and a
    plain directory is made where missing."""
    moved: set[str] = set()
    with open_dir(layer) as top_layer, open_dir(upper) as top_upper:
        for entry in entries:
            if covered(entry.rel, moved):
                continue  # inside an opaque directory moved whole
            parts = split_rel(entry.rel)
            with (
                open_chain(top_layer, parts[:-1]) as source,
                open_chain(top_upper, parts[:-1]) as target,
            ):
                name, there = parts[-1], lstat_at(target, parts[-1])
                if entry.kind == DIR and not entry.opaque:
                    if there is None or not stat_module.S_ISDIR(there.st_mode):
                        _remove_at(target, name, there)
                        os.mkdir(name, NEW_DIR_MODE, dir_fd=target)
                    continue
                _remove_at(target, name, there)
                os.rename(name, name, src_dir_fd=source, dst_dir_fd=target)
                if entry.kind == DIR:
                    moved.add(entry.rel)
        for entry in reversed(entries):  # the layer's directory attrs and modes, once all is in
            if entry.kind == DIR and not entry.opaque and not covered(entry.rel, moved):
                parts = split_rel(entry.rel)
                with (
                    open_chain(top_layer, parts[:-1]) as source,
                    open_chain(top_upper, parts[:-1]) as target,
                    open_chain(target, parts[-1:]) as fd,
                ):
                    wanted = attrs_at(source, parts[-1], directory=True) or {}
                    write_attrs(entry_path(target, parts[-1]), wanted, directory=True)
                    os.fchmod(fd, entry.mode)


def copy_mode(parent: int, name: str) -> int | None:
    """The permission bits of the file `name` of an upper directory (a copy a command may
    have chmodded), None when there is none: a tool's later write keeps them, as a real
    write keeps the file's mode."""
    there = lstat_at(parent, name)
    if there is None or not stat_module.S_ISREG(there.st_mode):
        return None
    return stat_module.S_IMODE(there.st_mode)


def put_copy(parent: int, name: str, data: bytes, mode: int | None, real: Path | None) -> None:
    """A tool's write of `data` to the file `name` of an upper directory: made whole under
    a temporary name beside it — so a new file inherits the directory's default ACL, as it
    would in the project — then renamed over `name`. It gets exactly the attrs and mode of
    the copy there (a command's chmod or setfattr stays, as a real write keeps them), else
    of the real file `real` being copied up (as overlayfs copies one up), else `mode`; a
    copy with other links (a command's `ln`) is written in place, likewise."""
    if rewrite_linked(parent, name, data):
        return
    kept = copy_mode(parent, name)
    mode = mode if kept is None else kept
    if kept is not None:
        attrs = attrs_at(parent, name)
    else:
        attrs = None if real is None else attrs_at(None, real)
    temp = f"{INCOMING_PREFIX}{secrets.token_hex(8)}"
    fd = os.open(temp, _CREATE_FLAGS, NEW_FILE_MODE, dir_fd=parent)
    try:
        with open(fd, "wb", closefd=True) as out:
            out.write(data)
            if attrs is not None:  # exactly: an ACL the new name inherited goes
                write_attrs(out.fileno(), attrs)
            if mode is not None:
                os.fchmod(out.fileno(), mode)
        os.replace(temp, name, src_dir_fd=parent, dst_dir_fd=parent)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp, dir_fd=parent)
        raise


def copy_up_dir(parent: int, name: str, real: Path) -> tuple[int, str] | None:
    """Make the directory `name` of an upper directory as a copy of the real directory
    `real` — its mode and attrs, as overlayfs copies one up —: (mode, attrs digest), or
    None when `real` is no directory (a missing one is made with the file, mkdir's default)
    or `name` exists already."""
    try:
        info = os.lstat(real)
    except OSError:
        return None
    if not stat_module.S_ISDIR(info.st_mode):
        return None
    try:
        os.mkdir(name, NEW_DIR_MODE, dir_fd=parent)
    except FileExistsError:
        return None
    attrs = attrs_at(None, real, directory=True) or {}
    write_attrs(entry_path(parent, name), attrs, directory=True)
    mode = stat_module.S_IMODE(info.st_mode)
    with open_chain(parent, [name]) as fd:
        os.fchmod(fd, mode)
    return mode, attrs_digest(attrs)


def rewrite_linked(parent: int, name: str, data: bytes) -> bool:
    """Write `data` into the file `name` of an upper directory in place when it has other
    hard links (a command's `ln`: apply joins them, plan.py), as a real write keeps them;
    False, and nothing written, when it has none."""
    there = lstat_at(parent, name)
    if there is None or not stat_module.S_ISREG(there.st_mode) or there.st_nlink < 2:
        return False
    with open(os.open(name, _REWRITE_FLAGS, dir_fd=parent), "wb", closefd=True) as out:
        out.write(data)
    return True


def _remove_at(parent: int, name: str, info: os.stat_result | None) -> None:
    if info is None:
        return
    if stat_module.S_ISDIR(info.st_mode):
        shutil.rmtree(name, dir_fd=parent)
    else:
        os.unlink(name, dir_fd=parent)


def covered(rel: str, removed: Collection[str]) -> bool:
    """Whether `rel` is at or below a removed entry."""
    parts = rel.split("/")
    return any("/".join(parts[:depth]) in removed for depth in range(1, len(parts) + 1))


def reconcile(
    root: Path,
    entries: list[UpperEntry],
    originals: Mapping[str, Original],
    removed: Mapping[str, Removal],
) -> tuple[dict[str, Original], dict[str, Removal], dict[str, set[str]]]:
    """(originals, removals, upper directories → child names) for what `upper/` now holds."""
    new_originals: dict[str, Original] = {}
    new_removed: dict[str, Removal] = {}
    dirs: dict[str, set[str]] = {"": set()}
    with open_dir(root) as root_fd:
        for entry in entries:
            parent, _, name = entry.rel.rpartition("/")
            if entry.kind == WHITEOUT and covered(entry.rel, new_removed):
                continue  # inside a replaced directory: nothing real to delete
            if entry.kind != WHITEOUT:  # a whiteout is no entry of the merged view
                dirs.setdefault(parent, set()).add(name)
            if entry.kind == DIR:
                dirs.setdefault(entry.rel, set())
            replaced = entry.kind == WHITEOUT or entry.opaque or entry.kind == FILE
            if replaced and not covered(entry.rel, new_removed):
                gone = _removal(root_fd, entry, originals.get(entry.rel), removed.get(entry.rel))
                if gone is not None:
                    new_removed[entry.rel] = gone
            if entry.kind == FILE:
                new_originals[entry.rel] = _original(root, entry, originals, new_removed)
    return new_originals, new_removed, dirs


def _removal(
    root_fd: int, entry: UpperEntry, original: Original | None, known: Removal | None
) -> Removal | None:
    """The deletion `entry` makes of the real entry at its path (None: nothing deleted)."""
    if known is not None:
        return known
    parts = split_rel(entry.rel)
    try:
        with open_chain(root_fd, parts[:-1]) as parent:
            info = lstat_at(parent, parts[-1])
            if info is None:
                return None
            if entry.kind == FILE and not stat_module.S_ISDIR(info.st_mode):
                return None  # a file over a file: a write, not a deletion
            if entry.kind == WHITEOUT and original is not None and original.sha256 is not None:
                return Removal(entry.rel, f"file:{original.mode or 0:o}:{original.sha256}")
            digest = digest_at(parent, parts[-1])
    except (FileNotFoundError, NotADirectoryError):
        return None
    except PathRefused:
        raise UpperRefused(f"{entry.rel} goes through a symlink in the project") from None
    return None if digest is None else Removal(entry.rel, digest)


def _original(
    root: Path, entry: UpperEntry, originals: Mapping[str, Original], removed: Mapping[str, Removal]
) -> Original:
    known = originals.get(entry.rel)
    if known is not None:
        return known
    if covered(entry.rel, removed):
        return Original(entry.rel, False, None, entry.mode)
    try:
        return snapshot(entry.rel, root / entry.rel, entry.mode)
    except OverlayEscape as exc:
        raise UpperRefused(str(exc)) from None
    except OSError as exc:
        if exc.errno == errno.ENOTDIR:
            return Original(entry.rel, False, None, entry.mode)
        raise


def snapshot(rel: str, resolved: Path, mode: int | None, *, sole: bool = False) -> Original:
    """Hash and mode of the real file about to be shadowed, or that it does not exist (the
    one rule for tool writes and a command's): OverlayEscape for a symlink or special file,
    EACCES when this user could not write it, EISDIR for a directory; when `sole` (a tool's
    write), HardLinked for a file with other hard links, whose other names the copy would
    leave showing the old content (a command's are refused before, overlay_run.py)."""
    try:
        info = os.lstat(resolved)
    except FileNotFoundError:
        return Original(rel, False, None, None if mode is None else stat_module.S_IMODE(mode))
    if stat_module.S_ISDIR(info.st_mode):
        raise os_error(errno.EISDIR, resolved)
    if not stat_module.S_ISREG(info.st_mode):
        raise OverlayEscape(resolved, "is not a regular file")
    if sole and info.st_nlink > 1:
        raise HardLinked(resolved, WRITE_LINKED)
    with open_dir(resolved.parent) as parent:
        found = hash_at(parent, resolved.name)
        if not may_write(info) or not may_write(os.fstat(parent), directory=True):
            raise os_error(errno.EACCES, resolved)  # as the write itself would fail (plan.py)
        attrs = attrs_at(parent, resolved.name)
    if found is None or attrs is None:
        raise OverlayEscape(resolved, "changed while it was being copied")
    mode = stat_module.S_IMODE(found[1].st_mode)
    return Original(rel, True, found[0], mode, attrs_digest(attrs))
