"""All-or-nothing apply of a speculation overlay onto the real tree, and crash recovery.

`apply_files` checks everything first (plan.py) and applies nothing if one check fails.
Then it journals the plan — every staged and backup name in it before that file exists —,
moves each deleted entry aside (unlinks.py: checked after the move, dropped after the
commit point, put back on a rollback), makes the new directories (dirmodes.py), stages each
file beside its destination (staging.py: streamed, holes, xattrs and ACLs kept, several at
once), makes all of it durable in one step (durable.py: one syncfs, not one fsync a file),
journals RENAMING and swaps each staged copy in; a hard-linked destination is written in
place instead (inplace.py). Then the directories get their attrs and modes, one more sync,
and the journal says COMMITTED. A `progress` callback follows each file staged and swapped,
and a `cancelled` check before each stops the apply before its commit point
(ApplyCancelled, rolled back). An existing destination is swapped with
`renameat2(RENAME_EXCHANGE)`: the destination is never missing, and whatever was there at
that instant — the checked original, or an editor's save that landed after the check — is
caught under the staged name, not destroyed. It is then verified (the checked content and
mode, read through no symlink): if it is not the original, the exchange is undone, and if
what comes back is not our copy either (a second save replaced it), that save is put back
in place; the apply is a conflict and rolls back. Where the filesystem refuses the
exchange, the destination is moved aside, verified the same way and our copy linked in
without replacing (a save in that instant makes the link fail: a conflict); only where
hard links and RENAME_NOREPLACE are both missing is there a plain rename left. A verified
original becomes the backup, deleted after the commit point. A process that wrote through
a descriptor opened before the swap can still write to the backup afterwards: that much no
rename can see. Every step goes through directory descriptors opened with O_NOFOLLOW from
the root. Before the commit point a failure or crash is rolled back (in-process, or by
`recover_journal` at the next start, which trusts only journals trust.py vouches for);
after it, the clean-up is finished: the tree ends all-old or all-new, and a file edited
after a crash is left as found and reported, with the version from before the apply left
beside it and named (`Recovery.beside`; sweep.py sets it aside out of the project, aside.py):
never put over the edit, never deleted. It never
touches paths outside the root. A rollback cut short by a second crash is finished by the
next: a destination found holding the original again has our copies beside it removed, so
no staged or backup name is left in the project. Stateless functions (staging and clean-up use short-lived thread
pools); the overlay's lock serialises applies.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import stat as stat_module
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from qshell.dirs import PRIVATE_FILE_MODE
from qshell.overlay import dirmodes, inplace, renameat, trust, unlinks
from qshell.overlay.dirfd import (
    ESCAPED,
    PathRefused,
    hash_at,
    lstat_at,
    open_chain,
    open_dir,
    split_rel,
)
from qshell.overlay.dirnotes import DirNotes
from qshell.overlay.durable import make_durable
from qshell.overlay.plan import plan
from qshell.overlay.reads import Fingerprint
from qshell.overlay.records import (
    APPEARED,
    BAD_COPY,
    CHANGED,
    DELETED,
    JOURNAL_NAME,
    STAGE_PREFIX,
    ApplyCancelled,
    ApplyConflict,
    ApplyFailed,
    ApplyReport,
    Conflict,
    JournalState,
    Original,
    Phase,
    Recovery,
    Removal,
    Step,
)
from qshell.overlay.seal import canonical, seal
from qshell.overlay.staging import NEW_FILE_MODE, STAGE_WORKERS, Pacer, Progress, stage_all

__all__ = [
    "APPEARED",
    "BAD_COPY",
    "CHANGED",
    "DELETED",
    "ESCAPED",
    "JOURNAL_NAME",
    "NEW_DIR_MODE",
    "NEW_FILE_MODE",
    "STAGE_PREFIX",
    "ApplyCancelled",
    "ApplyConflict",
    "ApplyFailed",
    "ApplyReport",
    "Conflict",
    "Original",
    "Phase",
    "Progress",
    "Recovery",
    "apply_files",
    "plan",
    "recover_journal",
    "write_journal",
]

NEW_DIR_MODE = dirmodes.NEW_DIR_MODE
_CREATE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_NO_HARD_LINKS = {errno.EPERM, errno.EOPNOTSUPP, errno.ENOTSUP, errno.EMLINK, errno.EXDEV}


def apply_files(
    root: Path,
    upper: Path,
    journal: Path,
    pending: Sequence[Original],
    read: Sequence[Fingerprint] = (),
    *,
    removals: Sequence[Removal] = (),
    made: Sequence[str] = (),
    notes: DirNotes | None = None,
    progress: Progress | None = None,
    cancelled: Callable[[], bool] | None = None,
) -> ApplyReport:
    """Apply every pending file from `upper` onto `root`, every removal and every directory
    in `made`, all or nothing; any file in `read` that changed since it was read stops it too.
    `notes` holds directories' modes and attrs the checks need (dirnotes.py).

    `progress(done, total)` follows each file staged and swapped in; `cancelled()` is asked
    between them. Raises ApplyConflict (nothing applied), ApplyCancelled or ApplyFailed
    (both rolled back).
    """
    started = time.perf_counter()
    try:
        state, conflicts = plan(root, upper, pending, read, removals, made, notes)
    except (OSError, PathRefused) as exc:
        raise ApplyFailed(f"cannot check the overlay against {root}: {exc}") from exc
    if conflicts:
        raise ApplyConflict(conflicts)
    if not state.files and not state.removals and not state.dirs and not state.modes:
        return ApplyReport((), (), time.perf_counter() - started)
    pacer = Pacer(2 * len(state.files), progress, cancelled)
    try:
        pacer.check()
        write_journal(journal, state)  # names every staged and backup file before it exists
        with open_dir(root) as root_fd, open_dir(upper) as upper_fd:
            unlinks.move_aside(root_fd, state)
            dirmodes.make(root_fd, state)
            stage_all(root_fd, upper_fd, state, pacer)
            make_durable(root_fd, _staged_names(state), _parents(state))
            pacer.check()
            state.phase = Phase.RENAMING
            write_journal(journal, state)
            for step in state.files:
                pacer.check()
                _swap(root_fd, step)
                pacer.advance()
            dirmodes.set_modes(root_fd, state)
            make_durable(root_fd, [], _parents(state))
        state.phase = Phase.COMMITTED
        write_journal(journal, state)
    except BaseException as exc:
        _abort(root, journal, state, exc)
        raise
    leftovers = _finish(root, state)
    journal.unlink(missing_ok=True)
    applied = tuple(step.rel for step in state.files)
    removed = tuple(step.rel for step in state.removals)
    seconds = time.perf_counter() - started
    return ApplyReport(applied, tuple(state.dirs), seconds, leftovers, removed)


def _parents(state: JournalState) -> list[str]:
    changed = [s.rel for s in state.files] + [r.rel for r in state.removals]
    changed += [*state.dirs, *(m.rel for m in state.modes)]
    return sorted({rel.rpartition("/")[0] for rel in changed})


def _staged_names(state: JournalState) -> list[str]:
    """Root-relative paths of every staged copy (and in-place backup), for the fallback."""
    names = []
    for step in state.files:
        parent = step.rel.rpartition("/")[0]
        for name in (step.staged, step.backup if step.in_place else None):
            if name is not None:
                names.append(f"{parent}/{name}" if parent else name)
    return names


def _abort(root: Path, journal: Path, state: JournalState, exc: BaseException) -> None:
    """Roll back after a failure midway; an OSError becomes ApplyFailed."""
    try:
        kept = _roll_back(root, state)
    except (OSError, PathRefused) as again:
        raise ApplyFailed(
            f"applying failed ({exc}) and so did rolling back ({again}); "
            "the journal is kept and recovered at the next start"
        ) from exc
    journal.unlink(missing_ok=True)
    if kept and isinstance(exc, ApplyConflict):
        exc.conflicts += [
            Conflict(rel, "was kept as found (edited during the apply)") for rel in kept
        ]
    if isinstance(exc, OSError | PathRefused):
        raise ApplyFailed(f"applying failed and was rolled back: {exc}") from exc


def _swap(root_fd: int, step: Step) -> None:
    """Put the staged file in place of its destination, keeping the original as a backup;
    ApplyConflict when the destination is not what was checked."""
    parts = split_rel(step.rel)
    with open_chain(root_fd, parts[:-1]) as parent:
        if step.in_place:
            inplace.write(parent, parts[-1], step)
        elif step.backup is None:
            try:
                _move_noreplace(parent, step.staged, parts[-1])
            except FileExistsError:
                raise ApplyConflict([Conflict(step.rel, APPEARED)]) from None
        else:
            _replace(parent, step, parts[-1], step.backup)


def _replace(parent: int, step: Step, name: str, backup: str) -> None:
    try:
        renameat.exchange(parent, step.staged, name)
    except renameat.Unsupported:
        _replace_by_moving(parent, step, name, backup)
        return
    except FileNotFoundError:
        raise ApplyConflict([Conflict(step.rel, DELETED)]) from None
    if not _is_original(parent, step.staged, step):  # `staged` holds what was at `name`
        renameat.exchange(parent, step.staged, name)
        if not _ours(lstat_at(parent, step.staged), step):  # a second save replaced ours
            renameat.exchange(parent, step.staged, name)  # the newest save goes back in place
        raise ApplyConflict([Conflict(step.rel, CHANGED)])
    os.rename(step.staged, backup, src_dir_fd=parent, dst_dir_fd=parent)


def _replace_by_moving(parent: int, step: Step, name: str, backup: str) -> None:
    """The fallback of `_replace` where the filesystem cannot exchange."""
    try:
        os.rename(name, backup, src_dir_fd=parent, dst_dir_fd=parent)
    except FileNotFoundError:
        raise ApplyConflict([Conflict(step.rel, DELETED)]) from None
    if not _is_original(parent, backup, step):
        with contextlib.suppress(FileExistsError):  # a new file there wins; ours stays aside
            _move_noreplace(parent, backup, name)
        raise ApplyConflict([Conflict(step.rel, CHANGED)])
    try:
        _move_noreplace(parent, step.staged, name)
    except FileExistsError:
        raise ApplyConflict([Conflict(step.rel, APPEARED)]) from None


def _move_noreplace(parent: int, old: str, new: str) -> None:
    """Rename `old` to `new` in `parent`; FileExistsError (and nothing moved) if `new` exists."""
    try:
        renameat.rename_noreplace(parent, old, new)
        return
    except renameat.Unsupported:
        pass
    try:
        os.link(old, new, src_dir_fd=parent, dst_dir_fd=parent)
    except OSError as exc:
        if exc.errno not in _NO_HARD_LINKS:
            raise
        if lstat_at(parent, new) is not None:
            raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), new) from None
        os.rename(old, new, src_dir_fd=parent, dst_dir_fd=parent)  # nothing atomic is left
        return
    os.unlink(old, dir_fd=parent)


def _is_original(parent: int, name: str, step: Step) -> bool:
    """True when `name` holds the content and mode the plan checked (never a symlink)."""
    found = hash_at(parent, name)
    return (
        found is not None
        and found[0] == step.expect_sha256
        and stat_module.S_IMODE(found[1].st_mode) == step.original_mode
    )


def _ours(info: os.stat_result | None, step: Step) -> bool:
    """True when `info` is the staged copy of `step` (known by its inode)."""
    return info is not None and step.staged_ino is not None and info.st_ino == step.staged_ino


def _untouched(parent: int, name: str, step: Step) -> bool:
    """True when `name` is the staged copy of `step` with the content it was staged with
    (an editor may have written into it in place since)."""
    found = hash_at(parent, name)
    return found is not None and _ours(found[1], step) and found[0] == step.sha256


def _each_parent(root: Path, state: JournalState) -> Iterator[tuple[Step, int | None]]:
    """Each step with a descriptor for its directory, or None when that is gone or unsafe."""
    with open_dir(root) as root_fd:
        for step in state.files:
            try:
                with open_chain(root_fd, split_rel(step.rel)[:-1]) as parent:
                    yield step, parent
            except (FileNotFoundError, NotADirectoryError, PathRefused):
                yield step, None


def _finish(root: Path, state: JournalState) -> tuple[str, ...]:
    """After the commit point: remove backups and stray staged files, several at once (an
    unlink of a file whose blocks are on disk waits on the filesystem's journal). Best
    effort; returns what could not be removed."""
    with open_dir(root) as root_fd:
        leftovers = unlinks.drop(root_fd, state)

        def clean(step: Step) -> list[str]:
            try:
                with open_chain(root_fd, split_rel(step.rel)[:-1]) as parent:
                    names = [n for n in (step.staged, step.backup) if n is not None]
                    return [f"{step.rel} ({n})" for n in names if not _removed(parent, n)]
            except (FileNotFoundError, NotADirectoryError, PathRefused):
                return []

        with ThreadPoolExecutor(STAGE_WORKERS) as pool:
            for left in pool.map(clean, state.files):
                leftovers += left
    return tuple(leftovers)


def _removed(parent: int, name: str) -> bool:
    try:
        os.unlink(name, dir_fd=parent)
    except FileNotFoundError:
        return True
    except OSError:
        return False
    return True


def _roll_back(root: Path, state: JournalState) -> tuple[str, ...]:
    """Undo whatever part of the journal happened; returns destinations kept as found."""
    with open_dir(root) as root_fd:
        dirmodes.restore_modes(root_fd, state)
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
        kept += unlinks.restore(root_fd, state)
    return tuple(kept)


def _roll_back_file(parent: int, step: Step, phase: Phase) -> bool:
    """Restore one destination; False when what is there is not ours to undo (left as found).

    The staged name holds our copy until the swap, then what was swapped out until that
    moves to the backup name; our copy is known by its inode, and is only removed while it
    still holds what was staged.
    """
    name = step.rel.rpartition("/")[2]
    if step.in_place:
        return inplace.roll_back(parent, name, step)
    staged, dest = lstat_at(parent, step.staged), lstat_at(parent, name)
    backup = None if step.backup is None else lstat_at(parent, step.backup)
    if staged is not None and (phase is Phase.STAGING or _ours(staged, step)):
        if _ours(dest, step):  # linked in, its staged name not yet removed
            if not _untouched(parent, name, step):
                os.unlink(step.staged, dir_fd=parent)
                return False  # written to in place since: the edit stays
            os.unlink(name, dir_fd=parent)
            dest = None
        os.unlink(step.staged, dir_fd=parent)
        if step.backup is None or backup is None:
            return True
        if dest is not None:
            return False  # moved aside, and a new file appeared there: keep both
        return _move_back(parent, step.backup, name)
    if phase is Phase.STAGING:
        return True
    holder = step.staged if staged is not None else step.backup if backup is not None else None
    if dest is not None and not _untouched(parent, name, step):
        if step.backup is not None and _is_original(parent, name, step):
            _drop_ours(parent, step)  # swapped back already (a rollback cut short)
            return True
        return False  # edited after the swap: keep it (and any original beside it)
    if step.backup is None:  # a new file
        if dest is not None:
            os.unlink(name, dir_fd=parent)
        return True
    if holder is None or dest is None:
        return False  # nothing left to restore from, or our copy is gone
    return _swap_back(parent, holder, name, step)


def _drop_ours(parent: int, step: Step) -> None:
    """Remove the step's staged and backup names where they hold our untouched copy."""
    for name in (step.staged, step.backup):
        if name is not None and _untouched(parent, name, step):
            os.unlink(name, dir_fd=parent)


def _move_back(parent: int, holder: str, name: str) -> bool:
    try:
        _move_noreplace(parent, holder, name)
    except FileExistsError:
        return False
    return True


def _swap_back(parent: int, holder: str, name: str, step: Step) -> bool:
    """Put the original at `holder` back at `name`, which holds our untouched copy."""
    try:
        renameat.exchange(parent, holder, name)
    except renameat.Unsupported:
        os.replace(holder, name, src_dir_fd=parent, dst_dir_fd=parent)
        return True
    if _untouched(parent, holder, step):
        os.unlink(holder, dir_fd=parent)
        return True
    renameat.exchange(parent, holder, name)  # a save replaced ours meanwhile: it stays
    return False


def write_journal(path: Path, state: JournalState) -> None:
    """Replace the journal atomically and durably (0600, as trust.py requires)."""
    temp = path.with_name(path.name + ".tmp")
    steps = {
        "files": [vars(s) for s in state.files],
        "removals": [vars(r) for r in state.removals],
        "modes": [vars(m) for m in state.modes],
    }
    body = canonical({**vars(state), **steps})
    data = json.dumps({"seal": seal(body.encode()), "journal": json.loads(body)})
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC
    with open(os.open(temp, flags, PRIVATE_FILE_MODE), "w", encoding="utf-8") as out:
        os.fchmod(out.fileno(), PRIVATE_FILE_MODE)
        out.write(data)
        out.flush()
        os.fsync(out.fileno())
    os.replace(temp, path)
    with open_dir(path.parent) as fd:
        os.fsync(fd)


def recover_journal(path: Path, root: Path | None = None) -> Recovery | None:
    """Bring the tree a journal describes to all-old, or finish an all-new one.

    Before the commit point it rolls back; after it, it removes the backups. The journal is
    deleted once done; None when there was none. Only a journal trust.py vouches for, for
    the project at `root` (None: the overlay's owner vouches), is followed: ValueError
    when it cannot be trusted or read, trust.ForeignJournal when it is another project's,
    OSError when recovery fails; each keeps the journal.
    """
    try:
        state = trust.load_trusted(path, root)
    except FileNotFoundError:
        return None
    path.with_name(path.name + ".tmp").unlink(missing_ok=True)
    recovered = Path(state.root)
    kept: tuple[str, ...]
    if not recovered.is_dir():
        direction, kept = "rolled back", ()  # the project is gone: nothing to restore into
    elif state.phase is Phase.COMMITTED:
        direction, kept = "completed", ()
        _finish(recovered, state)
    else:
        direction, kept = "rolled back", _roll_back(recovered, state)
    path.unlink()
    beside = _beside(recovered, state, kept) if kept else ()
    return Recovery(direction, kept, beside, state.root)


def _beside(root: Path, state: JournalState, kept: Sequence[str]) -> tuple[tuple[str, str], ...]:
    """The backup and staged names still beside the `kept` destinations (the version from
    before the apply, which no rollback may put over the user's edit): (kept, name) pairs
    of root-relative paths."""
    steps: list[tuple[str, tuple[str | None, ...]]] = [
        (s.rel, (s.staged, s.backup)) for s in state.files if s.rel in kept
    ]
    steps += [(r.rel, (r.backup,)) for r in state.removals if r.rel in kept]
    found = []
    for rel, names in steps:
        parent_rel = rel.rpartition("/")[0]
        with open_dir(root) as root_fd, contextlib.suppress(OSError, PathRefused):
            with open_chain(root_fd, split_rel(parent_rel) if parent_rel else []) as parent:
                here = [n for n in names if n is not None and lstat_at(parent, n) is not None]
            found += [(rel, f"{parent_rel}/{n}".lstrip("/")) for n in here]
    return tuple(found)
