"""Which journals recovery may act on: only those this user's qshell wrote, for this project.

A journal tells recovery which files to rename and delete, so one planted by anybody else —
or by an accepted speculation, had an overlay base ever been inside a project — must never
be followed. `load_trusted` reads a journal only when its overlay directory, pid directory
and base are real directories owned by this user with mode 0700, and the journal is a
regular file owned by this user, mode 0600, with one link, whose seal verifies under this
user's key (seal.py: owner and modes alone can be had by any of the user's processes, an
agent's writes included); it parses and validates it (`UnreadableJournal` when it cannot),
and raises `ForeignJournal` when it belongs to a project other than the one being recovered
(that journal is left for a start in its own project). `claimed_root` reads which project
a journal it refused says it is for, to leave another project's alone, never to act on it.
Pure functions; any thread.
"""

from __future__ import annotations

import json
import os
import stat as stat_module
from pathlib import Path

from qshell.dirs import PRIVATE_DIR_MODE, PRIVATE_FILE_MODE
from qshell.overlay.dirfd import READ_FLAGS, PathRefused, split_rel
from qshell.overlay.errors import OverlayError
from qshell.overlay.records import (
    BACKUP_PREFIX,
    READABLE_VERSIONS,
    STAGE_PREFIX,
    DirMode,
    JournalState,
    Phase,
    Step,
    Unlink,
)
from qshell.overlay.seal import canonical, verifies

MAX_JOURNAL_BYTES = 64 << 20
TRUSTED_DIR_LEVELS = 3  # the overlay directory, its pid directory, the base


class ForeignJournal(OverlayError):
    """The journal is for another project: not this recovery's to roll."""


class UnreadableJournal(OverlayError, ValueError):
    """A journal recovery may not follow: not this user's qshell's (`why` says how it
    fails the checks), or not one this version can parse (another version wrote it, or it
    is damaged)."""

    def __init__(self, path: Path, why: str, *, untrusted: bool) -> None:
        kind = f"qshell can trust: {why}" if untrusted else "this version can recover"
        super().__init__(f"{path} is not a journal {kind}")
        self.why = why


def _untrusted(path: Path, why: str) -> UnreadableJournal:
    return UnreadableJournal(path, why, untrusted=True)


def _unparsable(path: Path) -> UnreadableJournal:
    return UnreadableJournal(path, UNPARSABLE, untrusted=False)


UNPARSABLE = "another version of qshell wrote it, or it is damaged"


def _check_dirs(journal: Path) -> None:
    directory = journal.parent
    for _ in range(TRUSTED_DIR_LEVELS):
        info = os.lstat(directory)
        if not stat_module.S_ISDIR(info.st_mode):
            raise _untrusted(journal, f"{directory} is not a directory")
        if info.st_uid != os.getuid():
            raise _untrusted(journal, f"{directory} belongs to uid {info.st_uid}")
        if stat_module.S_IMODE(info.st_mode) != PRIVATE_DIR_MODE:
            raise _untrusted(journal, f"{directory} has mode {info.st_mode & 0o777:o}")
        directory = directory.parent


def _read(journal: Path) -> bytes:
    try:
        fd = os.open(journal, READ_FLAGS | os.O_NONBLOCK)
    except OSError as exc:
        if isinstance(exc, FileNotFoundError):
            raise
        raise _untrusted(journal, exc.strerror or str(exc)) from exc
    try:
        info = os.fstat(fd)
        if not stat_module.S_ISREG(info.st_mode):
            raise _untrusted(journal, "not a regular file")
        if info.st_uid != os.getuid() or stat_module.S_IMODE(info.st_mode) != PRIVATE_FILE_MODE:
            raise _untrusted(journal, f"owner {info.st_uid}, mode {info.st_mode & 0o777:o}")
        if info.st_nlink != 1 or info.st_size > MAX_JOURNAL_BYTES:
            raise _untrusted(journal, "linked elsewhere or too large")
        with open(os.dup(fd), "rb") as source:
            return source.read(MAX_JOURNAL_BYTES + 1)
    finally:
        os.close(fd)


def parse(path: Path, data: bytes) -> JournalState:
    """The journal in `data`; ValueError when it is not one this version can recover."""
    try:
        outer = json.loads(data)
        raw = outer["journal"]
        if not verifies(canonical(raw).encode(), str(outer["seal"])):
            raise _untrusted(path, "its seal does not verify (this user's qshell did not write it)")
        steps = [Step(**s) for s in raw["files"]]
        removals = [Unlink(**r) for r in raw.get("removals", [])]
        modes = [DirMode(**m) for m in raw.get("modes", [])]
        fields = {"phase": Phase(raw["phase"]), "files": steps, "removals": removals}
        state = JournalState(**{**raw, **fields, "modes": modes})
        rels = [s.rel for s in state.files] + [r.rel for r in state.removals]
        rels += [m.rel for m in state.modes]
        rels += [s.link_group for s in state.files if s.link_group is not None]
        for rel in [*state.dirs, *rels]:
            split_rel(rel)
    except UnreadableJournal:
        raise
    except (KeyError, TypeError, ValueError, PathRefused) as exc:
        raise _unparsable(path) from exc
    names = [n for step in state.files for n in (step.staged, step.backup) if n is not None]
    names += [step.backup for step in state.removals]
    if (
        state.version not in READABLE_VERSIONS
        or not Path(state.root).is_absolute()
        or any("/" in n or not n.startswith((STAGE_PREFIX, BACKUP_PREFIX)) for n in names)
    ):
        raise _unparsable(path)
    return state


def claimed_root(journal: Path) -> str | None:
    """The project a journal recovery will not follow says it is for, read without
    trusting it (only to leave another project's journal alone); None when it says none
    or cannot be read."""
    try:
        fd = os.open(journal, READ_FLAGS | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat_module.S_ISREG(info.st_mode) or info.st_size > MAX_JOURNAL_BYTES:
            return None
        with open(os.dup(fd), "rb") as source:
            root = json.loads(source.read(MAX_JOURNAL_BYTES))["journal"]["root"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    finally:
        os.close(fd)
    return root if isinstance(root, str) and os.path.isabs(root) else None


def load_trusted(journal: Path, root: Path | None) -> JournalState:
    """The journal at `journal`, if this user's qshell wrote it for the project at `root`
    (None: the caller owns the overlay and vouches for its project).

    FileNotFoundError when there is none; UnreadableJournal (a ValueError) when it cannot
    be trusted or parsed; ForeignJournal when it is for another project.
    """
    _check_dirs(journal)
    state = parse(journal, _read(journal))
    if root is not None and Path(state.root) != root:
        raise ForeignJournal(f"{journal} is for {state.root}, not {root}")
    return state
