"""The tools read files through the editor when it offers `fs/read_text_file`.

A text file comes from the editor's buffer (unsaved text included), a binary one from
disk, since the protocol only carries text; an editor that fails the read makes the
tool call fail with a line the model can read, and the turn goes on.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from tests.acp.sdk import NO_SDK, SDK

pytest.importorskip(SDK, reason=NO_SDK)

from acp import RequestError, text_block

from tests.acp.editor import Editor, spawn
from tests.fakes.llm_server import Reply, ToolCallSpec, always, has_tool_result

READS = [
    ToolCallSpec("read_file", {"path": "notes.txt"}, id="r1"),
    ToolCallSpec("read_file", {"path": "logo.bin"}, id="r2"),
]


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    root.mkdir()
    (root / "notes.txt").write_text("note on disk\n")
    (root / "logo.bin").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
    return root.resolve()


def run_prompt(editor: Editor, server: Any, project: Path, stderr: Path) -> None:
    async def scenario() -> None:
        async with spawn(editor, server, project, stderr) as conn:
            sid = (await conn.new_session(cwd=str(project), mcp_servers=[])).session_id
            done = await conn.prompt(session_id=sid, prompt=[text_block("read them")])
            assert done.stop_reason == "end_turn"

    asyncio.run(scenario())


def test_text_comes_from_the_editor_buffer_and_binary_from_disk(llm_server, project, tmp_path):
    llm_server.add_rule(has_tool_result(), Reply.text("read both"))
    llm_server.add_rule(always(), Reply.tool_calls(READS))
    editor = Editor()
    editor.buffers[str(project / "notes.txt")] = "unsaved note\n"
    run_prompt(editor, llm_server, project, tmp_path / "err")
    notes, logo = llm_server.requests[-1].last_tool_results
    assert "unsaved note" in notes.content and "on disk" not in notes.content
    assert "binary" in logo.content
    assert editor.reads == [str(project / "notes.txt")]


class FailingEditor(Editor):
    async def read_text_file(self, session_id: str, path: str, **_: Any) -> Any:
        raise RequestError(-32603, "buffer is locked")


def test_a_failed_editor_read_is_a_failed_tool_call_the_model_reads(llm_server, project, tmp_path):
    llm_server.add_rule(has_tool_result(), Reply.text("could not read it"))
    llm_server.add_rule(always(), Reply.tool_calls(READS[:1]))
    editor = FailingEditor()
    run_prompt(editor, llm_server, project, tmp_path / "err")
    (result,) = llm_server.requests[-1].last_tool_results
    assert "the editor could not read" in result.content and "buffer is locked" in result.content
    statuses = [u.status for u in editor.of("tool_call_update") if u.tool_call_id == "r1"]
    assert statuses == ["failed"]
    assert editor.text() == "could not read it"
