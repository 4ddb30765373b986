"""D3 in the REPL (pexpect): after a batch whose results are all terminal (`read_file`),
the prompt comes back while the summary streams (`summarizeInBackground`). A message typed
then cancels the summary — its text leaves the screen, it is in no later request — and
runs; left alone, the summary finishes as the turn's answer, and only then does a
suggestion come. The scripted server holds the summary after its first chunk, so "still
streaming" is a fact of the test, not a timing."""

from __future__ import annotations

import os
import re
from pathlib import Path

from qshell.followup.suggestion import SUGGESTION_MARKER
from qshell.ui.render_rich import SUMMARY_DROPPED
from qshell.ui.repl import WAITING_HINT
from tests.e2e.pty import Term, spawn_qshell
from tests.fakes.llm_server import (
    Reply,
    ToolCallSpec,
    always,
    has_tool_result,
    last_user_text_contains,
)

FIRST = "Zq7:"  # the first chunk (the server cuts text into 4-character tokens)
SUMMARY = f"{FIRST} the file greets the world. SUMMARYEND"
SUGGESTION = "run the tests"


def start(server, project: Path, **env: str) -> Term:
    child = spawn_qshell(server, project, extra_env={"QSHELL_SUMMARIZE_IN_BACKGROUND": "1", **env})
    child.expect("for commands, Ctrl-D to exit")
    child.wait_prompt()
    return child


def script(server):
    """`read` asks for read_file; its result gets SUMMARY, held after its first chunk."""
    summary = server.add_rule(has_tool_result(), Reply.text(SUMMARY))
    hold = server.hold(summary, after_first_chunk=True)
    server.add_rule(
        last_user_text_contains("read"),
        Reply.tool_calls([ToolCallSpec("read_file", {"path": "hello.txt"})]),
    )
    server.add_rule(last_user_text_contains("second"), Reply.text("second answer"))
    return hold


def test_a_message_typed_while_the_summary_streams_cancels_it_and_runs(llm_server, project):
    hold = script(llm_server)
    child = start(llm_server, project)
    child.submit("read hello.txt")
    request = hold.wait_arrived(timeout=20)
    child.expect(FIRST)  # the summary's first chunk is on screen ...
    child.wait_prompt()  # ... and the prompt is back while it streams
    child.submit("second question")
    assert request.disconnected.wait(10)
    child.expect("second answer")
    child.expect("tokens:")
    child.settle()
    screen = "\n".join(child.screen())
    assert SUMMARY_DROPPED in screen
    assert FIRST not in screen  # the partial summary was taken off the screen
    assert "> second question" in screen
    child.send("\x04")
    assert child.finish() == 0
    mains = [r for r in llm_server.requests if "second" in r.last_user_text]
    messages = mains[-1].body["messages"]
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "tool", "user"]
    assert "hello world" in messages[3]["content"]  # the tool result stayed
    assert all(FIRST not in str(m) for m in messages)
    assert llm_server.violations == []
    hold.release()


def test_left_alone_the_summary_finishes_as_the_answer_and_then_a_suggestion_comes(
    llm_server, project
):
    suggestion = llm_server.add_rule(
        last_user_text_contains(SUGGESTION_MARKER), Reply.text(SUGGESTION), first=True
    )
    hold = script(llm_server)
    llm_server.add_rule(always(), Reply.text("fine"))
    child = start(llm_server, project, QSHELL_SUGGESTIONS="1", QSHELL_SPECULATION="0")
    child.submit("read hello.txt")
    hold.wait_arrived(timeout=20)
    child.expect(FIRST)
    child.wait_prompt()
    child.settle()
    assert suggestion.hits == 0  # no suggestion while the summary streams
    hold.release()
    child.expect("SUMMARYEND")
    child.expect(SUGGESTION)  # the ghost text, once the summary has finished
    assert suggestion.hits == 1
    screen = "\n".join(child.screen())
    assert SUMMARY in " ".join(screen.split())
    assert SUMMARY_DROPPED not in screen
    child.send("\x04")
    assert child.finish() == 0
    transcripts = list(Path(os.environ["QSHELL_HOME"]).rglob("*.jsonl"))
    kept = [p for p in transcripts if "SUMMARYEND" in p.read_text()]
    assert kept, "the finished summary is in the transcript"


def test_ctrl_c_while_the_summary_streams_cancels_only_the_summary(llm_server, project):
    hold = script(llm_server)
    child = start(llm_server, project)
    child.submit("read hello.txt")
    request = hold.wait_arrived(timeout=20)
    child.expect(FIRST)
    child.wait_prompt()
    child.send("\x03")
    assert request.disconnected.wait(10)
    child.expect(re.escape(SUMMARY_DROPPED))
    child.submit("second question")  # the same prompt takes the next message
    child.expect("second answer")
    child.wait_prompt()
    assert "press Ctrl-C again" not in child.text
    child.send("\x04")
    assert child.finish() == 0
    hold.release()


