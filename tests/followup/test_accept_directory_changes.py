"""What a speculated command does to directories themselves, and to the links a read goes
through, is shown, checked and kept out of protected places like any file change.

A `chmod` (or `setfattr`, `setfacl`) of a directory leaves no file change, only a directory
copied up with another mode (or xattrs, ACLs): on a protected directory (`.git`, `.qshell`,
`.github/workflows`, `.husky`) that is a boundary, since a live turn asks about it;
elsewhere the accept's question lists it ("permissions", "attributes" changed). A
proven read-only `cat link` that read through a symlink is stale once the link points
elsewhere, and `ls`, `find`, `grep -r` or `git branch` once a file (or a ref) appears where
they listed. On the real kernel overlay; skipped with the probe's reason where none mounts.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess

import pytest

from qshell.agent.events import (
    ApplyChoice,
    ApplyRequested,
    ChangeKind,
    FileChange,
    Notice,
    SpeculationAccepted,
)
from qshell.config import ApprovalMode
from qshell.followup.states import Status
from qshell.llm.messages import Message
from qshell.sandbox import probe
from tests.followup.test_consent import accepted_turn, of_type
from tests.followup.test_overlay_run import project, speculate

FOUND = probe()
pytestmark = pytest.mark.skipif(not FOUND.overlay, reason=FOUND.reason or "no overlay sandbox")
PROTECTED = {
    ".github/workflows/ci.yml": "on: push\n",
    ".husky/pre-commit": "lint\n",
    ".git/hooks/pre-commit": "lint\n",
    ".qshell/settings.json": "{}\n",
}


def mode_of(path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


NO_SETFATTR = pytest.mark.skipif(shutil.which("setfattr") is None, reason="no setfattr here")


@pytest.mark.parametrize("target", [".git", ".git/hooks", ".qshell", ".github/workflows", ".husky"])
@pytest.mark.parametrize("mode", [ApprovalMode.AUTO_EDIT, ApprovalMode.DEFAULT])
@pytest.mark.parametrize(
    "change", ["chmod 777", pytest.param("setfattr -n user.note -v 1", marks=NO_SETFATTR)]
)
def test_a_chmod_of_a_protected_directory_is_left_to_the_live_turn(tmp_path, target, mode, change):
    setup = project(tmp_path, {"a.txt": "a\n", **PROTECTED})
    before = mode_of(setup.root / target)
    run = speculate(setup, [f"{change} {target}"], mode=mode)
    assert run.spec.status is Status.BOUNDARY
    assert target in run.spec.boundary.detail
    assert not run.overlay.has_writes  # nothing of the command was taken in
    assert mode_of(setup.root / target) == before


def test_the_question_lists_a_directory_whose_mode_the_command_changed(tmp_path):
    setup = project(tmp_path, {"secrets/key.txt": "k\n", "a.txt": "a\n"})
    os.chmod(setup.root / "secrets", 0o755)
    run = speculate(setup, ["chmod 700 secrets"], mode=ApprovalMode.DEFAULT)
    assert run.spec.status is Status.COMPLETED, run.spec.boundary
    events = accepted_turn(run, ApplyChoice.APPLY)
    question = of_type(events, ApplyRequested)[0]
    assert question.changes == (FileChange("secrets/", ChangeKind.MODE),)
    assert of_type(events, SpeculationAccepted)
    assert mode_of(setup.root / "secrets") == 0o700


@NO_SETFATTR
@pytest.mark.parametrize(
    ("command", "kind"),
    [
        ("setfattr -n user.note -v 1 secrets", ChangeKind.ATTRS),
        ("setfattr -n user.note -v 1 secrets && chmod 700 secrets", ChangeKind.MODE_ATTRS),
    ],
)
def test_the_question_lists_a_directory_whose_attributes_the_command_changed(
    tmp_path, command, kind
):
    setup = project(tmp_path, {"secrets/key.txt": "k\n", "a.txt": "a\n"})
    os.chmod(setup.root / "secrets", 0o755)
    run = speculate(setup, [command], mode=ApprovalMode.DEFAULT)
    assert run.spec.status is Status.COMPLETED, run.spec.boundary
    events = accepted_turn(run, ApplyChoice.APPLY)
    question = of_type(events, ApplyRequested)[0]
    assert question.changes == (FileChange("secrets/", kind),)
    assert of_type(events, SpeculationAccepted)
    assert os.getxattr(setup.root / "secrets", "user.note") == b"1"


def test_a_read_through_a_symlink_is_stale_once_the_link_points_elsewhere(tmp_path):
    setup = project(tmp_path, {"a.cfg": "A\n", "b.cfg": "B\n"})
    os.symlink("a.cfg", setup.root / "cfg")
    run = speculate(setup, ["cat cfg"], mode=ApprovalMode.AUTO_EDIT)
    assert run.spec.status is Status.COMPLETED, run.spec.boundary
    os.unlink(setup.root / "cfg")
    os.symlink("b.cfg", setup.root / "cfg")
    setup.script(Message.assistant("B"))  # the prompt, run for real after the conflict
    events = accepted_turn(run, ApplyChoice.APPLY)
    assert not of_type(events, SpeculationAccepted)
    notices = [e.text for e in of_type(events, Notice)]
    assert any("not used" in text and "cfg" in text for text in notices), notices


@pytest.mark.parametrize("command", ["ls src", "find . -name '*.py'", "grep -rn needle ."])
def test_a_listing_is_stale_once_a_file_appears_where_it_listed(tmp_path, command):
    setup = project(tmp_path, {"src/a.py": "needle\n"})
    run = speculate(setup, [command], mode=ApprovalMode.AUTO_EDIT)
    assert run.spec.status is Status.COMPLETED, run.spec.boundary
    (setup.root / "src" / "b.py").write_text("needle\n")
    setup.script(Message.assistant("two files"))  # the prompt, run for real after the conflict
    events = accepted_turn(run, ApplyChoice.APPLY)
    assert not of_type(events, SpeculationAccepted)


def test_git_branch_is_stale_once_the_user_makes_a_branch(tmp_path):
    setup = project(tmp_path, {"a.txt": "a\n"})
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t"]
    for args in (["init", "-q"], ["add", "."], ["commit", "-qm", "one"]):
        subprocess.run([*git, *args], cwd=setup.root, check=True, capture_output=True)
    run = speculate(setup, ["git branch"], mode=ApprovalMode.AUTO_EDIT)
    assert run.spec.status is Status.COMPLETED, run.spec.boundary
    subprocess.run([*git, "branch", "topic"], cwd=setup.root, check=True, capture_output=True)
    setup.script(Message.assistant("two branches"))
    events = accepted_turn(run, ApplyChoice.APPLY)
    assert not of_type(events, SpeculationAccepted)


@pytest.mark.parametrize("command", ["mv a.txt b.txt", "mv pkg moved", "rm a.txt"])
def test_taking_away_a_hard_linked_file_is_left_to_the_live_turn(tmp_path, command):
    """A kernel overlay records `mv` as a copy and a deletion: applied, it would break the
    link a real rename keeps, so such a command stops the speculation."""
    setup = project(tmp_path, {"a.txt": "a\n", "pkg/x.txt": "x\n"})
    os.link(setup.root / "a.txt", tmp_path / "outside-a")
    os.link(setup.root / "pkg" / "x.txt", setup.root / "x-again.txt")
    run = speculate(setup, [command], mode=ApprovalMode.AUTO_EDIT)
    assert run.spec.status is Status.BOUNDARY
    assert "hard links" in run.spec.boundary.detail
    assert not run.overlay.has_writes
