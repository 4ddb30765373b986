"""A speculated command that deletes a directory holding protected files, in the full REPL
(pexpect) in default and auto-edit mode: `rm -rf .github` (which holds `.github/workflows/`) is a
boundary in the speculation, and Tab, Enter never deletes the workflows — the command is
asked about live, as a live turn asks. Skipped with the probe's reason where a
user-namespace overlay cannot be mounted."""

from __future__ import annotations

from pathlib import Path

import pytest

from qshell.sandbox import probe
from tests.e2e.test_speculation_repl import READ, first_turn, mains_for, speculated, start, suggests
from tests.fakes.llm_server import Reply, ToolCallSpec, always, has_tool_result
from tests.fakes.llm_server import last_user_text_contains as asks
from tests.waiting import wait_until

FOUND = probe()
pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(not FOUND.overlay, reason=FOUND.reason or "no overlay sandbox"),
]
WORKFLOW = "on: push\njobs: {}\n"


@pytest.mark.parametrize(
    "mode", [(), ("--approval-mode", "auto-edit")], ids=["default", "auto-edit"]
)
def test_rm_rf_github_is_never_applied_on_accept(llm_server, tmp_path: Path, mode):
    root = tmp_path / "proj"
    (root / ".github/workflows").mkdir(parents=True)
    (root / ".github/workflows/ci.yml").write_text(WORKFLOW)
    (root / ".github/CODEOWNERS").write_text("* @me\n")
    (root / "hello.txt").write_text("hello world\n")
    remove = ToolCallSpec("shell", {"command": "rm -rf .github && echo removed"})
    suggests(llm_server, "remove the ci config")
    answer = llm_server.add_rule(has_tool_result("removed"), Reply.text("ci config removed"))
    llm_server.add_rule(has_tool_result("denied"), Reply.text("left the ci config alone"))
    llm_server.add_rule(asks("remove the ci config"), Reply.tool_calls([remove]))
    llm_server.add_rule(has_tool_result(), Reply.text("it says hello"))
    llm_server.add_rule(always(), Reply.tool_calls([READ]))
    child = start(llm_server, root, *mode)
    first_turn(child)
    child.expect("remove the ci config")
    speculated(llm_server, "remove the ci config")
    wait_until(lambda: answer.hits > 0, 3.0)  # the command ran (a boundary: no next round)
    child.send("\t")
    child.submit("")
    child.expect(r"Allow shell\?")  # asked live, as a live turn in either mode asks
    assert "Use it?" not in child.text
    child.send("n\r")
    child.expect("left the ci config alone")
    child.wait_prompt()
    child.send("\x04")
    assert child.finish() == 0
    assert (root / ".github/workflows/ci.yml").read_text() == WORKFLOW
    assert (root / ".github/CODEOWNERS").read_text() == "* @me\n"
    assert answer.hits == 0  # the speculated deletion never stood
    assert len(mains_for(llm_server, "remove the ci config")) >= 1
