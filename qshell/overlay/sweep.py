"""Overlays left behind by processes that died: finish or roll back their applies, then remove.

At start-up `sweep_stale` looks at every pid directory under the base directory; those of
processes that no longer run (and overlays of an earlier process that had this pid) are
stale. Each stale overlay's journal is recovered first (journal.py: an interrupted apply is
finished or rolled back), and only then is the directory removed; one that cannot be
recovered is kept for the next start. `recover_overlay` is also what `Overlay.discard` runs.
It never touches an overlay this process still owns. Any thread; the base directory's lock
(base_dir.py) keeps a sweep from taking an overlay being made.
"""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path

from qshell.overlay import journal
from qshell.overlay.base_dir import existing_base, overlays_in, released_overlays

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


def recover_overlay(directory: Path) -> bool:
    """Finish or roll back an interrupted apply; False (with a warning) when that failed."""
    try:
        outcome = journal.recover_journal(directory / journal.JOURNAL_NAME)
    except (OSError, ValueError) as exc:
        log.warning("could not recover the interrupted apply in %s: %s", directory, exc)
        return False
    if outcome is not None and outcome.kept:
        log.warning("kept files edited after an interrupted apply: %s", ", ".join(outcome.kept))
    return True


def recover(base_dir: Path | None = None) -> int:
    """Recover the journals of overlays no live process owns; returns how many there were."""
    base = existing_base(base_dir)
    stale = _stale_dirs(base) if base is not None else []
    found = [o for s in stale for o in overlays_in(s) if (o / journal.JOURNAL_NAME).exists()]
    return sum(recover_overlay(o) for o in found)


def sweep_stale(base_dir: Path | None = None) -> int:
    """Remove overlays of processes that no longer run, recovering their journals first.

    Returns how many stale directories (dead pid directories, plus leftovers of an earlier
    process that had this pid) were removed. One whose journal cannot be recovered is kept
    for the next start. OverlayUnavailable when the base directory is unsafe.
    """
    base = existing_base(base_dir)
    removed = 0
    for stale in _stale_dirs(base) if base is not None else []:
        if all([recover_overlay(o) for o in overlays_in(stale)]):
            shutil.rmtree(stale, ignore_errors=True)
            removed += 1
    return removed
