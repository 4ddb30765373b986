"""All-or-nothing apply of a speculation overlay onto the real tree, and crash recovery.

`apply_files` checks every written file first (same content as when the overlay copied it,
or still absent for a new one; no symlink on the way) and applies nothing if one fails.
Then it stages each file beside its destination with its mode (fsynced, several at once),
journals the plan, hard-links each original to a backup, renames the staged file over it,
records the commit point and removes backups and journal, always through directory
descriptors opened with O_NOFOLLOW from the root, so a symlink swapped in later is refused,
never followed. Before the commit point a failure or crash is rolled back (in-process, or
by `recover_journal` at the next start); after it, the clean-up is finished: the tree ends
all-old or all-new, but a file edited after a crash is left as found and reported. It never
touches paths outside the root. Stateless functions (staging uses a short-lived thread
pool); the overlay's lock serialises applies.
"""

from __future__ import annotations

import enum
import errno
import hashlib
import json
import os
import secrets
import stat as stat_module
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from qshell.overlay.dirfd import (
    BLOCKED,
    ESCAPED,
    READ_FLAGS,
    PathRefused,
    hash_at,
    lstat_at,
    open_chain,
    open_dir,
    split_rel,
)

JOURNAL_NAME = "journal.json"
JOURNAL_VERSION = 1
STAGE_PREFIX = ".qshell-stage-"
BACKUP_PREFIX = ".qshell-backup-"
STAGE_WORKERS = 8  # threads staging files at once: I/O bound, each create and fsync waits
NEW_FILE_MODE = 0o666  # before the umask, as open(2) and RealView create files
NEW_DIR_MODE = 0o777  # before the umask, as mkdir -p creates directories
_CREATE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_NO_HARD_LINKS = {errno.EPERM, errno.EOPNOTSUPP, errno.ENOTSUP, errno.EMLINK, errno.EXDEV}


class Phase(enum.StrEnum):
    """Where an apply stands, as its journal records it (crash recovery reads it back)."""

    STAGING = "staging"  # copies are being staged beside their destinations: roll back
    RENAMING = "renaming"  # staged copies are being renamed in: roll back
    COMMITTED = "committed"  # every file is in: finish the clean-up


CHANGED = "changed since it was copied"
DELETED = "was deleted since it was copied"
APPEARED = "appeared since the overlay created it"
BAD_COPY = "its overlay copy is missing or a symlink"


@dataclass(frozen=True, slots=True)
class Conflict:
    """A written file that cannot be applied, and why (one of the reason constants above)."""

    path: str
    reason: str

    def __str__(self) -> str:
        return f"{self.path} {self.reason}"


class ApplyConflict(Exception):
    """The overlay was not applied because of these conflicts; the real tree is untouched."""

    def __init__(self, conflicts: Sequence[Conflict]) -> None:
        self.conflicts = list(conflicts)
        super().__init__("; ".join(str(c) for c in self.conflicts))


class ApplyFailed(Exception):
    """Applying failed and was rolled back (or, if rolling back failed too, will be at start)."""


@dataclass(frozen=True, slots=True)
class Original:
    """A written file as it was before the overlay's first write to it."""

    rel: str
    existed: bool
    sha256: str | None  # when it existed
    mode: int | None  # its permission bits; for a new file, those asked for (None: default)


@dataclass(frozen=True, slots=True)
class ApplyReport:
    applied: tuple[str, ...]
    created_dirs: tuple[str, ...]
    seconds: float
    leftovers: tuple[str, ...] = ()  # backups that could not be removed afterwards


@dataclass(frozen=True, slots=True)
class Recovery:
    direction: str  # "rolled back" | "completed"
    kept: tuple[str, ...]  # destinations edited after the crash, left as they were


@dataclass
class _Step:
    """One file of an apply, as the journal records it."""

    rel: str
    staged: str
    backup: str | None  # None for a new file
    mode: int | None  # the staged file's mode; None = the default for a new file
    signature: list[int] | None  # (ino, size, mtime_ns, ctime_ns) of the checked original
    sha256: str | None = None  # of the new content, once staged


@dataclass
class _Journal:
    root: str
    phase: Phase
    dirs: list[str]
    files: list[_Step]
    version: int = JOURNAL_VERSION
    pid: int = field(default_factory=os.getpid)


def _signature(info: os.stat_result) -> list[int]:
    return [info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns]


