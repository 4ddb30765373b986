"""`qshell --acp` driven by the ACP SDK's client side, as an editor drives it.

One session from start to reload: initialize, a new session, a prompt whose edit needs
permission (default approval mode) and is granted once the file is read from the editor's buffer, the streamed answer with the edit's
diff, a second prompt cancelled mid-answer, and `session/load` of the session in a new
process, which replays it and goes on from its history.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tests.acp.sdk import NO_SDK, SDK

pytest.importorskip(SDK, reason=NO_SDK)

from acp import text_block

from tests.acp.editor import Editor, spawn
from tests.fakes.llm_server import (
    Latency,
    Reply,
    ToolCallSpec,
    always,
    has_tool_result,
    last_user_text_contains,
)

READ = ToolCallSpec("read_file", {"path": "hello.txt"}, id="r1")
EDIT = ToolCallSpec(
    "edit",
    {"path": "hello.txt", "old_string": "unsaved words", "new_string": "edited words"},
    id="e1",
)
ANSWER = "I changed hello.txt in your editor."


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    root.mkdir()
    (root / "hello.txt").write_text("hello from disk\n")
    return root.resolve()


def script(server):
    server.add_rule(
        has_tool_result("edited words"), Reply.text(ANSWER, latency=Latency(tokens_per_s=200))
    )
    server.add_rule(has_tool_result("unsaved words"), Reply.tool_calls([EDIT]))  # as read
    server.add_rule(last_user_text_contains("change hello"), Reply.tool_calls([READ]))
    slow = server.add_rule(last_user_text_contains("second"), Reply.text("a long answer " * 40))
    hold = server.hold(slow, after_first_chunk=True)
    server.add_rule(always(), Reply.text("still here"))
    return hold


async def first_process(editor, server, project, stderr, hold) -> str:
    async with spawn(editor, server, project, stderr) as conn:
        new = await conn.new_session(cwd=str(project), mcp_servers=[])
        assert new.modes is not None and new.modes.current_mode_id == "default"
        assert {m.id for m in new.modes.available_modes} == {"default", "auto-edit", "plan", "yolo"}
        sid = new.session_id
        done = await conn.prompt(session_id=sid, prompt=[text_block("change hello please")])
        assert done.stop_reason == "end_turn"

        second = asyncio.create_task(conn.prompt(session_id=sid, prompt=[text_block("second")]))
        await asyncio.to_thread(hold.wait_arrived, 20)
        await conn.cancel(session_id=sid)
        cancelled = await asyncio.wait_for(second, 20)
        hold.release()
        assert cancelled.stop_reason == "cancelled"

        after = await conn.prompt(session_id=sid, prompt=[text_block("after the cancel")])
        assert after.stop_reason == "end_turn"
        return sid


def test_an_editor_edits_through_its_buffers_cancels_and_reloads_the_session(
    llm_server, project, tmp_path
):
    hold = script(llm_server)
    stderr = tmp_path / "agent.err"
    hello = str(project / "hello.txt")
    editor = Editor(answers=["allow_once"])
    editor.buffers[hello] = "unsaved words\n"  # the buffer differs from the disk
    sid = asyncio.run(first_process(editor, llm_server, project, stderr, hold))

    # the permission question: the pending tool call, its diff preview, four options
    call, options = editor.questions[0]
    assert call.tool_call_id == "e1" and call.kind == "edit" and call.status == "pending"
    assert [o.kind for o in options] == [
        "allow_once",
        "allow_always",
        "reject_once",
        "reject_always",
    ]
    assert call.locations is not None and call.locations[0].path == hello
    assert call.content is not None
    assert "+edited words" in call.content[0].content.text
    # the call's life: announced, run, finished with a diff of whole texts
    starts = [u for u in editor.of("tool_call") if u.tool_call_id == "e1"]
    assert len(starts) == 1 and starts[0].status == "pending"
    statuses = [u.status for u in editor.of("tool_call_update") if u.tool_call_id == "e1"]
    assert statuses == ["in_progress", "completed"]
    updates = editor.of("tool_call_update")
    diff = next(u for u in updates if u.tool_call_id == "e1" and u.status == "completed").content[0]
    assert (diff.type, diff.path) == ("diff", hello)
    assert (diff.old_text, diff.new_text) == ("unsaved words\n", "edited words\n")
    # the editor's buffer was read and written; the file on disk is untouched
    assert hello in editor.reads and editor.writes == [(hello, "edited words\n")]
    assert (project / "hello.txt").read_text() == "hello from disk\n"
    # the answer streamed in pieces, the cancelled one stopped, the next went on
    answer_chunks = [u.content.text for u in editor.of("agent_message_chunk")]
    assert len(answer_chunks) > 2 and "".join(answer_chunks).startswith(ANSWER)
    assert "still here" in editor.text()
    assert llm_server.requests[-1].last_user_text == "after the cancel"

    reloaded = Editor()
    asyncio.run(load_process(reloaded, llm_server, project, stderr, sid))
    users = [u.content.text for u in reloaded.of("user_message_chunk")]
    assert (
        users[0] == "change hello please" and "second" in users and users[-1] == "after the cancel"
    )
    replayed = [u for u in reloaded.of("tool_call") if u.tool_call_id == "e1"]
    assert replayed[0].kind == "edit" and replayed[0].status == "completed"
    assert ANSWER in reloaded.text()
    resumed = llm_server.requests[-1]
    assert resumed.last_user_text == "and now?" and "edited words" in resumed.all_text
    assert "Traceback" not in stderr.read_text()


async def load_process(editor, server, project, stderr, sid) -> None:
    async with spawn(editor, server, project, stderr) as conn:
        loaded = await conn.load_session(cwd=str(project), session_id=sid, mcp_servers=[])
        assert loaded.modes is not None and loaded.modes.current_mode_id == "default"
        more = await conn.prompt(session_id=sid, prompt=[text_block("and now?")])
        assert more.stop_reason == "end_turn"
