"""What an ACP session remembers and how its modes map to qshell's approval modes.

reject-always: the first question about a tool is the last; every later call of it in
the session is refused without asking, and the model is told why. session/set_mode:
`auto-edit` edits without asking, `plan` refuses edits without asking, an unknown mode is
an error naming the modes. authenticate succeeds: qshell needs none.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tests.acp.sdk import NO_SDK, SDK

pytest.importorskip(SDK, reason=NO_SDK)

from acp import RequestError, text_block

from tests.acp.editor import Editor, spawn
from tests.fakes.llm_server import (
    Reply,
    ToolCallSpec,
    always,
    has_tool_result,
    last_user_text_contains,
)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    root.mkdir()
    (root / "hello.txt").write_text("hello world\n")
    return root.resolve()


def write(name: str, call_id: str) -> ToolCallSpec:
    return ToolCallSpec("write_file", {"path": name, "content": "x\n"}, id=call_id)


def test_reject_always_refuses_the_tool_for_the_rest_of_the_session(llm_server, project, tmp_path):
    llm_server.add_rule(has_tool_result("for this session"), Reply.text("gave up"))
    llm_server.add_rule(has_tool_result("denied"), Reply.tool_calls([write("b.txt", "w2")]))
    llm_server.add_rule(always(), Reply.tool_calls([write("a.txt", "w1")]))
    editor = Editor(answers=["reject_always"])

    async def scenario() -> None:
        async with spawn(editor, llm_server, project, tmp_path / "err") as conn:
            sid = (await conn.new_session(cwd=str(project), mcp_servers=[])).session_id
            done = await conn.prompt(session_id=sid, prompt=[text_block("write two files")])
            assert done.stop_reason == "end_turn"

    asyncio.run(scenario())
    assert len(editor.questions) == 1  # w2 was never asked about
    assert not (project / "a.txt").exists() and not (project / "b.txt").exists()
    failed = [u.tool_call_id for u in editor.of("tool_call_update") if u.status == "failed"]
    assert failed == ["w1", "w2"]
    for call_id in ("w1", "w2"):  # a refused call never ran: pending, then failed
        lives = [
            (u.session_update, u.status)
            for u in editor.updates
            if getattr(u, "tool_call_id", "") == call_id
        ]
        assert lives == [("tool_call", "pending"), ("tool_call_update", "failed")], call_id
    told = llm_server.requests[-1].last_tool_results[0].content
    assert "rejected every write_file call for this session" in told
    assert editor.text() == "gave up"


EDIT = ToolCallSpec(
    "edit", {"path": "hello.txt", "old_string": "hello", "new_string": "howdy"}, id="e1"
)


def test_set_mode_maps_to_the_approval_modes(llm_server, project, tmp_path):
    llm_server.add_rule(has_tool_result("howdy"), Reply.text("over"))
    llm_server.add_rule(has_tool_result("hello world"), Reply.tool_calls([EDIT]))  # as read
    llm_server.add_rule(has_tool_result(), Reply.text("over"))
    read = ToolCallSpec("read_file", {"path": "hello.txt"}, id="r1")
    llm_server.add_rule(last_user_text_contains("auto-edit"), Reply.tool_calls([read]))
    llm_server.add_rule(last_user_text_contains("edit"), Reply.tool_calls([EDIT]))
    editor = Editor()  # it answers no question: none may be asked

    async def scenario() -> None:
        async with spawn(editor, llm_server, project, tmp_path / "err") as conn:
            sid = (await conn.new_session(cwd=str(project), mcp_servers=[])).session_id
            await conn.set_session_mode(session_id=sid, mode_id="plan")
            await conn.prompt(session_id=sid, prompt=[text_block("edit in plan mode")])
            assert editor.writes == []
            await conn.set_session_mode(session_id=sid, mode_id="auto-edit")
            await conn.prompt(session_id=sid, prompt=[text_block("edit in auto-edit mode")])
            assert editor.writes == [(str(project / "hello.txt"), "howdy world\n")]
            with pytest.raises(RequestError, match=r"no mode 'sloppy'.*auto-edit"):
                await conn.set_session_mode(session_id=sid, mode_id="sloppy")
            assert await conn.authenticate(method_id="anything") is not None  # nothing to do

    asyncio.run(scenario())
    assert editor.questions == []
    denied = llm_server.requests[1].last_tool_results[0].content
    assert "plan mode allows no changes" in denied


def test_a_session_follows_the_settings_of_its_own_project(llm_server, project, tmp_path):
    """An editor may start qshell in one directory and open sessions in others: each
    session's gate rules (its approval mode here) are its project's."""
    (project / ".qshell").mkdir()
    (project / ".qshell" / "settings.json").write_text('{"approvalMode": "plan"}')
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    llm_server.add_rule(has_tool_result(), Reply.text("over"))
    llm_server.add_rule(always(), Reply.tool_calls([EDIT]))
    editor = Editor()  # it answers no question: none may be asked

    async def scenario() -> None:
        async with spawn(editor, llm_server, elsewhere, tmp_path / "err") as conn:
            new = await conn.new_session(cwd=str(project), mcp_servers=[])
            assert new.modes is not None and new.modes.current_mode_id == "plan"
            await conn.prompt(session_id=new.session_id, prompt=[text_block("edit it")])

    asyncio.run(scenario())
    assert editor.questions == [] and editor.writes == []
    assert "plan mode allows no changes" in llm_server.requests[-1].last_tool_results[0].content
