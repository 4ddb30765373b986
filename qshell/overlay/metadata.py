"""What an apply keeps of a file besides its bytes: holes, the user's xattrs and ACLs.

`copy_stream` copies one open file into another in chunks (never the whole file in memory)
and returns the sha256 of what it copied; a sparse source stays sparse (its data segments
found with SEEK_DATA/SEEK_HOLE, the holes skipped and hashed as zeros, the size set with
ftruncate). The user's own extended attributes (`user.*`, but not overlayfs's
`user.overlay.*`) and POSIX ACLs (`system.posix_acl_access`, and `system.posix_acl_default`
on a directory) are an entry's "attrs": `read_attrs` / `attrs_at` read them (through a
descriptor, or a path that opens nothing, `entry_path`: a directory nobody may read has
attrs too), `write_attrs` gives an entry exactly a set of them (the others it has removed,
an ACL it inherited among them), `copy_attrs` reads and writes at once, `attrs_digest`
names a set in one string ("" for none) and `encode_attrs` / `decode_attrs` carry one
through a JSON journal. `security.*`
(file capabilities among them) and `trusted.*` are never read or written here.
`has_capability` tells whether a file carries file capabilities (`security.capability`),
which an apply never brings in from a speculation. Stateless functions over descriptors;
any thread.
"""

from __future__ import annotations

import errno
import hashlib
import os
import stat as stat_module
from collections.abc import Mapping

from qshell.overlay.dirfd import READ_CHUNK_BYTES

CAPABILITY_XATTR = "security.capability"
ACL_XATTRS = ("system.posix_acl_access", "system.posix_acl_default")
_OVERLAY_XATTRS = "user.overlay."
_NO_XATTRS = {errno.ENOTSUP, errno.EOPNOTSUPP, errno.ENODATA, errno.EPERM, errno.EACCES}
_ZEROS = bytes(READ_CHUNK_BYTES)
Attrs = dict[str, bytes]  # an entry's user xattrs and ACLs, by name


def _segments(fd: int, size: int) -> list[tuple[int, int]]:
    """The (start, end) of each data segment of `fd`; one segment where holes are unknown."""
    found: list[tuple[int, int]] = []
    offset = 0
    try:
        while offset < size:
            try:
                start = os.lseek(fd, offset, os.SEEK_DATA)
            except OSError as exc:
                if exc.errno == errno.ENXIO:
                    break  # only a hole is left
                raise
            end = os.lseek(fd, start, os.SEEK_HOLE)
            found.append((start, min(end, size)))
            offset = end
    except OSError:
        return [(0, size)]  # no SEEK_DATA here: copy it whole
    return found


def _hash_zeros(digest: hashlib._Hash, count: int) -> None:
    while count > 0:
        step = min(count, READ_CHUNK_BYTES)
        digest.update(_ZEROS[:step])
        count -= step


def copy_stream(source: int, target: int) -> str:
    """Copy the regular file `source` into the empty `target`, holes kept; its sha256."""
    info = os.fstat(source)
    size = info.st_size
    digest = hashlib.sha256()
    written = 0
    sparse = info.st_blocks * 512 < size  # else no hole to look for
    for start, end in _segments(source, size) if sparse else [(0, size)]:
        _hash_zeros(digest, start - written)
        offset = start
        while offset < end:
            chunk = os.pread(source, min(READ_CHUNK_BYTES, end - offset), offset)
            if not chunk:
                break  # shrank while copying: the hash says what was copied
            os.pwrite(target, chunk, offset)
            digest.update(chunk)
            offset += len(chunk)
        written = offset
    _hash_zeros(digest, size - written)
    if written != size:
        os.ftruncate(target, size)  # a hole at the end
    return digest.hexdigest()


def _kept(name: str, directory: bool) -> bool:
    if name == ACL_XATTRS[0] or (directory and name == ACL_XATTRS[1]):
        return True
    return name.startswith("user.") and not name.startswith(_OVERLAY_XATTRS)


