"""Accept asks what a live turn in the same mode would have asked, through the REPL
(pexpect, scripted server): a speculated `rm notes.txt` asks in auto-edit mode and the file
stays until `apply`; default mode lists the deletion, marked. Accepting while the
speculated command still runs waits for it (saying so) instead of cutting it, shows the
call once, and answers with no second request for the prompt. Skipped with the probe's
reason where a user-namespace overlay cannot be mounted."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from qshell.sandbox import probe
from tests.e2e.accepting import finished, speculating
from tests.e2e.test_speculation_repl import mains_for
from tests.waiting import wait_until

FOUND = probe()
pytestmark = pytest.mark.skipif(not FOUND.overlay, reason=FOUND.reason or "no overlay sandbox")
RM = "rm notes.txt && echo removed-it"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    root.mkdir()
    (root / "hello.txt").write_text("hello world\n")
    (root / "notes.txt").write_text("remember\n")
    return root


def test_in_auto_edit_mode_a_speculated_rm_asks_and_the_file_stays_until_apply(llm_server, project):
    child, answer, _ = speculating(
        llm_server, project, RM, "removed-it", "--approval-mode", "auto-edit"
    )
    finished(llm_server, child, answer)
    child.send("\t")
    child.submit("")
    child.expect("ran 1 command you were not asked about")
    child.expect(r"\$ rm notes.txt")
    child.expect(r"- notes.txt \(deleted\)")
    child.expect("! deletes 1 file: notes.txt")
    child.expect("Use it")
    assert "all tidy" not in child.text
    assert (project / "notes.txt").read_text() == "remember\n"
    child.submit("a")
    child.expect("all tidy")
    child.expect("saved")
    child.wait_prompt()
    child.send("\x04")
    assert child.finish() == 0
    assert not (project / "notes.txt").exists()
    assert len(mains_for(llm_server, "tidy up")) == 1


def test_in_default_mode_the_question_lists_the_deletion(llm_server, project):
    child, answer, _ = speculating(llm_server, project, RM, "removed-it")
    finished(llm_server, child, answer)
    child.send("\t")
    child.submit("")
    child.expect(r"- notes.txt \(deleted\)")
    child.expect("! deletes 1 file: notes.txt")
    child.expect("Use it")
    child.submit("d")
    child.expect("discarded the prepared answer")
    child.wait_prompt()
    child.send("\x04")
    assert child.finish() == 0
    assert (project / "notes.txt").read_text() == "remember\n"


@pytest.mark.parametrize("mode", [("--yolo",), (), ("--approval-mode", "auto-edit")])
def test_accepting_while_the_command_runs_waits_for_it_and_shows_it_once(llm_server, project, mode):
    """In yolo mode the kept work is applied at once; in default and auto-edit mode the
    command is one a live turn asks about, so the question comes once it has finished."""
    command = "sleep 3 && echo built > out.txt && echo built-it"
    child, answer, prompt = speculating(llm_server, project, command, "built-it", *mode)
    assert wait_until(lambda: prompt.hits > 0, 60.0), "the speculation never asked"
    time.sleep(0.5)  # its command is running now
    assert answer.hits == 0
    child.send("\t")
    child.submit("")
    child.expect("finishing the prepared command")
    if mode != ("--yolo",):
        child.expect("Use it")
        child.submit("a")
    child.expect("s saved")  # the kept command, then the round after it, live
    child.expect("all tidy")
    child.wait_prompt()
    child.send("\x04")
    assert child.finish() == 0
    text = child.text
    assert text.count("● shell(") == 1, text
    assert "SIGTERM" not in text and "cancelled" not in text
    assert (project / "out.txt").read_text() == "built\n"
    assert len(mains_for(llm_server, "tidy up")) == 1  # the prepared round, not asked again
