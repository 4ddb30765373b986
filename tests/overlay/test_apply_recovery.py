"""Recovery leaves nothing in the project; an apply is made durable in one step each side of
its commit point, reports progress and can be cancelled before it.

The kill -9 rounds run a subprocess applying many files, kill it at a random point and start
again at once, as a user restarting qshell does — while the killed process may not have
exited yet — and assert the project is all-old or all-new with no `.qshell-*` entry in it.
`QSHELL_KILL_ROUNDS` sets how many rounds (a few by default, to keep CI fast).
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from qshell.overlay import Overlay, durable, journal, sweep_stale
from qshell.overlay.journal import JOURNAL_NAME, recover_journal
from qshell.overlay.records import ApplyCancelled
from qshell.tools.paths import PathResolver
from tests.overlay.test_apply import (
    CrashingOs,
    crash,
    crash_at_the_second_rename,
    expected_after,
    fresh,
    no_litter,
    speculate,
)
from tests.overlay.test_overlay import snapshot

KILL_ROUNDS = int(os.environ.get("QSHELL_KILL_ROUNDS", "3"))
KILL_FILES = 120
WORKER = """
import sys
from pathlib import Path
from qshell.overlay import Overlay
from qshell.tools.paths import PathResolver

root, base, count = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])
overlay = Overlay.create(root, PathResolver(root), base_dir=base)
for i in range(count):
    overlay.view.write_bytes(root / f"d{i % 5}" / f"f{i}.txt", b"new %d\\n" % i)
