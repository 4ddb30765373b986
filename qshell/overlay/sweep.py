"""Overlays nobody holds any more: finish or roll back their applies, then remove them.

An overlay is stale when its lock (lease.py) can be claimed: the process that made it has
died or let it go, whatever pid namespace it ran in. (An overlay with no lock file was
made by an older qshell: it counts as stale only when its pid directory names no running
process, or names this one.) At start-up `sweep_stale` claims every stale overlay under the
base directories (base_dir.py), recovers its journal — only a journal trust.py vouches for,
and only for the project being started (`root`); another project's is left for a start
there, and its overlay kept — and then removes it; one that cannot be recovered is kept
for the next start, but one whose journal no recovery may follow (not this user's qshell's,
or one this version cannot parse) is said once, in one line naming what to do, and moved
whole into the base's `set-aside/` folder (base_dir.py), out of every later sweep's way —
unless that journal says it is another project's. `recover` does the recovery alone. A lock still held on an overlay
with a journal is waited for, briefly (`HELD_JOURNAL_WAIT_S`): a process killed mid-apply
keeps its lock until the kernel has finished it off — after a SIGKILL that lands in a
long fsync or under load, for a while yet — and a start that took that for a live
apply and moved on left the half-done apply's backups and staged copies in the project.
A live apply ends by removing its journal, which ends the wait too. `recover_overlay` is also what
`Overlay.discard` runs. It never takes an overlay someone holds. Any thread: the pid
directory's lock keeps a sweep away from an overlay being made.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from qshell.dirs import Dirs
from qshell.overlay import lease
from qshell.overlay.base_dir import (
    candidate_bases,
    existing_base,
    inside,
    overlays_in,
    remove_if_empty,
    remove_overlay,
    set_aside_overlay,
)
from qshell.overlay.errors import OverlayUnavailable
from qshell.overlay.records import BACKUP_PREFIX, JOURNAL_NAME, STAGE_PREFIX

if TYPE_CHECKING:
    from qshell.overlay.aside import SetAside
    from qshell.overlay.trust import UnreadableJournal

log = logging.getLogger(__name__)

HELD_JOURNAL_WAIT_S = 3.0  # how long a start waits for the lock of an overlay mid-apply
_POLL_S = 0.02


def _alive(pid: int) -> bool:
    """Whether `pid` names a running process here (for overlays that have no lock)."""
    if pid == os.getpid():
        return False  # ours always have a lock: one without is an earlier process's
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process
    return True


def _claimed(base: Path) -> Iterator[Path]:
    """Each stale overlay under `base`, its lock held by this sweep while the caller works."""
    with os.scandir(base) as it:
        pid_dirs = [
            Path(e.path) for e in it if e.name.isdigit() and e.is_dir(follow_symlinks=False)
        ]
    for pid_dir in pid_dirs:
        try:
            with lease.locked_dir(pid_dir, wait=False) as fd:
                if fd is None:
                    continue  # an overlay is being made there right now
                for overlay in overlays_in(pid_dir):
                    try:
                        held = lease.claim(overlay)
                    except FileNotFoundError:
                        if not _alive(int(pid_dir.name)):
                            yield overlay
                        continue
                    if held is None:
                        held = _wait_for_dying(overlay)
                    if held is None:
                        continue  # live
                    try:
                        yield overlay
                    finally:
                        held.release()
        except OSError as exc:  # gone meanwhile, or unreadable
            log.debug("skipped %s: %s", pid_dir, exc)
            continue
        remove_if_empty(pid_dir)


def _wait_for_dying(overlay: Path) -> lease.Lease | None:
    """The lock of an overlay that holds a journal, once its holder lets go (it was dying);
    None when the journal went first (a live apply finished) or the wait ran out."""
    deadline = time.monotonic() + HELD_JOURNAL_WAIT_S
    while (overlay / JOURNAL_NAME).exists() and time.monotonic() < deadline:
        time.sleep(_POLL_S)
        held = lease.claim(overlay)
        if held is not None:
            return held
    return None


def recover_overlay(directory: Path, root: Path | None) -> bool:
    """Finish or roll back an interrupted apply of the project at `root` (None: the caller
    owns the overlay). False when the journal stays — another project's, or recovery
    failed (with a warning) — or was moved aside, unreadable (with a warning, once). (The
    journal's machinery loads only here: a start with nothing to recover does without it.)"""
    from qshell.overlay import trust
    from qshell.overlay.aside import set_aside
    from qshell.overlay.journal import recover_journal

    try:
        outcome = recover_journal(directory / JOURNAL_NAME, root)
    except trust.ForeignJournal as exc:
        log.debug("left for its own project: %s", exc)
        return False
    except trust.UnreadableJournal as exc:
        _set_unreadable_aside(directory, root, exc)
        return False
    except (OSError, ValueError) as exc:
        log.warning("could not recover the interrupted apply in %s: %s", directory, exc)
        return False
    if outcome is not None and outcome.kept:
        state = Dirs.from_environ(os.environ).state
        aside = set_aside(Path(outcome.project), outcome.beside, state)
        log.warning("%s", kept_line(outcome.kept, aside))
    return True


def _set_unreadable_aside(directory: Path, root: Path | None, exc: UnreadableJournal) -> None:
    """A journal no recovery may follow: said once, then out of every sweep's way (the
    whole overlay moved aside, never deleted) — unless it says it is another project's,
    which is left for a start there."""
    from qshell.overlay.trust import claimed_root

    claimed = claimed_root(directory / JOURNAL_NAME)
    if root is not None and claimed is not None and Path(claimed) != root:
        log.debug("left for its own project %s: %s", claimed, exc)
        return
    try:
        target = set_aside_overlay(directory)
    except (OSError, OverlayUnavailable) as error:
        log.warning(
            "could not recover the interrupted apply in %s (%s) nor move it aside: %s",
            directory,
            exc.why,
            error,
        )
        return
    log.warning("%s", unreadable_line(exc.why, target, claimed))


def unreadable_line(why: str, folder: Path, project: str | None) -> str:
    """The one line saying a journal was set aside, why, and what the user may do."""
    where = project or "a project of yours"
    return (
        f"set aside the journal of an interrupted apply that this qshell cannot read ({why}) "
        f"in {folder}/: if {where} has files named {STAGE_PREFIX}* or {BACKUP_PREFIX}*, that "
        f"apply stopped there, and {JOURNAL_NAME} in the folder lists them (a backup is the "
        "file from before it); otherwise delete the folder"
    )


def kept_line(kept: Sequence[str], aside: SetAside) -> str:
    """The one line saying which files a recovery kept as the user edited them, and where
    what was there before went (the user's to keep or remove)."""
    line = f"kept files edited after an interrupted apply: {', '.join(kept)}"
    if aside.folder is not None:
        line += f"; the versions from before it are in {aside.folder}/"
    if aside.stayed:
        line += f"; left beside them: {', '.join(aside.stayed)}"
    return line


def _bases(base_dir: Path | None) -> list[Path]:
    """The existing base directories to look in (OverlayUnavailable for an unsafe explicit
    one; an unsafe default one is skipped)."""
    if base_dir is not None:
        found = existing_base(base_dir)
        return [] if found is None else [found]
    bases = []
    for candidate in dict.fromkeys(candidate_bases()):
        try:
            found = existing_base(candidate)
        except OverlayUnavailable as exc:
            log.warning("not sweeping speculation overlays: %s", exc)
            continue
        if found is not None:
            bases.append(found)
    return bases


def _each_stale(base_dir: Path | None, root: Path | None, work: Callable[[Path], None]) -> None:
    for base in _bases(base_dir):
        if root is not None and inside(base, root):
            continue  # what lies in the project was written by its tools, never by qshell
        for overlay in _claimed(base):
            work(overlay)


def recover(base_dir: Path | None = None, *, root: Path | None = None) -> int:
    """Recover the journals for the project at `root` of overlays nobody holds; returns how
    many there were. Without a root nothing is recovered: a journal is only ever rolled in
    the project it belongs to."""
    if root is None:
        return 0
    recovered = 0

    def work(overlay: Path) -> None:
        nonlocal recovered
        if (overlay / JOURNAL_NAME).exists() and recover_overlay(overlay, root):
            recovered += 1

    _each_stale(base_dir, root, work)
    return recovered


def sweep_stale(base_dir: Path | None = None, *, root: Path | None = None) -> int:
    """Remove the overlays nobody holds, recovering their journals for `root` first.

    Returns how many overlays were removed. One with a journal that is not `root`'s (or any
    journal, without a root), or that cannot be recovered, is kept. OverlayUnavailable when
    an explicit `base_dir` is unsafe.
    """
    removed = 0

    def work(overlay: Path) -> None:
        nonlocal removed
        if (overlay / JOURNAL_NAME).exists() and (
            root is None or not recover_overlay(overlay, root)
        ):
            return
        remove_overlay(overlay)
        removed += 1

    _each_stale(base_dir, root, work)
    return removed
