"""A server that numbers tool calls `call_0` in every response (some OpenAI-compatible
servers do), through the REPL: a speculated read then edit, accepted, and a live turn
whose rounds all reuse the id; each call keeps its own result."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.e2e.pty import Term, spawn_qshell
from tests.e2e.test_speculation_repl import speculated, start, suggests
from tests.fakes.llm_server import (
    Reply,
    ToolCallSpec,
    all_of,
    always,
    any_text_contains,
    has_tool_result,
    last_user_text_contains,
)

SAME_ID = "call_0"
READ = ToolCallSpec("read_file", {"path": "hello.txt"}, id=SAME_ID)
EDIT = ToolCallSpec(
    "edit", {"path": "hello.txt", "old_string": "hello", "new_string": "howdy"}, id=SAME_ID
)


def undo(child: Term) -> None:
    child.submit("/undo")
    child.expect("restored hello.txt")
    child.wait_prompt()


@pytest.mark.parametrize("mode", ["default", "auto-edit"])
def test_an_accepted_speculated_read_then_edit_applies_the_edit_with_repeated_ids(
    llm_server, project: Path, isolated_home: Path, mode: str
):
    """The speculation reads, then stops before its edit runs (default mode: the edit is
    a boundary; auto-edit: its message limit comes first); on accept the edit runs live,
    its diff shows, the file changes and /undo puts it back."""
    settings = isolated_home / "qshell" / "config" / "settings.json"
    settings.parent.mkdir(parents=True)
    settings.write_text(json.dumps({"speculation": {"maxMessages": 3}}))
    suggests(llm_server, "thanks", after="greeting fixed")  # nothing after the fix
    suggests(llm_server, "fix the greeting")
    llm_server.add_rule(has_tool_result("Edited hello.txt"), Reply.text("greeting fixed"))
    # the edit is asked for once, after the speculated read of the fix's own turn: were
    # the edit answered with that read's output, the model would say it is fixed anyway
    fixing = all_of(has_tool_result("hello world"), any_text_contains("fix the greeting"))
    llm_server.add_rule(fixing, Reply.tool_calls([EDIT]), times=1)
    llm_server.add_rule(fixing, Reply.text("Fixed"))
    llm_server.add_rule(last_user_text_contains("fix the greeting"), Reply.tool_calls([READ]))
    llm_server.add_rule(has_tool_result(), Reply.text("it says hello"))
    llm_server.add_rule(always(), Reply.tool_calls([READ]))
    child = start(llm_server, project, "--approval-mode", mode)
    child.submit("read hello.txt")
    child.expect("it says hello")
    child.wait_prompt()
    child.expect("fix the greeting")
    speculated(llm_server, "fix the greeting")
    child.send("\t")
    child.submit("")
    child.expect("continuing from where it stopped")
    if mode == "default":
        child.expect(r"\+howdy world")  # the diff, in the question
        child.expect("Allow edit")
        child.submit("y")
    child.expect("Edited hello.txt")
    if mode == "auto-edit":
        child.expect(r"\+howdy world")  # the diff, under the call
    child.expect("greeting fixed")
    child.wait_prompt()
    assert (project / "hello.txt").read_text() == "howdy world\n"
    undo(child)
    child.send("\x04")
    assert child.finish() == 0
    assert (project / "hello.txt").read_text() == "hello world\n"
    assert "Fixed" not in child.text
    assert not llm_server.violations


def test_a_live_turn_whose_rounds_all_say_call_0_keeps_each_result(llm_server, project: Path):
    """One turn's rounds each name their call `call_0`: a read, an edit, then a write the
    output limit cuts off. The cut call is left out of the next request, and only it: the
    read and the edit before it still go with their results; /undo undoes the edit."""
    cut = ToolCallSpec("write_file", '{"path": "notes.txt", "content": "hel', id=SAME_ID)
    llm_server.add_rule(last_user_text_contains("go on"), Reply.text("all done"))
    llm_server.add_rule(
        has_tool_result("Edited hello.txt"), Reply.tool_calls([cut], stop_reason="max_tokens")
    )
    llm_server.add_rule(has_tool_result("hello world"), Reply.tool_calls([EDIT]))
    llm_server.add_rule(always(), Reply.tool_calls([READ]))
    child = spawn_qshell(llm_server, project, "--approval-mode", "auto-edit")
    child.expect("for commands, Ctrl-D to exit")
    child.wait_prompt()
    child.submit("fix the greeting")
    child.expect(r"\+howdy world")
    child.expect("output limit")
    child.wait_prompt()
    child.submit("go on")
    child.expect("all done")
    child.wait_prompt()
    undo(child)
    child.send("\x04")
    assert child.finish() == 0
    assert (project / "hello.txt").read_text() == "hello world\n"
    sent = llm_server.requests[-1]
    calls = [c.name for turn in sent.turns for c in turn.tool_calls]
    results = [r.content for turn in sent.turns for r in turn.tool_results]
    assert calls == ["read_file", "edit"], calls
    assert "hello world" in results[0] and "Edited hello.txt" in results[1], results
    assert not llm_server.violations
