"""A hard link a speculated command makes is applied as one file with two names, as the live
command leaves it, or the command is left to the live turn where that cannot be exact.

A kernel overlay keeps a link made inside one command's layer (both names one inode in the
upper layer), and the apply joins them again; the question lists both names, and what it
lists is what lands. Where applying cannot keep the links a live run keeps — a second call
that changes one name of a link an earlier call made (the overlay copies that name up
alone), or a link to a file that already has others (possibly outside the project) — the
speculation stops at that command. So it does at any change, by a command or a tool, to a
real file with another name: the overlay's copy would be that name alone, and the others
would show the old file to the rest of the speculation (`cp hard-a n` copying the old
content); the live turn then makes the change, and the tree is what a live turn leaves. On
the real kernel overlay; skipped with the probe's reason where none mounts.
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
from qshell.followup.gate import BoundaryType
from qshell.followup.overlay_run import LINKED_REASON
from qshell.followup.states import Status
from qshell.sandbox import probe
from tests.agent.test_conversation import read_call, write_call
from tests.followup.differential import differences
from tests.followup.test_accept_tool_writes import (
    Prepare,
    accepted_tree,
    in_a_live_turn,
    shell_call,
    speculated,
)
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


def second_name(where: str) -> Prepare:
    """A preparation linking a.txt to a second name: in the project, or beside it."""

    def prepare(root: Path) -> None:
        os.link(root / "a.txt", root / "hard-a.txt" if where == "inside" else root.parent / "a.out")

    return prepare


@pytest.mark.parametrize("where", ["inside", "outside"])
@pytest.mark.parametrize(
    "commands",
    [
        ["printf %s b >> a.txt; cp hard-a.txt n.txt"],  # read through the other name at once
        ["printf %s b >> a.txt", "cp hard-a.txt n.txt"],  # or by a later call
        ["chmod 700 a.txt", "stat -c %a hard-a.txt > n.txt"],
        ["touch a.txt"],
        ["sed -i s/a/Z/ a.txt"],
    ],
)
def test_a_command_that_changes_a_file_with_another_name_is_left_to_the_live_turn(
    tmp_path, where, commands
):
    """The kernel overlay copies the one name up: every other name would show the old file
    to the rest of the speculation. Its call runs in the live turn, which lands as live."""
    steps = [shell_call(c, f"c{i}") for i, c in enumerate(commands)]
    live = in_a_live_turn(tmp_path, steps, second_name(where))
    run = speculated(tmp_path, steps, second_name(where))
    assert run.spec.status is Status.BOUNDARY and run.spec.boundary is not None
    assert run.spec.boundary.detail.endswith(f"(a.txt {LINKED_REASON})")
    assert not run.overlay.has_writes
    _, found = accepted_tree(run)
    assert not differences(live, found), differences(live, found)


@pytest.mark.parametrize("where", ["inside", "outside"])
def test_a_tool_write_to_a_file_with_another_name_is_left_to_the_live_turn(tmp_path, where):
    """A real write changes the file every name shows (the live write_file writes in place);
    the overlay's copy would be the one name alone."""
    steps = [
        read_call("a.txt", "r0"),
        write_call("a.txt", "a edited\n", "w0"),
        shell_call("cp hard-a.txt n.txt", "c0"),
    ]
    live = in_a_live_turn(tmp_path, steps, second_name(where))
    run = speculated(tmp_path, steps, second_name(where))
    assert run.spec.status is Status.BOUNDARY and run.spec.boundary is not None
    assert run.spec.boundary.type is BoundaryType.EDIT
    assert "a.txt has other hard links" in run.spec.boundary.detail
    assert not run.overlay.has_writes
    _, found = accepted_tree(run)
    assert not differences(live, found), differences(live, found)
