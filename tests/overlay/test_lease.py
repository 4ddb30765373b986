"""Liveness by lock, not by pid: a sweep takes only overlays whose flock it can acquire."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from qshell.overlay import Overlay, base_dir, journal, lease, sweep_stale
from qshell.tools.paths import PathResolver
from tests.overlay.test_overlay import DEAD_PID, make_stale, snapshot

WAIT_S = 30.0
HOLDER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from qshell.overlay import Overlay
    from qshell.tools.paths import PathResolver
    root, base = Path(sys.argv[1]), Path(sys.argv[2])
    overlay = Overlay.create(root, PathResolver(root), base_dir=base)
    overlay.view.write_bytes(root / "held.txt", b"held")
    print(overlay.directory, flush=True)
    sys.stdin.read()  # hold the overlay until the test closes stdin
    """
)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    (root / "a.txt").write_text("one\n")
    return root


@pytest.fixture
def base(tmp_path: Path) -> Path:
    return tmp_path / "base"


def test_an_overlay_another_process_holds_is_not_swept_whatever_its_pid_says(project, base):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    child = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(project), str(base)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert child.stdout is not None and child.stdin is not None
        directory = Path(child.stdout.readline().strip())
        # seen from another pid namespace, the owner's pid names nobody
        moved = base / str(DEAD_PID)
        directory.parent.rename(moved)
        assert sweep_stale(base, root=project) == 0
        assert (moved / directory.name / "upper" / "held.txt").read_bytes() == b"held"
        child.stdin.close()
        child.wait(WAIT_S)
    finally:
        child.kill()
        child.wait(WAIT_S)
    assert sweep_stale(base, root=project) == 1  # its owner is gone: now it is stale
    assert not moved.exists()


def test_a_live_overlay_under_a_dead_pid_is_kept_and_swept_once_released(project, base):
    overlay = Overlay.create(project, PathResolver(project), base_dir=base)
    overlay.view.write_bytes(project / "a.txt", b"two\n")
    moved = base / str(DEAD_PID)
    overlay.directory.parent.rename(moved)
    assert sweep_stale(base, root=project) == 0
    assert (moved / overlay.directory.name).is_dir()
    assert overlay.lease is not None
    overlay.lease.release()
    assert sweep_stale(base, root=project) == 1


def test_a_sweep_during_an_apply_does_not_take_the_overlay(project, base, monkeypatch):
    overlay = Overlay.create(project, PathResolver(project), base_dir=base)
    overlay.view.write_bytes(project / "a.txt", b"two\n")
    overlay.view.write_bytes(project / "b.txt", b"new\n")
    real_swap = journal._swap
    swept: list[int] = []

    def swap_while_another_process_sweeps(root_fd, step):
        swept.append(sweep_stale(base, root=project))
        return real_swap(root_fd, step)

    monkeypatch.setattr(journal, "_swap", swap_while_another_process_sweeps)
    overlay.apply()
    assert swept == [0, 0]
    assert (project / "a.txt").read_text() == "two\n" and (project / "b.txt").exists()
    assert overlay.directory.is_dir()
    overlay.discard()
    assert not overlay.directory.exists()


def test_a_pid_directory_where_an_overlay_is_being_made_is_skipped(base):
    leftover = make_stale(base, os.getpid(), {"x.txt": b"x"})  # no lock file yet
    with lease.locked_dir(leftover.parent, wait=True):  # as `new_overlay_dir` holds it
        assert sweep_stale(base) == 0
        assert leftover.exists()
    assert sweep_stale(base) == 1


def test_the_lock_is_released_when_the_overlay_is_discarded(project, base):
    overlay = Overlay.create(project, PathResolver(project), base_dir=base)
    assert lease.claim(overlay.directory) is None  # held, even against this process
    directory = overlay.directory
    overlay.discard()
    assert overlay.lease is not None
    assert not overlay.lease.held and not directory.exists()


def test_an_unrecoverable_overlay_keeps_nothing_locked(project, base):
    before = snapshot(project)
    overlay = Overlay.create(project, PathResolver(project), base_dir=base)
    (overlay.directory / journal.JOURNAL_NAME).write_text("{not json")
    overlay.discard()  # cannot recover: set aside whole, and no longer held
    [kept] = (base / base_dir.ASIDE_DIR_NAME).iterdir()
    assert not overlay.directory.exists() and (kept / journal.JOURNAL_NAME).exists()
    held = lease.claim(kept)
    assert held is not None
    held.release()
    assert snapshot(project) == before
