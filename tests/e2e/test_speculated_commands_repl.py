"""Speculation of any command in the full REPL (pexpect) against the scripted server: the
suggestion "run the tests" speculates a real `python -m pytest -q` on a kernel overlay, and
Tab, Enter shows the finished result with no new main request. Skipped with the probe's
reason where a user-namespace overlay cannot be mounted."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from qshell.sandbox import probe
from tests.e2e.test_speculation_repl import READ, first_turn, mains_for, start, suggests
from tests.fakes.llm_server import Reply, ToolCallSpec, always, has_tool_result
from tests.fakes.llm_server import last_user_text_contains as asks

FOUND = probe()
pytestmark = pytest.mark.skipif(not FOUND.overlay, reason=FOUND.reason or "no overlay sandbox")
TESTS = "from app import add\n\n\ndef test_add():\n    assert add(1, 2) == 3\n"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    root.mkdir()
    (root / "hello.txt").write_text("hello world\n")
    (root / "app.py").write_text("def add(a, b):\n    return a + b\n")
    (root / "test_app.py").write_text(TESTS)
    return root


def wait_for(rule, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while rule.hits == 0:
        assert time.monotonic() < deadline, "the speculation never got the command's result"
        time.sleep(0.05)


def test_run_the_tests_is_speculated_for_real_and_shown_finished_at_once(llm_server, project):
    before = sorted(p.relative_to(project).as_posix() for p in project.rglob("*"))
    pytest_call = ToolCallSpec("shell", {"command": f"{sys.executable} -m pytest -q"})
    suggests(llm_server, "run the tests")
    answer = llm_server.add_rule(has_tool_result("1 passed"), Reply.text("all tests pass"))
    llm_server.add_rule(asks("run the tests"), Reply.tool_calls([pytest_call]))
    llm_server.add_rule(has_tool_result(), Reply.text("it says hello"))
    llm_server.add_rule(always(), Reply.tool_calls([READ]))
    child = start(llm_server, project, "--approval-mode", "auto-edit")
    first_turn(child)
    child.expect("run the tests")
    wait_for(answer)
    time.sleep(0.5)  # the speculation's last round is answered; let it finish
    child.send("\t")
    child.submit("")
    child.expect("all tests pass")
    child.expect("saved")
    child.wait_prompt()
    child.send("\x04")
    assert child.finish() == 0
    assert len(mains_for(llm_server, "run the tests")) == 1
    assert answer.hits == 1  # no new request: the speculated result was shown
    after = sorted(p.relative_to(project).as_posix() for p in project.rglob("*"))
    assert after == before  # the test run's caches were not applied
