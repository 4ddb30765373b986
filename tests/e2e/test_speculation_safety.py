"""Speculation under attack, end to end: the REPL (pexpect) against the scripted server.

Each test scripts the model as an adversary would and checks what reached the server or
the disk: no secret byte, no lost user edit, nothing outside the project touched, and a
prompt that comes back at once when the user types over a slow speculation.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from qshell.followup.suggestion import SUGGESTION_MARKER
from tests.e2e.pty import Term, spawn_qshell
from tests.fakes.llm_server import (
    Reply,
    ToolCallSpec,
    always,
    has_tool_result,
    last_user_text_contains,
)

SECRET = "sk-live-7f3a9c2e0b1d"
SUGGESTED = "find where API_KEY is used"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    (root / "src").mkdir(parents=True)
    (root / "src" / "app.py").write_text("import os\nkey = os.environ['API_KEY']\n")
    (root / ".env").write_text(f"API_KEY={SECRET}\n")
    os.symlink(".env", root / "settings.txt")
    (root / "hello.txt").write_text("hello world\n")
    return root


def start(server, project: Path) -> Term:
    env = {"QSHELL_SUGGESTIONS": "1", "QSHELL_SPECULATION": "1"}
    child = spawn_qshell(server, project, extra_env=env)
    child.expect("for commands, Ctrl-D to exit")
    child.wait_prompt()
    return child


def suggest(server, text: str) -> None:
    server.add_rule(last_user_text_contains(SUGGESTION_MARKER), Reply.text(text))


def first_turn(server, child: Term) -> None:
    child.submit("read hello.txt")
    child.expect("it says hello")
    child.wait_prompt()


def sent(server) -> str:
    return "\n".join(request.raw.decode("utf-8", "replace") for request in server.requests)


def test_a_speculated_search_never_sends_a_byte_of_the_secret(llm_server, project):
    suggest(llm_server, SUGGESTED)
    shell = ToolCallSpec("shell", {"command": "grep -rn API_KEY ."})
    search = ToolCallSpec("grep", {"pattern": "API_KEY"})
    llm_server.add_rule(has_tool_result("src/app.py"), Reply.text("it is read in src/app.py"))
    llm_server.add_rule(last_user_text_contains(SUGGESTED), Reply.tool_calls([search, shell]))
    llm_server.add_rule(has_tool_result("hello world"), Reply.text("it says hello"))
    llm_server.add_rule(
        always(), Reply.tool_calls([ToolCallSpec("read_file", {"path": "hello.txt"})])
    )
    child = start(llm_server, project)
    first_turn(llm_server, child)
    child.expect(SUGGESTED)
    child.send("\t")
    child.submit("")
    child.expect("Allow shell")  # the speculation stopped at the shell call: it asks now
    child.submit("n")
    child.wait_prompt()
    child.send("\x04")
    assert child.finish() == 0
    assert SECRET not in sent(llm_server)
