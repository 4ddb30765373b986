"""A process that dies by SIGKILL in the middle of applying a speculation, for recovery tests.

`python -m tests.e2e.killed_apply ROOT POINT` makes an overlay of the project at ROOT in
the default base (under the temp dir, where a qshell started in ROOT sweeps), writes
tests/overlay/test_apply.py's NEW_CONTENT through it, and applies it, killing itself with
SIGKILL at POINT of the journaled step: `staged` (every copy staged beside its file, before
the first rename), `renaming` (at the second staged copy's swap), `committing` (every file
swapped, the commit point not yet written) or `committed` (after the commit point, before
the backups are removed). No handler runs, as after a real `kill -9`. Exits 1 when the
apply ran to its end without reaching POINT.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from qshell.overlay import Overlay, journal, renameat
from qshell.overlay.records import STAGE_PREFIX, JournalState, Phase
from qshell.tools.paths import PathResolver
from tests.overlay.test_apply import NEW_CONTENT

POINTS = ("staged", "renaming", "committing", "committed")


def die(*_: Any) -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def kill_at(point: str) -> None:
    """Patch journal.py's steps so that the process dies at `point`."""
    if point == "staged":
        journal.make_durable = die  # type: ignore[attr-defined,assignment]  # after staging
    elif point == "renaming":
        real_exchange, staged = renameat.exchange, []

        def exchange(dir_fd: int, src: str, dst: str) -> None:
            if str(src).startswith(STAGE_PREFIX):
                staged.append(src)
                if len(staged) == 2:
                    die()
            real_exchange(dir_fd, src, dst)

        renameat.exchange = exchange  # type: ignore[assignment]
    elif point == "committing":
        journal.write_journal = _dying_at(Phase.COMMITTED)  # type: ignore[assignment]
    elif point == "committed":
        journal._finish = die  # type: ignore[assignment]
    else:
        raise SystemExit(f"no kill point {point!r}; one of {', '.join(POINTS)}")


def _dying_at(phase: Phase) -> Callable[[Path, JournalState], None]:
    real_write = journal.write_journal

    def write(path: Path, state: JournalState) -> None:
        if state.phase is phase:
            die()
        real_write(path, state)

    return write


def main(argv: list[str]) -> int:
    root, point = Path(argv[0]).resolve(), argv[1]
    overlay = Overlay.create(root, PathResolver(root))
    for rel, data in NEW_CONTENT.items():
        overlay.view.write_bytes(root / rel, data)
    kill_at(point)
    overlay.apply()
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
