"""`renameat2(2)` through libc: swap two names atomically, or rename without replacing.

The journaled apply needs two renames `os` does not offer: RENAME_EXCHANGE, which swaps
two directory entries in one step (so a destination is never missing and whatever was
there is caught, not destroyed), and RENAME_NOREPLACE, which fails with EEXIST instead of
replacing a file that appeared. Both work on names relative to one directory descriptor
and never follow a symlink (renames act on the entries themselves). When libc has no
`renameat2` or the filesystem refuses the flag, `Unsupported` is raised and the caller
takes its fallback. Stateless functions; any thread.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os
from collections.abc import Callable
from typing import cast

from qshell.overlay.errors import OverlayError

RENAME_NOREPLACE = 1 << 0
RENAME_EXCHANGE = 1 << 1
# errnos that mean "this kernel, libc or filesystem cannot do that flag", not "it failed"
_REFUSED = {errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.ENOTSUP}


class Unsupported(OverlayError):
    """renameat2 with this flag is not available here: use the fallback."""


def _load() -> Callable[[int, bytes, int, bytes, int], int] | None:
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
        function = libc.renameat2
    except (OSError, AttributeError):
        return None
    function.argtypes = [
        ctypes.c_int,
        ctypes.c_char_p,
        ctypes.c_int,
        ctypes.c_char_p,
        ctypes.c_uint,
    ]
    function.restype = ctypes.c_int
    return cast(Callable[[int, bytes, int, bytes, int], int], function)


_RENAMEAT2 = _load()


def _call(dir_fd: int, old: str, new: str, flags: int) -> None:
    if _RENAMEAT2 is None:
        raise Unsupported("libc has no renameat2")
    if _RENAMEAT2(dir_fd, os.fsencode(old), dir_fd, os.fsencode(new), flags) == 0:
        return
    code = ctypes.get_errno()
    if code in _REFUSED:
        raise Unsupported(os.strerror(code))
    raise OSError(code, os.strerror(code), old, None, new)


def exchange(dir_fd: int, first: str, second: str) -> None:
    """Swap the entries `first` and `second` of `dir_fd` atomically (both must exist)."""
    _call(dir_fd, first, second, RENAME_EXCHANGE)


def rename_noreplace(dir_fd: int, old: str, new: str) -> None:
    """Rename `old` to `new` in `dir_fd`; FileExistsError when `new` exists."""
    _call(dir_fd, old, new, RENAME_NOREPLACE)
