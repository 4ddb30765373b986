"""ACP's `toolCallId` is unique in a session though the model's server numbers every
response's call `call_0`: each call is a card of its own, live and when reloaded."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tests.acp.sdk import NO_SDK, SDK

pytest.importorskip(SDK, reason=NO_SDK)

from acp import text_block

from qshell.acp.prompting import ToolCallIds
from tests.acp.editor import Editor, spawn
from tests.fakes.llm_server import (
    Reply,
    ToolCallSpec,
    always,
    has_tool_result,
    last_user_text_contains,
)

READ = ToolCallSpec("read_file", {"path": "hello.txt"}, id="call_0")
EDIT = ToolCallSpec(
    "edit", {"path": "hello.txt", "old_string": "hello", "new_string": "howdy"}, id="call_0"
)


def test_a_repeated_id_gets_a_new_client_id_and_a_call_keeps_its_own():
    ids = ToolCallIds()
    assert [ids.of((1, "call_0")), ids.of((3, "call_0")), ids.of((1, "call_0"))] == [
        "call_0",
        "call_0-2",
        "call_0",
    ]
    ids.turn()  # the next prompt: the same key is another call, its id still unique
    assert ids.of((1, "call_0")) == "call_0-3"


async def prompt_then_reload(server, project: Path, stderr: Path) -> tuple[Editor, Editor]:
    live = Editor(answers=["allow_once"])
    async with spawn(live, server, project, stderr) as conn:
        sid = (await conn.new_session(cwd=str(project), mcp_servers=[])).session_id
        await conn.prompt(session_id=sid, prompt=[text_block("fix hello")])
    reloaded = Editor()
    async with spawn(reloaded, server, project, stderr) as conn:
        await conn.load_session(cwd=str(project), session_id=sid, mcp_servers=[])
    return live, reloaded


def cards(editor: Editor) -> dict[str, list]:
    """Each toolCallId's updates, the tool_call first."""
    shown: dict[str, list] = {}
    for update in editor.updates:
        if update.session_update in ("tool_call", "tool_call_update"):
            shown.setdefault(update.tool_call_id, []).append(update)
    return shown


def test_a_read_and_an_edit_both_called_call_0_are_two_cards(llm_server, tmp_path):
    project = (tmp_path / "proj").resolve()
    project.mkdir()
    (project / "hello.txt").write_text("hello world\n")
    llm_server.add_rule(has_tool_result("Edited"), Reply.text("fixed"))
    llm_server.add_rule(has_tool_result("hello world"), Reply.tool_calls([EDIT]))
    llm_server.add_rule(last_user_text_contains("fix hello"), Reply.tool_calls([READ]))
    llm_server.add_rule(always(), Reply.text("?"))
    live, reloaded = asyncio.run(prompt_then_reload(llm_server, project, tmp_path / "agent.err"))
    assert live.writes == [(str(project / "hello.txt"), "howdy world\n")]  # its buffer
    for editor in (live, reloaded):
        shown = cards(editor)
        assert list(shown) == ["call_0", "call_0-2"]
        read, edit = shown["call_0"], shown["call_0-2"]
        assert read[0].session_update == "tool_call" and read[0].kind == "read"
        assert edit[0].session_update == "tool_call" and edit[0].kind == "edit"
        assert sum(u.session_update == "tool_call" for u in read + edit) == 2
        assert read[-1].status == edit[-1].status == "completed"
        assert "Edited" not in read[-1].content[0].content.text  # its own output
        finished = edit[-1].content[0]
        assert finished.type == "diff" if editor is live else "Edited" in finished.content.text
    question, _ = live.questions[0]
    assert question.tool_call_id == "call_0-2"