def test_a_question_from_the_summary_round_takes_the_turn_back_keeping_the_typed_text(
    llm_server, project
):
    """The "summary" asks to write a file: the prompt gives way to the question, and what
    the user had typed comes back in the next prompt."""
    writes = llm_server.add_rule(
        has_tool_result("hello world"),
        Reply.tool_calls([ToolCallSpec("write_file", {"path": "out.txt", "content": "x\n"})]),
    )
    hold = llm_server.hold(writes)
    llm_server.add_rule(has_tool_result(), Reply.text("wrote out.txt"))
    llm_server.add_rule(
        last_user_text_contains("read"),
        Reply.tool_calls([ToolCallSpec("read_file", {"path": "hello.txt"})]),
    )
    llm_server.add_rule(last_user_text_contains("draft"), Reply.text("draft answer"))
    child = start(llm_server, project)
    child.submit("read hello.txt")
    hold.wait_arrived(timeout=20)
    child.wait_prompt()
    child.send("draft")
    child.expect("draft")
    hold.release()
    child.expect(r"Allow write_file\?")
    child.send("y\r")
    child.expect("wrote out.txt")
    child.wait_prompt()
    assert (project / "out.txt").read_text() == "x\n"
    child.settle()
    shown = [line for line in child.screen() if line.strip()]
    assert shown[-1] == "> draft"  # the typed text is back in the prompt
    child.submit("")
    child.expect("draft answer")
    child.wait_prompt()
    child.send("\x04")
    assert child.finish() == 0


def test_a_slash_command_typed_while_the_summary_streams_runs_after_it(llm_server, project):
    hold = script(llm_server)
    child = start(llm_server, project)
    child.submit("read hello.txt")
    hold.wait_arrived(timeout=20)
    child.expect(FIRST)
    child.wait_prompt()
    child.send("/stats\r")
    child.settle()
    assert WAITING_HINT in "\n".join(child.screen())  # the line waits for the answer
    assert "messages in history" not in child.text
    hold.release()
    child.expect("SUMMARYEND")
    child.expect("messages in history: 4")  # /stats ran after the summary joined the history
    child.wait_prompt()
    child.send("\x04")
    assert child.finish() == 0


def test_the_plain_line_mode_waits_for_the_summary_as_for_any_answer(llm_server, project):
    """No prompt to give back there: the summary streams as the turn's answer."""
    hold = script(llm_server)
    child = spawn_qshell(
        llm_server, project, term="dumb", extra_env={"QSHELL_SUMMARIZE_IN_BACKGROUND": "1"}
    )
    child.expect(r"\n> ")
    child.send("read hello.txt\r")
    hold.wait_arrived(timeout=20)
    hold.release()
    child.expect("SUMMARYEND")
    child.expect(r"\n> ")
    child.send("second question\r")
    child.expect("second answer")
    child.send("\x04")
    assert child.finish() == 0
    assert "\x1b" not in child.raw
    messages = llm_server.requests[-1].body["messages"]
    assert [m["role"] for m in messages][-3:] == ["tool", "assistant", "user"]


def test_a_summary_that_calls_a_tool_after_all_takes_the_prompt_back(llm_server, project):
    # predicted to sum up, the round calls a tool: the turn comes back to the foreground
    # (the prompt goes, what was typed is kept), runs the call and answers; nothing dropped
    (project / "more.txt").write_text("more lines\n")
    llm_server.add_rule(has_tool_result("more lines"), Reply.text("both files greet. FINALEND"))
    second = llm_server.add_rule(
        has_tool_result("hello world"),
        Reply.tool_calls([ToolCallSpec("read_file", {"path": "more.txt"})], text=f"{FIRST} one"),
    )
    hold = llm_server.hold(second, after_first_chunk=True)
    llm_server.add_rule(
        last_user_text_contains("read"),
        Reply.tool_calls([ToolCallSpec("read_file", {"path": "hello.txt"})]),
    )
    child = start(llm_server, project)
    child.submit("read hello.txt")
    hold.wait_arrived(timeout=20)
    child.expect(FIRST)
    child.wait_prompt()  # predicted a summary: the prompt is back
    child.send("typed ahead")
    child.settle()
    hold.release()
    child.expect("FINALEND")
    child.wait_prompt()
    child.settle()
    screen = "\n".join(child.screen())
    assert SUMMARY_DROPPED not in screen
    assert "more.txt" in screen  # the call ran in the foreground, shown as usual
    prompt_line = [line for line in child.screen() if line.strip()][-1]
    assert "typed ahead" in prompt_line  # kept in the prompt that came back
    child.send("\x15\x04")  # clear the line, leave
    assert child.finish() == 0
    assert len(llm_server.requests) == 3 and llm_server.violations == []
