"""What an apply keeps of a file besides its bytes: holes, the user's xattrs and ACLs.

`copy_stream` copies one open file into another in chunks (never the whole file in memory)
and returns the sha256 of what it copied; a sparse source stays sparse (its data segments
found with SEEK_DATA/SEEK_HOLE, the holes skipped and hashed as zeros, the size set with
ftruncate). `copy_user_xattrs` carries the user's own extended attributes (`user.*`, but
not overlayfs's `user.overlay.*`) and POSIX ACLs (`system.posix_acl_access`, and
`system.posix_acl_default` on a directory) from a destination onto the copy that replaces
it; it never copies `security.*` (file capabilities among them) or `trusted.*`.
`has_capability` tells whether a file carries file capabilities (`security.capability`),
which an apply never brings in from a speculation. Stateless functions over descriptors;
any thread.
"""

from __future__ import annotations

import errno
import hashlib
import os

from qshell.overlay.dirfd import READ_CHUNK_BYTES

CAPABILITY_XATTR = "security.capability"
ACL_XATTRS = ("system.posix_acl_access", "system.posix_acl_default")
_OVERLAY_XATTRS = "user.overlay."
_NO_XATTRS = {errno.ENOTSUP, errno.EOPNOTSUPP, errno.ENODATA, errno.EPERM, errno.EACCES}
_ZEROS = bytes(READ_CHUNK_BYTES)


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


def copy_user_xattrs(source: int, target: int, *, directory: bool = False) -> None:
    """Give `target` the user's xattrs and ACLs `source` has (none: nothing happens)."""
    try:
        names = os.listxattr(source)
    except OSError as exc:
        if exc.errno in _NO_XATTRS:
            return
        raise
    for name in names:
        if not _kept(name, directory):
            continue
        try:
            os.setxattr(target, name, os.getxattr(source, name))
        except OSError as exc:
            if exc.errno not in _NO_XATTRS:
                raise


def has_capability(fd: int, name: str | None = None) -> bool:
    """Whether the open file `fd` (or the entry `name` in the directory `fd`, not followed
    if a symlink) carries file capabilities."""
    try:
        if name is None:
            return bool(os.getxattr(fd, CAPABILITY_XATTR))
        path = f"/proc/self/fd/{fd}/{name}"
        return bool(os.getxattr(path, CAPABILITY_XATTR, follow_symlinks=False))
    except OSError:
        return False
