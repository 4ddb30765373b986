"""A `kill -9` in the middle of an apply, then `qshell -p` started in the project (the real
CLI against the scripted server): the start finishes or rolls back the apply, so the project
is all-old or all-new with no `.qshell-*` copy, backup or any other entry left in it, and
the run prints its answer and nothing else — or, when the user edited a file the apply had
written before the kill, keeps that edit, leaves the version from before the apply beside
it (never deleted) and says both in one line. A journal this version cannot read is said
once, in one line naming what to do, and its overlay set aside whole (another project's is
left alone, quietly).

The apply runs in a subprocess (tests/e2e/killed_apply.py) that kills itself with SIGKILL
at one point of the journaled step, so each point is hit every run. tests/overlay/
test_apply_recovery.py has the random-point kill rounds at the library level.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from qshell.overlay.base_dir import OVERLAY_PREFIX, default_base_dir
from qshell.overlay.records import JOURNAL_NAME
from tests.e2e.helpers import Run, provider_env, run_qshell
from tests.fakes.llm_server import Reply, always
from tests.overlay.test_apply import NEW_CONTENT, expected_after
from tests.overlay.test_base_and_trust import plant
from tests.overlay.test_overlay import snapshot

ANSWER = "hello there"


def old_project(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    (root / "src").mkdir(parents=True)
    (root / "src" / "app.py").write_text("app v1\n")
    (root / "src" / "util.py").write_text("util v1\n")
    (root / "run.sh").write_text("#!/bin/sh\necho v1\n")
    return root


def killed_apply(root: Path, point: str) -> None:
    """Apply NEW_CONTENT to `root` in a process that SIGKILLs itself at `point`."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    command = [sys.executable, "-m", "tests.e2e.killed_apply", str(root), point]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == -signal.SIGKILL, done.stderr


def start_qshell(llm_server, root: Path) -> Run:
    llm_server.add_rule(always(), Reply.text(ANSWER))
    return run_qshell("-p", "say hello", cwd=root, env=provider_env(llm_server, "openai"))


def overlays_left() -> list[Path]:
    base = default_base_dir()
    return list(base.glob(f"*/{OVERLAY_PREFIX}*")) if base.exists() else []


@pytest.mark.parametrize(
    ("point", "lands"),
    [("staged", False), ("renaming", False), ("committing", False), ("committed", True)],
)
def test_a_start_after_a_kill_9_mid_apply_leaves_all_old_or_all_new_and_no_litter(
    llm_server, tmp_path, point, lands
):
    root = old_project(tmp_path)
    before = snapshot(root)
    killed_apply(root, point)
    half_done = snapshot(root)
    assert half_done not in (before, expected_after(before))  # killed mid-way, copies about
    assert any(".qshell-" in rel for rel in half_done)
    run = start_qshell(llm_server, root)
    assert (run.code, run.stdout, run.stderr) == (0, f"{ANSWER}\n", "")
    assert snapshot(root) == (expected_after(before) if lands else before)
    assert overlays_left() == []


def test_an_edit_made_after_the_kill_is_kept_and_named_in_one_line(llm_server, tmp_path):
    """The rollback may not put the old version over the user's edit, nor delete it, nor
    leave it in the project: the one line names the edited file and the folder of qshell's
    state the version from before the apply was moved to."""
    root = old_project(tmp_path)
    before = snapshot(root)
    killed_apply(root, "committing")
    assert (root / "src" / "app.py").read_bytes() == NEW_CONTENT["src/app.py"]
    (root / "src" / "app.py").write_text("edited after the crash\n")
    run = start_qshell(llm_server, root)
    assert (run.code, run.stdout) == (0, f"{ANSWER}\n")
    [line] = run.stderr.splitlines()
    found = re.search(
        r"kept files edited after an interrupted apply: src/app\.py; "
        r"the versions from before it are in (\S+)/$",
        line,
    )
    assert found is not None, line
    folder = Path(found.group(1))
    assert (folder / "src" / "app.py").read_bytes() == before["src/app.py"]
    assert not folder.is_relative_to(root)
    assert snapshot(root) == {**before, "src/app.py": b"edited after the crash\n"}  # no litter
    assert overlays_left() == []


def unreadable_journal(project: Path) -> dict:
    """A journal of the project sealed by this user's qshell, but of a version this one
    cannot parse (as a newer qshell, or one long gone, would leave it)."""
    return {"root": str(project), "phase": "renaming", "files": [], "version": 99}


def test_a_journal_this_version_cannot_read_is_said_once_and_set_aside_whole(llm_server, tmp_path):
    """Not on every start: the one line says where the overlay went and what to look
    for; the overlay is moved, not deleted, and the next start says nothing."""
    root = old_project(tmp_path)
    planted = plant(default_base_dir(), unreadable_journal(root))
    (planted / "upper" / "new.txt").write_text("a speculation's write\n")
    journal = (planted / JOURNAL_NAME).read_bytes()
    first = start_qshell(llm_server, root)
    assert (first.code, first.stdout) == (0, f"{ANSWER}\n")
    [line] = first.stderr.splitlines()
    found = re.fullmatch(
        r"set aside the journal of an interrupted apply that this qshell cannot read "
        r"\(another version of qshell wrote it, or it is damaged\) in (\S+)/: "
        rf"if {re.escape(str(root))} has files named \.qshell-stage-\* or \.qshell-backup-\*, "
        r"that apply stopped there, and journal\.json in the folder lists them \(a backup is "
        r"the file from before it\); otherwise delete the folder",
        line,
    )
    assert found is not None, line
    folder = Path(found.group(1))
    assert (folder / JOURNAL_NAME).read_bytes() == journal
    assert (folder / "upper" / "new.txt").read_text() == "a speculation's write\n"
    assert not planted.exists() and overlays_left() == []
    again = start_qshell(llm_server, root)
    assert (again.code, again.stdout, again.stderr) == (0, f"{ANSWER}\n", "")
    assert (folder / JOURNAL_NAME).read_bytes() == journal


def test_a_journal_naming_no_project_is_set_aside_by_whichever_start_meets_it(llm_server, tmp_path):
    """What .ci/run plants in the shared temp base: unsealed, mode 000."""
    root = old_project(tmp_path)
    planted = plant(default_base_dir(), {})
    (planted / JOURNAL_NAME).write_text('{"journal": {}, "seal": ""}\n')
    os.chmod(planted / JOURNAL_NAME, 0o000)
    first = start_qshell(llm_server, root)
    [line] = first.stderr.splitlines()
    assert re.fullmatch(r"set aside .* cannot read \(.+\) in \S+/: if a project of yours .*", line)
    assert not planted.exists() and overlays_left() == []
    assert start_qshell(llm_server, root).stderr == ""


def test_another_projects_unreadable_journal_is_not_this_projects_business(llm_server, tmp_path):
    root = old_project(tmp_path)
    other = tmp_path / "other"
    other.mkdir()
    planted = plant(default_base_dir(), unreadable_journal(other))
    for _ in range(2):
        run = start_qshell(llm_server, root)
        assert (run.code, run.stdout, run.stderr) == (0, f"{ANSWER}\n", "")
    assert (planted / JOURNAL_NAME).exists()
