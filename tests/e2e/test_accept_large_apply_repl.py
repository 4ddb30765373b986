"""A large accept in the full REPL (pexpect, scripted server): a speculated command that
made thousands of files says it is applying them, the spinner line counts the apply up as
it goes, and Ctrl-C while it runs leaves the project as it was and says so. Skipped with
the probe's reason where a user-namespace overlay cannot be mounted."""

from __future__ import annotations

from pathlib import Path

import pytest

from qshell.sandbox import probe
from tests.e2e.accepting import finished, speculating
from tests.e2e.pty import Term

FOUND = probe()
pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(not FOUND.overlay, reason=FOUND.reason or "no overlay sandbox"),
]
FILES = 4000  # seconds of apply on any machine: time for the spinner and for a Ctrl-C
MAKE = f"mkdir out && for i in $(seq 1 {FILES}); do printf $i > out/f$i; done && echo made-them"


def accepting(llm_server, tmp_path: Path) -> tuple[Term, Path]:
    """The speculated MAKE has finished and the user has pressed Tab, Enter."""
    project = tmp_path / "proj"
    project.mkdir()
    (project / "hello.txt").write_text("hello world\n")
    child, answer, _ = speculating(llm_server, project, MAKE, "made-them", "--yolo")
    finished(llm_server, child, answer)
    child.send("\t")
    child.submit("")
    return child, project


def test_a_large_accept_counts_its_apply_up_on_the_spinner_line(llm_server, tmp_path: Path):
    child, project = accepting(llm_server, tmp_path)
    child.expect(f"applying {FILES} files of the prepared answer")
    child.expect(r"applying the prepared answer \d+ %")
    child.expect("all tidy")
    child.expect("s saved")
    child.wait_prompt()
    child.send("\x04")
    assert child.finish() == 0
    assert len(list((project / "out").iterdir())) == FILES


def test_ctrl_c_during_a_large_apply_leaves_the_project_as_it_was(llm_server, tmp_path: Path):
    child, project = accepting(llm_server, tmp_path)
    child.expect(r"applying the prepared answer \d+ %")
    child.send("\x03")
    child.expect("cancelled")
    child.wait_prompt()
    child.send("\x04")
    assert child.finish() == 0
    assert "s saved" not in child.text and "all tidy" not in child.text
    assert sorted(p.name for p in project.iterdir()) == ["hello.txt"]