print("ready", flush=True)
overlay.apply()
print("applied", flush=True)
"""


def old_project(root: Path) -> None:
    for i in range(0, KILL_FILES, 2):  # half edits, half new files
        path = root / f"d{i % 5}" / f"f{i}.txt"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"old %d\n" % i)


def litter(root: Path) -> list[str]:
    return [str(p) for p in root.rglob(".qshell-*")]


def all_old_or_all_new(root: Path) -> bool:
    found = {p.name: p.read_bytes() for p in root.rglob("f*.txt")}
    new = sum(data.startswith(b"new") for data in found.values())
    return (new == 0 and len(found) == KILL_FILES // 2) or new == len(found) == KILL_FILES


def test_kill_9_at_random_points_then_an_immediate_start_leaves_no_litter(tmp_path):
    rng = random.Random(os.environ.get("QSHELL_KILL_SEED"))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    base = tmp_path / "base"
    for round_ in range(KILL_ROUNDS):
        root = tmp_path / f"project{round_}"
        old_project(root)
        command = [sys.executable, "-c", WORKER, str(root), str(base), str(KILL_FILES)]
        proc = subprocess.Popen(command, stdout=subprocess.PIPE, env=env)
        assert proc.stdout is not None
        assert proc.stdout.readline() == b"ready\n"
        time.sleep(rng.uniform(0.0, 0.08))
        proc.kill()  # and the next start comes at once, the dying process maybe not gone yet
        try:
            sweep_stale(base, root=root.resolve())
        finally:
            proc.wait()
            proc.stdout.close()
        assert all_old_or_all_new(root), f"round {round_}"
        assert litter(root) == [], f"round {round_}"
        assert not list(base.rglob(JOURNAL_NAME))


@pytest.mark.parametrize("crash_at", range(12))
def test_a_recovery_cut_short_is_finished_by_the_next_with_no_litter(
    tmp_path, monkeypatch, crash_at
):
    root, overlay = fresh(tmp_path, "twice")
    before = speculate(overlay, root)
    crash(overlay, monkeypatch, crash_at_the_second_rename)
    fake = CrashingOs(crash_at)  # the first recovery dies at its crash_at-th mutation
    monkeypatch.setattr(journal, "os", fake)
    try:
        recover_journal(overlay.directory / JOURNAL_NAME)
    except BaseException as exc:  # the Crash
        assert type(exc).__name__ == "Crash"
    finally:
        monkeypatch.undo()
    recover_journal(overlay.directory / JOURNAL_NAME)
    assert snapshot(root) == before
    assert no_litter(root)
    overlay.discard()


# --- progress and cancel -----------------------------------------------------------------------


def test_progress_counts_every_file_staged_and_swapped(tmp_path):
    root, overlay = fresh(tmp_path, "progress")
    before = speculate(overlay, root)
    seen: list[tuple[int, int]] = []
    overlay.apply(progress=lambda done, total: seen.append((done, total)))
    assert seen == [(n, 6) for n in range(1, 7)]
    assert snapshot(root) == expected_after(before)
    overlay.discard()


@pytest.mark.parametrize("after", [0, 1, 3, 5])
def test_a_cancel_before_the_commit_point_rolls_back(tmp_path, after):
    root, overlay = fresh(tmp_path, "cancel")
    before = speculate(overlay, root)
    seen: list[int] = []
    with pytest.raises(ApplyCancelled):
        overlay.apply(
            progress=lambda done, total: seen.append(done), cancelled=lambda: len(seen) >= after
        )
    assert snapshot(root) == before
    assert no_litter(root)
    assert not (overlay.directory / JOURNAL_NAME).exists()
    overlay.apply()  # nothing was spoiled: it still applies
    assert snapshot(root) == expected_after(before)
    overlay.discard()


# --- one sync each side of the commit point --------------------------------------------------------


def counting_fsyncs(monkeypatch) -> list[int]:
    calls: list[int] = []
    real = os.fsync

    def fsync(fd: int) -> None:
        calls.append(fd)
        real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    return calls


def test_an_apply_of_many_files_syncs_once_not_once_a_file(tmp_path, monkeypatch):
    root = tmp_path / "many"
    root.mkdir()
    with Overlay.create(root, PathResolver(root), base_dir=tmp_path / "base") as overlay:
        for i in range(40):
            overlay.view.write_bytes(root / f"d{i % 4}" / f"f{i}", b"x")
        calls = counting_fsyncs(monkeypatch)
        overlay.apply()
    assert len(calls) <= 6  # the journal's own: each of three writes, file and directory
    assert len(list(root.rglob("f*"))) == 40


def test_without_syncfs_each_file_is_fsynced_instead(tmp_path, monkeypatch):
    root, overlay = fresh(tmp_path, "fallback")
    before = speculate(overlay, root)
    monkeypatch.setattr(durable, "_SYNCFS", None)
    calls = counting_fsyncs(monkeypatch)
    overlay.apply()
    assert len(calls) > 6 + len(expected_after(before)) // 2
    assert snapshot(root) == expected_after(before)
    overlay.discard()


# --- a start while the killed process still holds its lock ------------------------------------------


def dead_overlay(tmp_path: Path, monkeypatch, name: str) -> tuple[Path, Overlay, Path]:
    """An apply that died at its second rename; its lock still held (the process dying)."""
    root, overlay = fresh(tmp_path, name)
    speculate(overlay, root)
    crash(overlay, monkeypatch, crash_at_the_second_rename)
    return root, overlay, overlay.directory.parent.parent


def test_a_start_waits_for_a_dying_process_and_recovers_its_apply(tmp_path, monkeypatch):
    root, overlay, base = dead_overlay(tmp_path, monkeypatch, "dying")
    assert overlay.lease is not None
    threading.Timer(0.3, overlay.lease.release).start()  # the kernel finishes it off
    assert sweep_stale(base, root=root) == 1
    assert no_litter(root)
    assert (root / "src" / "app.py").read_text() == "app v1\n"


def test_a_start_does_not_wait_for_a_live_apply_that_ends(tmp_path, monkeypatch):
    root, overlay, base = dead_overlay(tmp_path, monkeypatch, "live")
    recover_journal(overlay.directory / JOURNAL_NAME)  # as the live apply rolls back...
    (overlay.directory / JOURNAL_NAME).write_text("{}")  # ...with a journal still there
    os.chmod(overlay.directory / JOURNAL_NAME, 0o600)
    threading.Timer(0.2, (overlay.directory / JOURNAL_NAME).unlink).start()  # then it ends
    assert sweep_stale(base, root=root) == 0  # held and journal-free: live, left alone
    assert overlay.directory.is_dir()
    overlay.discard()
