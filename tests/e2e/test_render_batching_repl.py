"""Render batching as a REPL user meets it: a long Markdown answer streamed in one-token
chunks as fast as the scripted server can send them (many chunks to a frame), with a
tool call after it. The screen shows the whole answer once, in order, above the call."""

from __future__ import annotations

from pathlib import Path

from tests.e2e.pty import spawn_qshell
from tests.fakes.llm_server import Reply, ToolCallSpec, always, has_tool_result

ANSWER = (
    "# The plan\n\nFirst I look at the file, then I change **one** line of it.\n\n"
    "- read `hello.txt`\n- keep its first word\n\n"
    "```python\ndef greet():\n    return 'hello'\n```\n\nReading it now."
)
SHOWN = [
    "The plan",
    "First I look at the file, then I change one line of it.",
    "• read hello.txt",
    "• keep its first word",
    "def greet():",
    "return 'hello'",
    "Reading it now.",
    "● read_file(hello.txt)",
    "it says hello world",
]


def test_a_long_answer_streamed_fast_is_shown_whole_and_in_order_above_the_tool_call(
    llm_server, tmp_path: Path
):
    project = tmp_path / "proj"
    project.mkdir()
    (project / "hello.txt").write_text("hello world\n")
    llm_server.add_rule(has_tool_result("hello world"), Reply.text("it says hello world"))
    call = ToolCallSpec("read_file", {"path": "hello.txt"})
    llm_server.add_rule(always(), Reply.tool_calls([call], ANSWER))
    child = spawn_qshell(llm_server, project)
    child.expect("for commands, Ctrl-D to exit")
    child.wait_prompt()
    child.submit("fix the greeting")
    child.expect("it says hello world")
    child.wait_prompt()
    lines = [line.strip() for line in child.screen()]
    found = [next(n for n, line in enumerate(lines) if line.startswith(text)) for text in SHOWN]
    assert found == sorted(found)
    assert sum(line.startswith("Reading it now.") for line in lines) == 1
    child.send("\x04")
    assert child.finish() == 0
