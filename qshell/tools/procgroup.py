"""Process-group helpers for the shell tool: signal a command's processes, tell whether
they live, end them.

A command runs as the leader of its own process group (`start_new_session=True`), so one
`killpg` reaches every process it started — unless one left the group. The sandbox does:
bubblewrap's `--new-session` puts the sandbox (its PID-namespace init and the command) in
a session of its own, and that init ignores a SIGTERM from outside; when a signal lands
while bubblewrap is still setting up, its outer process dies and the sandbox is orphaned,
no longer a descendant of anything of ours. So `Group` follows both the tree and a
marker: the shell tool gives each command an environment variable of its own
(COMMAND_ID_VARIABLE, inherited by the sandbox's processes), and each time the Group
signals or checks, it finds the groups of every descendant of the command's group and of
every process carrying its marker (from /proc), remembers them, and signals them all; it
is alive while any of them has a live member. Signalling the command's own group inside
the sandbox ends the command, and with it the sandbox's init; SIGKILL ends the init. Zombies count as gone: orphans may
never be reaped when PID 1 does not reap. It signals only groups that descend from the
one it is given. Thread-safe; `end_group` blocks its caller for at most the grace period
plus a final wait.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from pathlib import Path

COMMAND_ID_VARIABLE = "QSHELL_COMMAND_ID"  # the marker a command's processes inherit
KILL_GRACE_S = 2.0
POLL_INTERVAL_S = 0.02
_PROC = Path("/proc")


def signal_group(pgid: int, signum: int) -> None:
    """Send `signum` to the group, ignoring a group that is already gone."""
    try:
        os.killpg(pgid, signum)
    except (ProcessLookupError, PermissionError):
        return


def _table() -> dict[int, tuple[int, int, str]]:
    """Every process now: pid → (parent pid, process group, state)."""
    found: dict[int, tuple[int, int, str]] = {}
    if not _PROC.is_dir():
        return found
    for entry in os.scandir(_PROC):
        if not entry.name.isdigit():
            continue
        try:
            raw = Path(entry.path, "stat").read_text()
        except OSError:
            continue
        # Format: pid (comm) state ppid pgrp ...; comm may itself contain ") ".
        fields = raw[raw.rindex(")") + 2 :].split()
        if len(fields) > 2 and fields[1].isdigit() and fields[2].isdigit():
            found[int(entry.name)] = (int(fields[1]), int(fields[2]), fields[0])
    return found


def _groups_below(pgid: int, table: dict[int, tuple[int, int, str]]) -> set[int]:
    """The process groups of the members of `pgid` and of all their descendants."""
    children: dict[int, list[int]] = {}
    for pid, (ppid, _, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    stack = [pid for pid, (_, group, _) in table.items() if group == pgid]
    seen = set(stack)
    while stack:
        for child in children.get(stack.pop(), []):
            if child not in seen:
                seen.add(child)
                stack.append(child)
    return {table[pid][1] for pid in seen} | {pgid}


def _marked(marker: str, table: dict[int, tuple[int, int, str]]) -> set[int]:
    """The process groups of the processes whose environment carries `marker`."""
    needle = f"{COMMAND_ID_VARIABLE}={marker}".encode()
    groups: set[int] = set()
    for pid, (_, group, _) in table.items():
        try:
            environ = Path(_PROC, str(pid), "environ").read_bytes()
        except OSError:
            continue
        if needle in environ.split(b"\0"):
            groups.add(group)
    return groups


class Group:
    """The processes of one command: its group, the groups its descendants made, and
    those of any process carrying its `marker` (see the module's docstring)."""

    def __init__(self, pgid: int, marker: str | None = None) -> None:
        self.pgid = pgid
        self.marker = marker
        self._lock = threading.Lock()
        self._known = {pgid}

    def _refresh(self) -> tuple[set[int], dict[int, tuple[int, int, str]]]:
        table = _table()
        found = _groups_below(self.pgid, table)
        for marked in _marked(self.marker, table) if self.marker else ():
            found |= _groups_below(marked, table)
        with self._lock:
            self._known |= found
            return set(self._known), table

    def signal(self, signum: int) -> None:
        """Send `signum` to every group of the command (found now, or before)."""
        groups, _ = self._refresh()
        for pgid in sorted(groups):
            signal_group(pgid, signum)

    def alive(self) -> bool:
        """True while some process of a known group is running (not a zombie)."""
        if not _PROC.is_dir():
            with self._lock:
                return any(group_alive(pgid) for pgid in self._known)
        groups, table = self._refresh()
        return any(g in groups and state != "Z" for _, g, state in table.values())


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
    return any(g == pgid and state != "Z" for _, g, state in _table().values())


def end_group(
    proc: subprocess.Popen[bytes], grace_s: float | None = None, group: Group | None = None
) -> None:
    """SIGTERM the process's tree of groups, then SIGKILL whatever is left after `grace_s`
    (default KILL_GRACE_S). `group` is the Group already signalled, if any (it remembers
    the groups it found then)."""
    tree = group or Group(proc.pid)
    tree.signal(signal.SIGTERM)
    deadline = time.monotonic() + (KILL_GRACE_S if grace_s is None else grace_s)
    while time.monotonic() < deadline:
        proc.poll()  # reap the leader so it does not keep the group alive as a zombie
        if not tree.alive():
            break
        time.sleep(POLL_INTERVAL_S)
    else:
        tree.signal(signal.SIGKILL)
    proc.wait()