def _inspect(base: int, parts: Sequence[str]) -> tuple[list[str], os.stat_result | None]:
    """(missing ancestors, lstat of the leaf or None); PathRefused for a symlink on the way."""
    for depth in range(1, len(parts)):
        info = lstat_at(base, "/".join(parts[:depth]))
        if info is None:
            return ["/".join(parts[:i]) for i in range(depth, len(parts))], None
        if not stat_module.S_ISDIR(info.st_mode):
            raise PathRefused(ESCAPED if stat_module.S_ISLNK(info.st_mode) else BLOCKED)
    leaf = lstat_at(base, "/".join(parts))
    if leaf is not None and stat_module.S_ISLNK(leaf.st_mode):
        raise PathRefused(ESCAPED)
    return [], leaf


def _check(
    root_fd: int, upper_fd: int, item: Original, token: str
) -> Conflict | tuple[_Step, list[str]]:
    """The journal step for one file and its missing directories, or why it cannot apply."""
    parts = split_rel(item.rel)
    try:
        copy = _inspect(upper_fd, parts)[1]
    except PathRefused:
        copy = None
    if copy is None or not stat_module.S_ISREG(copy.st_mode):
        return Conflict(item.rel, BAD_COPY)
    try:
        missing, info = _inspect(root_fd, parts)
    except PathRefused as exc:
        return Conflict(item.rel, exc.reason)
    staged = f"{STAGE_PREFIX}{token}"
    if not item.existed:
        if info is not None:
            return Conflict(item.rel, APPEARED)
        return _Step(item.rel, staged, None, item.mode, None), missing
    if info is None:
        return Conflict(item.rel, DELETED)
    found = hash_at(root_fd, item.rel)
    if found is None or found[0] != item.sha256:
        return Conflict(item.rel, CHANGED)
    mode = stat_module.S_IMODE(found[1].st_mode)
    return _Step(item.rel, staged, f"{BACKUP_PREFIX}{token}", mode, _signature(found[1])), []


def plan(root: Path, upper: Path, pending: Sequence[Original]) -> tuple[_Journal, list[Conflict]]:
    """The journal an apply would follow, and every conflict that stops it. Touches nothing."""
    token = secrets.token_hex(6)
    state = _Journal(str(root), Phase.STAGING, [], [])
    conflicts: list[Conflict] = []
    dirs: dict[str, None] = {}
    with open_dir(root) as root_fd, open_dir(upper) as upper_fd:
        for index, item in enumerate(pending):
            try:
                result = _check(root_fd, upper_fd, item, f"{token}-{index}")
            except PathRefused as exc:
                result = Conflict(item.rel, exc.reason)
            if isinstance(result, Conflict):
                conflicts.append(result)
                continue
            state.files.append(result[0])
            dirs.update(dict.fromkeys(result[1]))
    state.dirs = sorted(dirs, key=lambda d: d.count("/"))
    return state, conflicts


def apply_files(root: Path, upper: Path, journal: Path, pending: Sequence[Original]) -> ApplyReport:
    """Apply every pending file from `upper` onto `root`, all or nothing.

    Raises ApplyConflict (nothing applied) or ApplyFailed (rolled back).
    """
    started = time.perf_counter()
    try:
        state, conflicts = plan(root, upper, pending)
    except (OSError, PathRefused) as exc:
        raise ApplyFailed(f"cannot check the overlay against {root}: {exc}") from exc
    if conflicts:
        raise ApplyConflict(conflicts)
    if not state.files:
        return ApplyReport((), (), time.perf_counter() - started)
    try:
        write_journal(journal, state)
        with open_dir(root) as root_fd, open_dir(upper) as upper_fd:
            _create_dirs(root_fd, state)
            pool = ThreadPoolExecutor(STAGE_WORKERS)  # so creates and fsyncs overlap
            try:
                for _ in pool.map(lambda step: _stage(root_fd, upper_fd, step), state.files):
                    pass
            finally:
                pool.shutdown(cancel_futures=True)  # all stopped before any rollback
            state.phase = Phase.RENAMING
            write_journal(journal, state)
            for step in state.files:
                _swap(root_fd, step)
            touched = {s.rel.rpartition("/")[0] for s in state.files}
            for parent in touched | {d.rpartition("/")[0] for d in state.dirs}:
                with open_chain(root_fd, parent.split("/") if parent else []) as fd:
                    os.fsync(fd)
        state.phase = Phase.COMMITTED
        write_journal(journal, state)
    except BaseException as exc:
        _abort(root, journal, state, exc)
        raise
    leftovers = _finish(root, state)
    journal.unlink(missing_ok=True)
    applied = tuple(step.rel for step in state.files)
    return ApplyReport(applied, tuple(state.dirs), time.perf_counter() - started, leftovers)


