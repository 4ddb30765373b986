"""The seal on apply journals: proof that this user's qshell wrote a journal, not a project.

A journal tells start-up recovery which files to rename and delete. Owner and mode checks
(trust.py) cannot tell qshell's own journal from one an agent wrote with the same user's
rights into a temp directory that lies inside some project, so each journal is sealed with
an HMAC-SHA256 under a per-user key kept in qshell's private state directory (outside
every project: reading it there asks), and recovery follows only journals whose seal
verifies. The key is made once (32 random bytes, 0600, never through a symlink). Any
thread: the key file is created atomically and only read afterwards.
"""

from __future__ import annotations

import errno
import hashlib
import hmac
import json
import os
import secrets
import stat as stat_module
from pathlib import Path

from qshell.dirs import PRIVATE_FILE_MODE, Dirs, ensure_private_dir
from qshell.overlay.errors import OverlayUnavailable

KEY_NAME = "overlay-journal.key"
KEY_BYTES = 32
_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC


def key_path() -> Path:
    return Dirs.from_environ(os.environ).state / KEY_NAME


def _key() -> bytes:
    """This user's journal key, made on first use; OverlayUnavailable when it cannot be."""
    path = key_path()
    try:
        ensure_private_dir(path.parent)
        try:
            fd = os.open(path, _CREATE, PRIVATE_FILE_MODE)
        except FileExistsError:
            pass
        else:
            with open(fd, "wb", closefd=True) as out:
                out.write(secrets.token_bytes(KEY_BYTES))
        fd = os.open(path, _READ)
        with open(fd, "rb", closefd=True) as source:
            info = os.fstat(source.fileno())
            if (
                not stat_module.S_ISREG(info.st_mode)
                or info.st_uid != os.getuid()
                or stat_module.S_IMODE(info.st_mode) & 0o077
            ):
                raise OSError(errno.EPERM, "not a private key file", str(path))
            key = source.read(KEY_BYTES + 1)
    except OSError as exc:
        raise OverlayUnavailable(f"no journal key at {path}: {exc.strerror or exc}") from exc
    if len(key) != KEY_BYTES:
        raise OverlayUnavailable(f"the journal key at {path} is damaged")
    return key


def canonical(journal: object) -> str:
    """The one text of a journal's values that its seal covers."""
    return json.dumps(journal, sort_keys=True, separators=(",", ":"))


def seal(body: bytes) -> str:
    """The seal of a journal's canonical body."""
    return hmac.new(_key(), body, hashlib.sha256).hexdigest()


def verifies(body: bytes, mark: str) -> bool:
    """True when `mark` is the seal of `body` under this user's key."""
    try:
        expected = seal(body)
    except OverlayUnavailable:
        return False
    return hmac.compare_digest(expected, mark)
