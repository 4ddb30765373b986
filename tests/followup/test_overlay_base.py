"""What a speculated command changed is checked against the tree as it was before it ran,
and against every protected path below what it deleted: the user's version always stays.

Real commands on the kernel overlay (as tests/followup/test_overlay_run.py); what the user
does "while the command runs" is done by a hook between the command's end and the moment
its layer is taken in (`overlay_run._take_in`), after the base was taken. Skipped with the
probe's reason where a user-namespace overlay cannot be mounted.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from qshell.agent.events import Notice, SpeculationAccepted
from qshell.followup import overlay_run
from qshell.followup.states import Status
from qshell.llm.messages import Message
from tests.followup.test_overlay_run import FOUND, Run, project, speculate
from tests.followup.test_speculation_properties import tree

pytestmark = pytest.mark.skipif(not FOUND.overlay, reason=FOUND.reason or "no overlay sandbox")


def while_it_runs(monkeypatch: pytest.MonkeyPatch, act: Callable[[], object]) -> None:
    """Do `act` after the command ran and before what it left is taken in."""
    original = overlay_run._take_in

    def hooked(*args: Any, **kwargs: Any) -> list[str]:
        act()
        return original(*args, **kwargs)

    monkeypatch.setattr(overlay_run, "_take_in", hooked)


def accepted_as_conflict(run: Run, where: str) -> None:
    """Accept reports a conflict naming `where` and runs the prompt live instead."""
    assert run.spec.status is Status.COMPLETED, run.spec.boundary
    conflicts = [str(c) for c in run.overlay.check_conflicts()]
    assert any(c.startswith(where) for c in conflicts), conflicts
    run.setup.script(Message.assistant("ran it now"))
    events = run.accept()
    assert not any(isinstance(e, SpeculationAccepted) for e in events)
    notices = [e.text for e in events if isinstance(e, Notice)]
    assert any(where in text and "not used" in text for text in notices), notices


def test_a_file_saved_into_a_directory_the_command_deletes_is_not_deleted(tmp_path, monkeypatch):
    setup = project(tmp_path, {"out/old.txt": "old\n", "a.txt": "a\n"})
    saved = setup.root / "out/notes.txt"
    while_it_runs(monkeypatch, lambda: saved.write_text("the user's notes\n"))
    run = speculate(setup, ["rm -rf out; echo cleaned"])
    accepted_as_conflict(run, "out")
    assert saved.read_text() == "the user's notes\n"
    assert (setup.root / "out/old.txt").read_text() == "old\n"


def test_a_file_the_user_makes_where_the_command_wrote_is_not_overwritten(tmp_path, monkeypatch):
    setup = project(tmp_path, {"a.txt": "a\n"})
    made = setup.root / "report.txt"
    while_it_runs(monkeypatch, lambda: made.write_text("the user's report\n"))
    run = speculate(setup, ["echo generated > report.txt"])
    accepted_as_conflict(run, "report.txt")
    assert made.read_text() == "the user's report\n"


def test_a_directory_the_user_makes_deep_in_a_replaced_one_is_kept(tmp_path, monkeypatch):
    setup = project(tmp_path, {"out/a/b.txt": "b\n", "out/c.txt": "c\n"})
    while_it_runs(monkeypatch, lambda: (setup.root / "out/a/mine").mkdir())
    run = speculate(setup, ["rm -rf out && mkdir out && echo n > out/new.txt"])
    accepted_as_conflict(run, "out/a")
    assert (setup.root / "out/a/mine").is_dir()
    assert (setup.root / "out/c.txt").read_text() == "c\n"


def test_without_a_change_meanwhile_the_same_commands_still_apply(tmp_path):
    setup = project(tmp_path, {"out/old.txt": "old\n", "a.txt": "a\n"})
    run = speculate(setup, ["rm -rf out; echo generated > report.txt"])
    assert run.spec.status is Status.COMPLETED, run.spec.boundary
    assert run.overlay.check_conflicts() == []
    events = run.accept()
    assert any(isinstance(e, SpeculationAccepted) for e in events)
    assert not (setup.root / "out").exists()
    assert (setup.root / "report.txt").read_text() == "generated\n"


# --- protected paths below what a command deletes, replaces or renames away -------------

PROTECTED_TREES = [
    ("rm -rf .github", {".github/workflows/ci.yml": "on: push\n"}, ".github/workflows"),
    ("mv .github x", {".github/workflows/ci.yml": "on: push\n"}, ".github/workflows"),
    ("rm -rf pkg", {"pkg/.husky/pre-commit": "make\n"}, "pkg/.husky"),
    ("rm -rf pkg", {"pkg/.githooks/pre-push": "make\n"}, "pkg/.githooks"),
    ("rm -rf pkg", {"pkg/.idea/workspace.xml": "<x/>\n"}, "pkg/.idea"),
    ("rm -rf pkg", {"pkg/deep/.devcontainer/d.json": "{}\n"}, "pkg/deep/.devcontainer"),
    ("rm -rf pkg", {"pkg/.gitattributes": "* text\n"}, "pkg/.gitattributes"),
    ("rm -rf pkg", {"pkg/.gitmodules": "[submodule]\n"}, "pkg/.gitmodules"),
    ("rm -rf pkg", {"pkg/.pre-commit-config.yaml": "repos: []\n"}, "pkg/.pre-commit-config.yaml"),
    ("rm -rf pkg", {"pkg/sub/.git": "gitdir: ../../.git/modules/sub\n"}, "pkg/sub/.git"),
    ("rm -rf pkg && mkdir pkg && echo n > pkg/n", {"pkg/.husky/h": "x\n"}, "pkg/.husky"),
    ("rm -rf pkg && echo file > pkg", {"pkg/.idea/i.xml": "<x/>\n"}, "pkg/.idea"),
]


@pytest.mark.parametrize(("command", "files", "named"), PROTECTED_TREES)
def test_deleting_a_directory_that_holds_a_protected_path_is_a_boundary(
    tmp_path: Path, command: str, files: dict[str, str], named: str
) -> None:
    setup = project(tmp_path, {**files, "a.txt": "a\n"})
    before = tree(setup.root)
    run = speculate(setup, [command])
    assert run.spec.status is Status.BOUNDARY
    assert run.spec.boundary is not None and named in run.spec.boundary.detail
    assert run.overlay.written == [] and not run.overlay.has_writes  # nothing taken in
    setup.script(Message.assistant("stopped there"))  # the boundary call is asked (denied)
    run.accept()
    assert tree(setup.root) == before


def test_a_commit_after_a_speculated_git_log_is_a_conflict(tmp_path):
    setup = project(tmp_path, {"a.txt": "a\n"})
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@e", "-c", "commit.gpgsign=false"]
    subprocess.run(["git", "init", "-q"], cwd=setup.root, check=True)
    subprocess.run(["git", "add", "a.txt"], cwd=setup.root, check=True)
    subprocess.run([*git, "commit", "-qm", "one"], cwd=setup.root, check=True)
    run = speculate(setup, ["git log --oneline"])
    assert run.spec.status is Status.COMPLETED, run.spec.boundary
    (setup.root / "b.txt").write_text("b\n")
    subprocess.run(["git", "add", "b.txt"], cwd=setup.root, check=True)
    subprocess.run([*git, "commit", "-qm", "two"], cwd=setup.root, check=True)
    setup.script(Message.assistant("ran it now"))
    events = run.accept()
    assert not any(isinstance(e, SpeculationAccepted) for e in events)
    notices = [e.text for e in events if isinstance(e, Notice)]
    assert any(".git/" in text and "not used" in text for text in notices), notices


def test_a_symlink_read_through_and_re_pointed_meanwhile_is_a_conflict(tmp_path):
    setup = project(tmp_path, {"v1/conf.txt": "one\n", "v2/conf.txt": "one\n"})
    (setup.root / "current").symlink_to("v1")
    run = speculate(setup, ["cat current/conf.txt > copy.txt"])
    assert run.spec.status is Status.COMPLETED, run.spec.boundary
    (setup.root / "current").unlink()
    (setup.root / "current").symlink_to("v2")  # same content: only the link says it moved
    setup.script(Message.assistant("ran it now"))
    events = run.accept()
    assert not any(isinstance(e, SpeculationAccepted) for e in events)
    assert not (setup.root / "copy.txt").exists()


def test_a_setuid_bit_a_command_sets_is_a_boundary_never_applied(tmp_path):
    setup = project(tmp_path, {"tool.sh": "#!/bin/sh\n"})
    before = tree(setup.root)
    run = speculate(setup, ["chmod u+s,g+s tool.sh && cp tool.sh copy.sh"])
    assert run.spec.status is Status.BOUNDARY
    assert run.spec.boundary is not None and "setuid" in run.spec.boundary.detail
    assert not run.overlay.has_writes
    setup.script(Message.assistant("stopped there"))
    run.accept()
    assert tree(setup.root) == before
