"""The copy-on-write overlay a speculation writes into, and its all-or-nothing apply.

A leaf package: it imports only `qshell.dirs` and `qshell.tools` (the FileView protocol and
the path resolver). `Overlay.create(root, resolver)` makes a private overlay; its `view` is
the FileView a speculation's tools use; `apply()` moves every written file into the real
tree at once or raises `ApplyConflict` (a file changed since it was copied: nothing is
applied); `discard()` removes it. `sweep_stale()` at start-up finishes or rolls back the
applies of processes that died and removes their overlays. Inside: `overlay.py` (the
overlay), `view.py` (its FileView), `journal.py` (the journaled apply and recovery),
`dirfd.py` (descriptor operations that never follow a symlink), `base_dir.py` (where
overlays live) and `sweep.py` (stale overlays).
"""

from qshell.overlay.errors import OverlayEscape, OverlayUnavailable
from qshell.overlay.journal import ApplyConflict, ApplyFailed, Conflict
from qshell.overlay.overlay import Overlay
from qshell.overlay.sweep import recover, sweep_stale

__all__ = [
    "ApplyConflict",
    "ApplyFailed",
    "Conflict",
    "Overlay",
    "OverlayEscape",
    "OverlayUnavailable",
    "recover",
    "sweep_stale",
]
