"""Overlays left behind by processes that died: finish or roll back their applies, then remove.

At start-up `sweep_stale` looks at every pid directory under the base directories
(base_dir.py); those of processes that no longer run (and overlays of an earlier process
that had this pid) are stale. Each stale overlay's journal is recovered first (journal.py:
an interrupted apply is finished or rolled back) — only a journal trust.py vouches for, and
only for the project being started (`root`); another project's is left for a start there,
and its overlay kept — and only then is the directory removed; one that cannot be
recovered is kept for the next start. `recover` does the recovery alone. `recover_overlay`
is also what `Overlay.discard` runs.
It never touches an overlay this process still owns. Any thread; the base directory's lock
(base_dir.py) keeps a sweep from taking an overlay being made.
"""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path

from qshell.overlay import journal, trust
from qshell.overlay.base_dir import (
    candidate_bases,
    existing_base,
    overlays_in,
    released_overlays,
)
from qshell.overlay.errors import OverlayUnavailable

log = logging.getLogger(__name__)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process
    return True


def _stale_dirs(base: Path) -> list[Path]:
    """Pid directories of dead processes, and leftovers of an earlier process with our pid."""
    with os.scandir(base) as it:
        pids = [int(e.name) for e in it if e.name.isdigit() and e.is_dir(follow_symlinks=False)]
    stale = [base / str(pid) for pid in pids if pid not in (0, os.getpid()) and not _alive(pid)]
    if os.getpid() in pids:
        stale += released_overlays(base / str(os.getpid()))
    return stale


def recover_overlay(directory: Path, root: Path | None) -> bool:
    """Finish or roll back an interrupted apply of the project at `root` (None: the caller
    owns the overlay). False when the journal stays: another project's, untrusted, or
    recovery failed (with a warning)."""
    try:
        outcome = journal.recover_journal(directory / journal.JOURNAL_NAME, root)
    except trust.ForeignJournal as exc:
        log.debug("left for its own project: %s", exc)
        return False
    except (OSError, ValueError) as exc:
        log.warning("could not recover the interrupted apply in %s: %s", directory, exc)
        return False
    if outcome is not None and outcome.kept:
        log.warning("kept files edited after an interrupted apply: %s", ", ".join(outcome.kept))
    return True


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


def recover(base_dir: Path | None = None, *, root: Path | None = None) -> int:
    """Recover the journals for the project at `root` of overlays no live process owns;
    returns how many there were. Without a root nothing is recovered: a journal is only
    ever rolled in the project it belongs to."""
    if root is None:
        return 0
    found = [
        overlay
        for base in _bases(base_dir)
        for stale in _stale_dirs(base)
        for overlay in overlays_in(stale)
        if (overlay / journal.JOURNAL_NAME).exists()
    ]
    return sum(recover_overlay(o, root) for o in found)


def sweep_stale(base_dir: Path | None = None, *, root: Path | None = None) -> int:
    """Remove overlays of processes that no longer run, recovering their journals for
    `root` first.

    Returns how many stale directories (dead pid directories, plus leftovers of an earlier
    process that had this pid) were removed. One with a journal that is not `root`'s (or
    any journal, without a root), or that cannot be recovered, is kept. OverlayUnavailable
    when an explicit `base_dir` is unsafe.
    """
    removed = 0
    for base in _bases(base_dir):
        for stale in _stale_dirs(base):
            overlays = overlays_in(stale)
            pending = [o for o in overlays if (o / journal.JOURNAL_NAME).exists()]
            if root is None and pending:
                continue
            if all([recover_overlay(o, root) for o in pending]):
                shutil.rmtree(stale, ignore_errors=True)
                removed += 1
    return removed
