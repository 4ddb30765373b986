"""A hard link a speculated command makes is applied as one file with two names, as the live
command leaves it, or the command is left to the live turn where that cannot be exact.

A kernel overlay keeps a link made inside one command's layer (both names one inode in the
upper layer), and the apply joins them again; the question lists both names, and what it
lists is what lands. Where applying cannot keep the links a live run keeps — a second call
that changes one name of a link an earlier call made (the overlay copies that name up
alone), or a link to a file that already has others (possibly outside the project) — the
speculation stops at that command. On the real kernel overlay; skipped with the probe's
reason where none mounts.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from qshell.agent.events import (
    ApplyChoice,
    ApplyRequested,
    ChangeKind,
    FileChange,
    SpeculationAccepted,
)
from qshell.config import ApprovalMode
from qshell.followup.speculation import Status
from qshell.sandbox import probe
from tests.followup.test_consent import accepted_turn, of_type
from tests.followup.test_overlay_run import project, speculate

FILES = {"a.txt": "a\n", "sub/keep.txt": "k\n"}
FOUND = probe()
pytestmark = pytest.mark.skipif(not FOUND.overlay, reason=FOUND.reason or "no overlay sandbox")


def live_run(root: Path, command: str) -> None:
    """`FILES` under `root`, and `command` run there with bash, as a live shell call does."""
    for rel, text in FILES.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    subprocess.run(["bash", "-c", command], cwd=root, check=True)


def names_of(root: Path, rel: str) -> set[str]:
    """Every name under `root` that is the same inode as `rel`."""
    inode = os.lstat(root / rel).st_ino
    return {
        path.relative_to(root).as_posix()
        for path in root.rglob("*")
        if path.is_file() and not path.is_symlink() and os.lstat(path).st_ino == inode
    }


@pytest.mark.parametrize(
    "command",
    [
        "ln a.txt b.txt",  # a real file's second name
        "ln a.txt sub/b.txt; printf more >> sub/b.txt",  # edited through the new name
        "printf new > n.txt; ln n.txt b.txt; ln n.txt a.txt.2",  # a file the command made
    ],
)
def test_a_hard_link_the_command_made_lands_as_one_file_with_every_name(tmp_path, command):
    setup = project(tmp_path, FILES)
    live = tmp_path / "live"
    live_run(live, command)
    run = speculate(setup, [command], mode=ApprovalMode.DEFAULT)
    assert run.spec.status is Status.COMPLETED, run.spec.boundary
    events = accepted_turn(run, ApplyChoice.APPLY)
    question = of_type(events, ApplyRequested)[0]
    accepted = of_type(events, SpeculationAccepted)
    assert accepted
    assert {c.path for c in question.changes} == set(accepted[0].files)  # listed = applied
    linked = sorted(p for p in accepted[0].files if os.lstat(live / p).st_nlink > 1)
    assert linked and names_of(setup.root, linked[0]) == names_of(live, linked[0])
    for rel in accepted[0].files:
        assert (setup.root / rel).read_bytes() == (live / rel).read_bytes()
        assert os.lstat(setup.root / rel).st_nlink == os.lstat(live / rel).st_nlink


def test_the_question_names_the_linked_file_and_its_new_name(tmp_path):
    setup = project(tmp_path, {"a.txt": "a\n"})
    run = speculate(setup, ["ln a.txt b.txt"], mode=ApprovalMode.DEFAULT)
    assert run.spec.status is Status.COMPLETED, run.spec.boundary
    events = accepted_turn(run, ApplyChoice.APPLY)
    assert of_type(events, ApplyRequested)[0].changes == (
        FileChange("a.txt", ChangeKind.CHANGED),
        FileChange("b.txt", ChangeKind.CREATED),
    )
    assert names_of(setup.root, "a.txt") == {"a.txt", "b.txt"}


@pytest.mark.parametrize("second", ["printf x >> b.txt", "mv b.txt c.txt", "rm a.txt"])
def test_a_later_call_that_changes_one_name_of_a_link_is_left_to_the_live_turn(tmp_path, second):
    """The overlay copies up the one name a later command touches, as a new inode: applied,
    the other name would not see the change (or the rename would lose the link)."""
    setup = project(tmp_path, {"a.txt": "a\n"})
    run = speculate(setup, ["ln a.txt b.txt", second], mode=ApprovalMode.AUTO_EDIT)
    assert run.spec.status is Status.BOUNDARY
    assert "hard links" in run.spec.boundary.detail
    assert run.overlay.written == ["a.txt", "b.txt"]  # the first call stands


@pytest.mark.parametrize("inside", [True, False])
def test_linking_a_file_that_has_other_links_is_left_to_the_live_turn(tmp_path, inside):
    setup = project(tmp_path, {"a.txt": "a\n"})
    other = setup.root / "again.txt" if inside else tmp_path / "outside.txt"
    os.link(setup.root / "a.txt", other)
    run = speculate(setup, ["ln a.txt b.txt"], mode=ApprovalMode.AUTO_EDIT)
    assert run.spec.status is Status.BOUNDARY
    assert "a.txt has other hard links" in run.spec.boundary.detail
    assert not run.overlay.has_writes
    assert not (setup.root / "b.txt").exists()