def _abort(root: Path, journal: Path, state: _Journal, exc: BaseException) -> None:
    """Roll back after a failure midway; an OSError becomes ApplyFailed."""
    try:
        _roll_back(root, state)
    except (OSError, PathRefused) as again:
        raise ApplyFailed(
            f"applying failed ({exc}) and so did rolling back ({again}); "
            "the journal is kept and recovered at the next start"
        ) from exc
    journal.unlink(missing_ok=True)
    if isinstance(exc, OSError | PathRefused):
        raise ApplyFailed(f"applying failed and was rolled back: {exc}") from exc


def _create_dirs(root_fd: int, state: _Journal) -> None:
    created: list[str] = []
    for rel in state.dirs:
        parts = split_rel(rel)
        with open_chain(root_fd, parts[:-1]) as parent:
            try:
                os.mkdir(parts[-1], NEW_DIR_MODE, dir_fd=parent)
            except FileExistsError:
                continue  # someone else made it meanwhile: not ours to remove
            created.append(rel)
    state.dirs = created


def _stage(root_fd: int, upper_fd: int, step: _Step) -> None:
    """Copy the overlay file next to its destination, with its mode, durably."""
    parts = split_rel(step.rel)
    with open_chain(upper_fd, parts[:-1]) as up, open_chain(root_fd, parts[:-1]) as parent:
        with open(os.open(parts[-1], READ_FLAGS, dir_fd=up), "rb") as source:
            data = source.read()
        with open(os.open(step.staged, _CREATE_FLAGS, NEW_FILE_MODE, dir_fd=parent), "wb") as out:
            out.write(data)
            out.flush()
            if step.mode is not None:
                os.fchmod(out.fileno(), step.mode)
            os.fsync(out.fileno())
    step.sha256 = hashlib.sha256(data).hexdigest()


def _swap(root_fd: int, step: _Step) -> None:
    """Put the staged file in place of its destination, keeping the original as a backup."""
    parts = split_rel(step.rel)
    with open_chain(root_fd, parts[:-1]) as parent:
        name, info = parts[-1], lstat_at(parent, parts[-1])
        if (None if info is None else _signature(info)) != step.signature:
            reason = APPEARED if step.signature is None else CHANGED
            raise ApplyConflict([Conflict(step.rel, reason)])
        if step.backup is None:  # a link fails, where a rename would replace, if one appeared
            try:
                os.link(step.staged, name, src_dir_fd=parent, dst_dir_fd=parent)
            except FileExistsError:
                raise ApplyConflict([Conflict(step.rel, APPEARED)]) from None
            except OSError as exc:
                if exc.errno not in _NO_HARD_LINKS:
                    raise
                os.replace(step.staged, name, src_dir_fd=parent, dst_dir_fd=parent)
            else:
                os.unlink(step.staged, dir_fd=parent)
            return
        try:
            os.link(name, step.backup, src_dir_fd=parent, dst_dir_fd=parent)
        except OSError as exc:
            if exc.errno not in _NO_HARD_LINKS:
                raise
            os.rename(name, step.backup, src_dir_fd=parent, dst_dir_fd=parent)
        os.replace(step.staged, name, src_dir_fd=parent, dst_dir_fd=parent)


def _each_parent(root: Path, state: _Journal) -> Iterator[tuple[_Step, int | None]]:
    """Each step with a descriptor for its directory, or None when that is gone or unsafe."""
    with open_dir(root) as root_fd:
        for step in state.files:
            try:
                with open_chain(root_fd, split_rel(step.rel)[:-1]) as parent:
                    yield step, parent
            except (FileNotFoundError, NotADirectoryError, PathRefused):
                yield step, None


def _finish(root: Path, state: _Journal) -> tuple[str, ...]:
    """After the commit point: remove backups and stray staged files. Best effort."""
    leftovers: list[str] = []
    for step, parent in _each_parent(root, state):
        for name in (step.staged, step.backup):
            try:
                if name is not None and parent is not None:
                    os.unlink(name, dir_fd=parent)
            except FileNotFoundError:
                continue
            except OSError:
                leftovers.append(f"{step.rel} ({name})")
    return tuple(leftovers)


