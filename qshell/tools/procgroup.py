"""Process-group helpers for the shell tool: signal a group, tell whether it lives, end it.

A command runs as the leader of its own process group (`start_new_session=True`), so one
`killpg` reaches every process it started unless a process deliberately left the group.
Zombies count as gone: orphans may never be reaped when PID 1 does not reap. It signals
only the group it is given and never touches other processes. Functions are thread-safe;
`end_group` blocks its caller for at most the grace period plus a final wait.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

KILL_GRACE_S = 2.0
POLL_INTERVAL_S = 0.02
_PROC = Path("/proc")


def signal_group(pgid: int, signum: int) -> None:
    """Send `signum` to the group, ignoring a group that is already gone."""
    try:
        os.killpg(pgid, signum)
    except (ProcessLookupError, PermissionError):
        return


def group_alive(pgid: int) -> bool:
    """True while some process in the group is running (not a zombie)."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    if not _PROC.is_dir():
        return True
    return any(_live_member(entry, pgid) for entry in os.scandir(_PROC) if entry.name.isdigit())


def _live_member(entry: os.DirEntry[str], pgid: int) -> bool:
    try:
        raw = Path(entry.path, "stat").read_text()
    except OSError:
        return False
    # Format: pid (comm) state ppid pgrp ...; comm may itself contain ") ".
    fields = raw[raw.rindex(")") + 2 :].split()
    return len(fields) > 2 and fields[2] == str(pgid) and fields[0] != "Z"


def end_group(proc: subprocess.Popen[bytes], grace_s: float | None = None) -> None:
    """SIGTERM the process's group, then SIGKILL whatever is left after `grace_s`
    (default KILL_GRACE_S)."""
    pgid = proc.pid
    signal_group(pgid, signal.SIGTERM)
    deadline = time.monotonic() + (KILL_GRACE_S if grace_s is None else grace_s)
    while time.monotonic() < deadline:
        proc.poll()  # reap the leader so it does not keep the group alive as a zombie
        if not group_alive(pgid):
            break
        time.sleep(POLL_INTERVAL_S)
    else:
        signal_group(pgid, signal.SIGKILL)
    proc.wait()
