"""The plain line mode in a pseudo-terminal, as Emacs `M-x shell` runs it: no escape codes."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.e2e.helpers import main_requests, read_first
from tests.e2e.pty import Term, spawn_qshell
from tests.fakes.llm_server import (
    Reply,
    ScriptedLLMServer,
    ToolCallSpec,
    always,
    has_tool_result,
)

EDIT = ToolCallSpec("edit", {"path": "hello.txt", "old_string": "hello", "new_string": "howdy"})


def asked_to_edit(server: ScriptedLLMServer, project: Path) -> Term:
    """Plain mode after "change it", once the question about the edit of hello.txt shows."""
    read_first(server, "hello.txt", then=EDIT)
    child = spawn_qshell(server, project, term="dumb")
    child.expect(r"\n> ")
    child.send("change it\r")
    child.expect(r"Allow edit\?")
    return child


@pytest.mark.parametrize(
    ("term", "extra", "args"),
    [
        ("dumb", {"INSIDE_EMACS": "29.1,comint"}, ()),
        ("dumb", {}, ()),
        ("xterm-256color", {"INSIDE_EMACS": "29.1,comint"}, ()),
        ("xterm-256color", {}, ("--simple-prompt",)),
    ],
)
def test_plain_mode_writes_no_escape_byte_across_a_tool_call_and_a_question(
    llm_server, project, term, extra, args
):
    llm_server.add_rule(has_tool_result(), Reply.text("All **done**: hello became howdy."))
    read_first(llm_server, "hello.txt", then=EDIT)
    child = spawn_qshell(llm_server, project, *args, term=term, extra_env=extra)
    child.expect("for commands, Ctrl-D to exit")
    child.expect(r"\n> ")
    child.send("change the greeting\r")
    child.expect(r"Allow edit\?")
    child.send("y\r")
    child.expect("hello became howdy")
    child.expect(r"\n> ")
    child.send("/stats\r")
    child.expect("model rounds: 3")
    child.send("\x04")
    child.expect("resume it with")
    assert child.finish() == 0
    assert "\x1b" not in child.raw
    assert (project / "hello.txt").read_text() == "howdy world\n"


def test_plain_mode_denial_reason_reaches_the_model(llm_server, project):
    llm_server.add_rule(has_tool_result(), Reply.text("ok, left alone"))
    child = asked_to_edit(llm_server, project)
    child.expect(r".*\(n <reason> tells the model why\), then Enter: ")
    child.send("maybe\r")
    child.expect("please answer y, a or n")
    child.send("n not today\r")
    child.expect("ok, left alone")
    child.send("\x04")
    assert child.finish() == 0
    assert "not today" in llm_server.requests[2].last_tool_results[0].content
    assert "\x1b" not in child.raw


def test_plain_mode_ctrl_c_at_a_question_says_cancelled(llm_server, project):
    child = asked_to_edit(llm_server, project)
    child.send("\x03")
    child.expect(r"\ncancelled\r?\n> ")  # on a line of its own, then the prompt
    child.send("\x04")
    assert child.finish() == 0
    assert (project / "hello.txt").read_text() == "hello world\n"


def test_plain_mode_prints_the_suggestion_and_a_dot_uses_it(llm_server, project):
    from qshell.followup.suggestion import SUGGESTION_MARKER
    from tests.fakes.llm_server import last_user_text_contains

    llm_server.add_rule(last_user_text_contains(SUGGESTION_MARKER), Reply.text("run the tests"))
    llm_server.add_rule(last_user_text_contains("run the tests"), Reply.text("all green"))
    llm_server.add_rule(has_tool_result(), Reply.text("it says hello"))
    read = ToolCallSpec("read_file", {"path": "hello.txt"})
    llm_server.add_rule(always(), Reply.tool_calls([read]))
    env = {"INSIDE_EMACS": "29.1,comint", "QSHELL_SUGGESTIONS": "1"}
    child = spawn_qshell(llm_server, project, term="dumb", extra_env=env)
    child.expect(r"\n> ")
    child.send("read hello.txt\r")
    child.expect("it says hello")
    child.expect(r"\(suggestion: run the tests — enter \. to use it\)\r?\n> ")
    shown = child.text.replace("\r", "")
    assert "\n> (suggestion: run the tests" in shown  # on the prompt's line
    assert not re.search(r"\n> *\n\(suggestion", shown)  # no bare prompt left above it
    child.send(".\r")
    child.expect("all green")
    child.send("\x04")
    assert child.finish() == 0
    assert "\x1b" not in child.raw
    mains = main_requests(llm_server)
    assert mains[-1].last_user_text == "run the tests"
