"""Speculation of any command in the full REPL (pexpect) against the scripted server: the
suggestion "run the tests" speculates a real `python -m pytest -q` on a kernel overlay, and
Tab, Enter shows the finished result with no new main request — in default mode after one
question listing the commands it ran and the files they change (apply / re-run / discard).
The plain line mode asks the same question. Skipped with the probe's reason where a
user-namespace overlay cannot be mounted."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from qshell.sandbox import probe
from tests.e2e.pty import spawn_qshell
from tests.e2e.test_speculation_repl import READ, first_turn, mains_for, start, suggests
from tests.fakes.llm_server import Reply, ToolCallSpec, always, has_tool_result
from tests.fakes.llm_server import last_user_text_contains as asks
from tests.waiting import wait_until

FOUND = probe()
pytestmark = pytest.mark.skipif(not FOUND.overlay, reason=FOUND.reason or "no overlay sandbox")
SPECULATING = {"QSHELL_SUGGESTIONS": "1", "QSHELL_SPECULATION": "1"}
# no bytecode, no .pytest_cache: the run changes no file (caches a run leaves are applied)
PYTEST = f"{sys.executable} -B -m pytest -q -p no:cacheprovider"
TESTS = "from app import add\n\n\ndef test_add():\n    assert add(1, 2) == 3\n"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    root.mkdir()
    (root / "hello.txt").write_text("hello world\n")
    (root / "app.py").write_text("def add(a, b):\n    return a + b\n")
    (root / "test_app.py").write_text(TESTS)
    return root


def test_run_the_tests_is_speculated_for_real_and_shown_finished_at_once(llm_server, project):
    before = listing(project)
    command = PYTEST
    child, answer = speculate_tests(llm_server, project, command, "--yolo")
    child.send("\t")
    child.submit("")
    shown_at_once(child, llm_server, answer, project, before)


def listing(project: Path) -> list[str]:
    return sorted(p.relative_to(project).as_posix() for p in project.rglob("*"))


def shown_at_once(child, llm_server, answer, project: Path, before: list[str]) -> None:
    """The speculated result is on the screen with no new request, and the project is as
    it was (the test run writes no cache)."""
    child.expect("all tests pass")
    child.expect("saved")
    child.wait_prompt()
    child.send("\x04")
    assert child.finish() == 0
    assert len(mains_for(llm_server, "run the tests")) == 1
    assert answer.hits == 1
    assert listing(project) == before


def speculate_tests(llm_server, project: Path, command: str, *args: str, term: str = ""):
    """Two turns in, the suggestion "run the tests" has been speculated with `command`."""
    call_ = ToolCallSpec("shell", {"command": command})
    suggests(llm_server, "run the tests")
    answer = llm_server.add_rule(has_tool_result("1 passed"), Reply.text("all tests pass"))
    llm_server.add_rule(asks("run the tests"), Reply.tool_calls([call_]))
    llm_server.add_rule(has_tool_result(), Reply.text("it says hello"))
    llm_server.add_rule(always(), Reply.tool_calls([READ]))
    if term:  # the plain line mode: no prompt_toolkit prompt to wait for
        child = spawn_qshell(llm_server, project, *args, term=term, extra_env=SPECULATING)
        child.expect(r"\n> ")
        child.send("read hello.txt\r")
        child.expect("it says hello")
    else:
        child = start(llm_server, project, *args)
        first_turn(child)
    child.expect("run the tests")
    assert wait_until(lambda: answer.hits > 0, 60.0), (
        "the speculation never got the command's result"
    )
    time.sleep(0.5)  # the speculation's last round is answered; let it finish
    return child, answer


def test_in_default_mode_the_question_comes_first_then_the_result_at_once(llm_server, project):
    before = listing(project)
    command = PYTEST
    child, answer = speculate_tests(llm_server, project, command)
    child.send("\t")
    child.submit("")
    child.expect("ran 1 command you were not asked about")
    child.expect(r"\$ .*-m pytest -q")
    child.expect("It changed no file of the project")
    child.expect("Use it")
    assert "all tests pass" not in child.text  # nothing of the answer before the choice
    child.submit("a")
    shown_at_once(child, llm_server, answer, project, before)


def test_in_default_mode_discard_leaves_the_files_and_runs_nothing(llm_server, project):
    command = f"echo ran > report.txt && {PYTEST}"
    child, answer = speculate_tests(llm_server, project, command)
    child.send("\t")
    child.submit("")
    child.expect("Applying it changes 1 file in the project")
    child.expect(r"\+ report.txt")
    child.expect("Use it")
    assert not (project / "report.txt").exists()
    child.submit("d")
    child.expect("discarded the prepared answer")
    child.wait_prompt()
    child.send("\x04")
    assert child.finish() == 0
    assert not (project / "report.txt").exists()
    assert len(mains_for(llm_server, "run the tests")) == 1
    assert answer.hits == 1


def test_in_the_plain_line_mode_re_run_for_real_asks_about_the_command(llm_server, project):
    command = f"echo ran > report.txt && {PYTEST}"
    child, answer = speculate_tests(llm_server, project, command, term="dumb")
    child.send(".\r")
    child.expect("Applying it changes 1 file in the project")
    child.expect("Use it")
    child.send("r\r")
    child.expect("running the prompt for real")
    child.expect("Allow shell")
    assert not (project / "report.txt").exists()
    child.send("y\r")
    child.expect("all tests pass")
    child.send("\x04")
    assert child.finish() == 0
    assert (project / "report.txt").read_text() == "ran\n"
    assert len(mains_for(llm_server, "run the tests")) == 2  # the speculation, then for real
    assert answer.hits == 2
