"""Post-execution directives (D1) in the full REPL (pexpect) against the scripted server.

An allowlisted plugin tool whose result says `skip_llm_round` ends the turn with its output
shown as the answer and no second model round; the user's next prompt goes on from that
history (the fake server reports an invalid pairing as a violation). Without the
allowlist the result goes back to the model.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.pty import spawn_qshell
from tests.e2e.test_directives_cli import TOOL
from tests.fakes.llm_server import Reply, ToolCallSpec, has_tool_result, last_user_text_contains
from tests.plugins.helpers import write_plugin


@pytest.fixture
def plugin(tmp_path: Path) -> Path:
    return write_plugin(tmp_path / "listing.py", "qshell_register_tools(register)", *TOOL)


def _script(server) -> None:
    server.add_rule(last_user_text_contains("and the rest?"), Reply.text("nothing else"))
    server.add_rule(has_tool_result("things: a b"), Reply.text("the model read it"))
    server.add_rule(
        last_user_text_contains("list a b"),
        Reply.tool_calls([ToolCallSpec("listing", {"what": "a b"})]),
    )


def test_an_allowlisted_skip_shows_the_output_as_the_answer_and_the_session_goes_on(
    llm_server, plugin, tmp_path
):
    _script(llm_server)
    env = {"QSHELL_TOOL_POST_EXEC_ALLOWLIST": '["listing"]'}
    child = spawn_qshell(llm_server, tmp_path, "-y", "--plugin", str(plugin), extra_env=env)
    child.wait_prompt()
    child.submit("list a b")
    child.expect("things: a b")
    child.wait_prompt()
    assert len(llm_server.requests) == 1  # no round read the output back
    assert "the model read it" not in child.text

    child.submit("and the rest?")
    child.expect("nothing else")
    child.wait_prompt()
    assert len(llm_server.requests) == 2 and llm_server.violations == []
    messages = llm_server.requests[-1].body["messages"]
    assert [m["role"] for m in messages[-3:]] == ["assistant", "tool", "user"]
    child.send("\x04")
    assert child.finish() == 0


def test_without_the_allowlist_the_model_answers(llm_server, plugin, tmp_path):
    _script(llm_server)
    child = spawn_qshell(llm_server, tmp_path, "-y", "--plugin", str(plugin))
    child.wait_prompt()
    child.submit("list a b")
    child.expect("the model read it")
    child.wait_prompt()
    assert len(llm_server.requests) == 2
    child.send("\x04")
    assert child.finish() == 0