def read_attrs(target: int | str, *, directory: bool = False) -> Attrs:
    """The user's xattrs and ACLs of the open entry `target` (or of the entry at the path
    `target`, a final symlink not followed); none where it can have none."""
    follow = isinstance(target, int)
    try:
        names = os.listxattr(target, follow_symlinks=follow)
    except OSError as exc:
        if exc.errno in _NO_XATTRS:
            return {}
        raise
    found: Attrs = {}
    for name in sorted(names):
        if not _kept(name, directory):
            continue
        try:
            found[name] = os.getxattr(target, name, follow_symlinks=follow)
        except OSError as exc:
            if exc.errno not in _NO_XATTRS:
                raise
    return found


def entry_path(dir_fd: int | None, name: str | os.PathLike[str]) -> str:
    """A path to entry `name` of the directory `dir_fd` (None: `name` is the path) that
    reaches it without opening it: a directory nobody may read still has its attrs read
    and set, as a descriptor could not."""
    return os.fspath(name) if dir_fd is None else f"/proc/self/fd/{dir_fd}/{os.fspath(name)}"


def attrs_at(
    dir_fd: int | None, name: str | os.PathLike[str], *, directory: bool = False
) -> Attrs | None:
    """The attrs of entry `name` of the directory `dir_fd` (None: a path), a final symlink
    not followed; None when there is no file (or, with `directory`, no directory) there."""
    path = entry_path(dir_fd, name)
    try:
        mode = os.lstat(path).st_mode
    except OSError:
        return None
    if not (stat_module.S_ISDIR(mode) if directory else stat_module.S_ISREG(mode)):
        return None
    return read_attrs(path, directory=directory)


def write_attrs(target: int | str, wanted: Mapping[str, bytes], *, directory: bool = False) -> None:
    """Give the entry `target` (as for `read_attrs`) exactly the attrs `wanted`: those it
    has that `wanted` lacks are removed. Setting an access ACL sets the mode's permission
    bits from it: the caller gives the mode afterwards."""
    follow = isinstance(target, int)
    have = read_attrs(target, directory=directory)
    for name in sorted(set(have) - set(wanted)):
        try:
            os.removexattr(target, name, follow_symlinks=follow)
        except OSError as exc:
            if exc.errno not in _NO_XATTRS:
                raise
    for name, value in sorted(wanted.items()):
        if have.get(name) == value or not _kept(name, directory):
            continue
        try:
            os.setxattr(target, name, value, follow_symlinks=follow)
        except OSError as exc:
            if exc.errno not in _NO_XATTRS:
                raise


def copy_attrs(source: int | str, target: int | str, *, directory: bool = False) -> None:
    """Give `target` exactly the attrs `source` has (`write_attrs`)."""
    write_attrs(target, read_attrs(source, directory=directory), directory=directory)


def attrs_digest(attrs: Mapping[str, bytes]) -> str:
    """One string for a set of attrs: "" for none, else a sha256 of names and values."""
    if not attrs:
        return ""
    digest = hashlib.sha256()
    for name, value in sorted(attrs.items()):
        digest.update(b"%d:%s=%d:" % (len(name), name.encode(), len(value)) + value)
    return digest.hexdigest()


def encode_attrs(attrs: Mapping[str, bytes]) -> dict[str, str]:
    """Attrs as JSON can carry them: each value in hex."""
    return {name: value.hex() for name, value in sorted(attrs.items())}


def decode_attrs(encoded: Mapping[str, str]) -> Attrs:
    return {name: bytes.fromhex(value) for name, value in encoded.items()}


def has_capability(fd: int, name: str | None = None) -> bool:
    """Whether the open file `fd` (or the entry `name` in the directory `fd`, not followed
    if a symlink) carries file capabilities."""
    try:
        if name is None:
            return bool(os.getxattr(fd, CAPABILITY_XATTR))
        return bool(os.getxattr(entry_path(fd, name), CAPABILITY_XATTR, follow_symlinks=False))
    except OSError:
        return False