def _roll_back(root: Path, state: _Journal) -> tuple[str, ...]:
    """Undo whatever part of the journal happened; returns destinations kept as found."""
    kept = [
        step.rel
        for step, parent in _each_parent(root, state)
        if parent is not None and not _roll_back_file(parent, step, state.phase)
    ]
    with open_dir(root) as root_fd:
        for rel in reversed(state.dirs):
            parts = split_rel(rel)
            try:
                with open_chain(root_fd, parts[:-1]) as parent:
                    os.rmdir(parts[-1], dir_fd=parent)
            except (OSError, PathRefused):
                continue  # not empty (kept files or someone else's) or already gone
    return tuple(kept)


def _roll_back_file(parent: int, step: _Step, phase: Phase) -> bool:
    """Restore one destination; False when it changed after the crash and was left alone."""
    name = step.rel.rpartition("/")[2]
    staged = lstat_at(parent, step.staged)
    has_backup = step.backup is not None and lstat_at(parent, step.backup) is not None
    if staged is not None:  # not renamed yet
        dest = lstat_at(parent, name)
        if step.backup is None and dest is not None and dest.st_ino == staged.st_ino:
            os.unlink(name, dir_fd=parent)  # linked in, staged name not yet removed
        os.unlink(step.staged, dir_fd=parent)
        if step.backup is not None and has_backup and dest is None:
            os.replace(step.backup, name, src_dir_fd=parent, dst_dir_fd=parent)
        elif step.backup is not None and has_backup:
            os.unlink(step.backup, dir_fd=parent)
        return True
    if phase is Phase.STAGING:
        return True
    if step.backup is not None and not has_backup:
        return False  # renamed, but the backup is gone: nothing to restore from
    current = hash_at(parent, name)
    if current is not None and current[0] != step.sha256:
        return False  # edited after the crash: keep it (and the backup, for the user)
    if step.backup is not None:
        os.replace(step.backup, name, src_dir_fd=parent, dst_dir_fd=parent)
    elif current is not None:
        os.unlink(name, dir_fd=parent)
    return True


def write_journal(path: Path, state: _Journal) -> None:
    """Replace the journal atomically and durably."""
    temp = path.with_name(path.name + ".tmp")
    data = json.dumps({**vars(state), "files": [vars(step) for step in state.files]})
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC
    with open(os.open(temp, flags, 0o600), "w", encoding="utf-8") as out:
        out.write(data)
        out.flush()
        os.fsync(out.fileno())
    os.replace(temp, path)
    with open_dir(path.parent) as fd:
        os.fsync(fd)


def _load(path: Path) -> _Journal:
    try:
        raw = json.loads(path.read_bytes())
        fields = {**raw, "phase": Phase(raw["phase"]), "files": [_Step(**s) for s in raw["files"]]}
        state = _Journal(**fields)
        for rel in [*state.dirs, *(step.rel for step in state.files)]:
            split_rel(rel)
    except (KeyError, TypeError, ValueError, PathRefused) as exc:
        raise ValueError(f"{path} is not a journal this version can recover") from exc
    names = [n for step in state.files for n in (step.staged, step.backup) if n is not None]
    if (
        state.version != JOURNAL_VERSION
        or not Path(state.root).is_absolute()
        or any("/" in n or not n.startswith((STAGE_PREFIX, BACKUP_PREFIX)) for n in names)
    ):
        raise ValueError(f"{path} is not a journal this version can recover")
    return state


def recover_journal(path: Path) -> Recovery | None:
    """Bring the tree a journal describes to all-old, or finish an all-new one.

    Before the commit point it rolls back; after it, it removes the backups. The journal is
    deleted once done; None when there was none. Raises OSError or ValueError when it
    cannot, keeping the journal for another try.
    """
    path.with_name(path.name + ".tmp").unlink(missing_ok=True)
    try:
        state = _load(path)
    except FileNotFoundError:
        return None
    root = Path(state.root)
    kept: tuple[str, ...]
    if not root.is_dir():
        direction, kept = "rolled back", ()  # the project is gone: nothing to restore into
    elif state.phase is Phase.COMMITTED:
        direction, kept = "completed", ()
        _finish(root, state)
    else:
        direction, kept = "rolled back", _roll_back(root, state)
    path.unlink()
    return Recovery(direction, kept)
