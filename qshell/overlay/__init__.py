"""The copy-on-write overlay a speculation writes into, and its all-or-nothing apply.

A leaf package: it imports only `qshell.dirs` and `qshell.tools` (the FileView protocol and
the path resolver). `Overlay.create(root, resolver)` makes a private overlay outside the
project and holds its lock; its `view` is the FileView a speculation's tools use, and it
fingerprints every real file read through it (and, via `record_path`, what a shell command
reads); `apply()` moves every written file into the real tree at once or raises
`ApplyConflict` (a file written, deleted or read changed since, a mode changed, or the user
could not write it: nothing is applied); `absorb(layer)` takes in what a command run on a
kernel overlay left in its upper layer (writes, whiteouts, opaque directories); `discard()`
removes it. `sweep_stale(root=…)` at start-up finishes or rolls back the applies of overlays
nobody holds, for that project only, and removes them. Inside: `overlay.py` (the overlay),
`view.py` (its FileView), `reads.py` (read fingerprints), `upper.py` (what a kernel overlay
left in `upper/`: whiteouts and opaque directories as deletions), `trees.py` (digests of
deleted entries), `plan.py` (the checks before an apply), `journal.py` (the journaled apply
and recovery), `staging.py` (its staged copies, progress and cancel), `durable.py` (one
syncfs each side of its commit point), `metadata.py` (holes, xattrs, ACLs), `inplace.py`
(hard-linked files edited in place), `dirnotes.py` (directories' modes and attrs from
before the speculation), `dirmodes.py` (its directories' attrs and modes), `unlinks.py`
(its deletions), `trust.py` and `seal.py` (which journals
recovery follows: this user's qshell's own, sealed, for this project, never from a base
inside it), `records.py` (the values), `renameat.py` (atomic exchange), `dirfd.py`
(descriptor operations that never follow a symlink), `lease.py` (flock liveness),
`base_dir.py` (where overlays live) and `sweep.py` (stale overlays). Every exception class
it defines is an `OverlayError` (errors.py), so a caller may catch the one type (a journal
recovery may not follow raises trust.py's `UnreadableJournal`, a `ValueError` too); the
system's own errors (`OSError`) pass through as they are. The names here load their modules when first
asked for (start-up sweeps without loading the rest).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from qshell.overlay.errors import (
        HardLinked,
        OverlayError,
        OverlayEscape,
        OverlayUnavailable,
        ReadsUnrecorded,
    )
    from qshell.overlay.overlay import Overlay
    from qshell.overlay.records import ApplyCancelled, ApplyConflict, ApplyFailed, Conflict
    from qshell.overlay.sweep import recover, sweep_stale

# where each name lives: the package loads a module when a name of it is first asked for,
# so that start-up's sweep (sweep.py) does not load the overlay and its apply
_HOMES = {
    **dict.fromkeys(
        ("HardLinked", "OverlayError", "OverlayEscape", "OverlayUnavailable", "ReadsUnrecorded"),
        "errors",
    ),
    "Overlay": "overlay",
    **dict.fromkeys(("ApplyCancelled", "ApplyConflict", "ApplyFailed", "Conflict"), "records"),
    **dict.fromkeys(("recover", "sweep_stale"), "sweep"),
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{home}"), name)


__all__ = [
    "ApplyCancelled",
    "ApplyConflict",
    "ApplyFailed",
    "Conflict",
    "HardLinked",
    "Overlay",
    "OverlayError",
    "OverlayEscape",
    "OverlayUnavailable",
    "ReadsUnrecorded",
    "recover",
    "sweep_stale",
]
