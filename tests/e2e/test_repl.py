"""The full prompt_toolkit REPL in a pseudo-terminal (pexpect), against the scripted server."""

from __future__ import annotations

import subprocess
from pathlib import Path

from qshell.agent.compaction import SUMMARY_HEADER
from tests.e2e.helpers import read_first, result_of, without_local_extra
from tests.e2e.pty import Term, spawn_qshell
from tests.fakes.llm_server import (
    Reply,
    Rule,
    ToolCallSpec,
    always,
    has_tool_result,
    last_user_text_contains,
)

EDIT = ToolCallSpec("edit", {"path": "hello.txt", "old_string": "hello", "new_string": "howdy"})
READ = ToolCallSpec("read_file", {"path": "hello.txt"}, id="r0")  # before the edit, as it must


def start(server, project: Path, *args: str, **kw) -> Term:
    child = spawn_qshell(server, project, *args, **kw)
    child.expect("for commands, Ctrl-D to exit")
    child.wait_prompt()
    return child


def quit_cleanly(child: Term) -> None:
    child.wait_prompt()
    child.send("\x04")
    child.expect("resume it with: qshell --resume")
    assert child.finish() == 0


def answer_the_edit_prompt(llm_server, project: Path, keys: str, then: str) -> Term:
    """The model reads hello.txt and asks to edit it; type `keys` at the question (no
    Enter unless they say so), see `then`, quit."""
    llm_server.add_rule(has_tool_result(), Reply.text(then))
    read_first(llm_server, "hello.txt", then=EDIT)
    child = start(llm_server, project)
    child.submit("change hello")
    child.expect("Allow edit")
    child.send(keys)
    child.expect(then)
    quit_cleanly(child)
    return child


def question_line(child: Term) -> str:
    """The permission question's line as the screen shows it once answered."""
    return next(line for line in child.screen() if line.startswith("Allow edit?"))


def test_one_key_answers_the_permission_question_without_enter(llm_server, project):
    child = answer_the_edit_prompt(llm_server, project, "y", then="edited it")
    assert (project / "hello.txt").read_text() == "howdy world\n"
    assert question_line(child) == (
        "Allow edit? [y]es, [a]lways this session, [n]o, [t]ell the model why not — "
        "press one key: yes"
    )


def test_an_enter_typed_after_the_key_out_of_habit_submits_no_line(llm_server, project):
    child = answer_the_edit_prompt(llm_server, project, "n\r", then="left it")
    assert question_line(child).endswith("press one key: no")
    screen = child.screen()
    after = screen[screen.index(question_line(child)) :]
    assert [line for line in after if line.startswith(">")] == [">"]  # one prompt, no empty line
    assert len(llm_server.requests) == 3
    assert (project / "hello.txt").read_text() == "hello world\n"


def test_a_turn_streams_the_answer(llm_server, project):
    llm_server.add_rule(always(), Reply.text("The sky is blue because of Rayleigh scattering."))
    child = start(llm_server, project)
    child.submit("why is the sky blue")
    child.expect("Rayleigh scattering")
    quit_cleanly(child)
    assert llm_server.requests[0].last_user_text == "why is the sky blue"


def test_t_asks_for_the_reason_a_denial_tells_the_model_and_other_keys_do_nothing(
    llm_server, project
):
    keys = "xq t" + "keep the greeting as it is\r"  # x, q and a space answer nothing
    child = answer_the_edit_prompt(llm_server, project, keys, then="understood")
    assert "No. Tell the model why (Enter sends it): keep the greeting as it is" in child.text
    assert (project / "hello.txt").read_text() == "hello world\n"
    result = llm_server.requests[2].last_tool_results[0].content
    assert "denied" in result and "keep the greeting as it is" in result


def test_always_is_remembered_for_the_rest_of_the_session(llm_server, project):
    second = ToolCallSpec("edit", {"path": "hello.txt", "old_string": "world", "new_string": "all"})
    llm_server.add_rule(
        Rule(
            always(),
            replies=[
                Reply.tool_calls([READ]),
                Reply.tool_calls([EDIT]),
                Reply.tool_calls([second]),
                Reply.text("both done"),
            ],
        )
    )
    child = start(llm_server, project)
    child.submit("two edits")
    child.expect("Allow edit")
    child.submit("a")
    assert child.expect("Allow edit", "both done") == 1
    quit_cleanly(child)
    assert (project / "hello.txt").read_text() == "howdy all\n"


def test_ctrl_c_during_a_streamed_answer_cancels_and_the_next_turn_works(llm_server, project):
    llm_server.add_rule(last_user_text_contains("second"), Reply.text("second answer"))
    rule = llm_server.add_rule(always(), Reply.text("a very long answer " * 40))
    hold = llm_server.hold(rule, after_first_chunk=True)
    child = start(llm_server, project)
    child.submit("first")
    request = hold.wait_arrived(timeout=20)
    child.send("\x03")
    child.expect("cancelled")
    assert request.disconnected.wait(10)
    child.wait_prompt()
    child.submit("second")
    child.expect("second answer")
    quit_cleanly(child)
    roles = [m["role"] for m in llm_server.requests[-1].body["messages"]]
    assert roles == ["system", "user", "user"]


def test_ctrl_c_at_a_permission_question_says_cancelled_and_runs_nothing(llm_server, project):
    """As Ctrl-C during a stream does: one "cancelled" line, and the prompt back."""
    read_first(llm_server, "hello.txt", then=EDIT)
    child = start(llm_server, project)
    child.submit("change hello")
    child.expect("Allow edit")
    child.send("\x03")
    child.expect("cancelled")
    child.wait_prompt()
    quit_cleanly(child)
    assert child.text.count("cancelled") == 1
    assert (project / "hello.txt").read_text() == "hello world\n"
    assert len(llm_server.requests) == 2  # nothing went back to the model


def test_ctrl_c_during_a_long_shell_command_kills_it(llm_server, project):
    marker = project / "finished.txt"
    command = f"sleep 30 && touch {marker}"
    llm_server.add_rule(has_tool_result(), Reply.text("never shown"))
    llm_server.add_rule(always(), Reply.tool_calls([ToolCallSpec("shell", {"command": command})]))
    child = start(llm_server, project, "--approval-mode", "yolo")
    child.submit("run it")
    child.expect("shell")
    child.expect("running shell")
    child.send("\x03")
    child.expect("cancelled")
    quit_cleanly(child)
    assert not marker.exists()
    found = subprocess.run(["pgrep", "-f", str(marker)], capture_output=True, text=True)
    assert found.stdout.strip() == ""


def test_ctrl_d_exits_and_prints_how_to_resume(llm_server, project):
    child = start(llm_server, project)
    child.send("\x04")
    child.expect(r"session ([0-9a-f-]{36}) saved; resume it with: qshell --resume")
    assert child.finish() == 0


def test_undo_restores_the_file_the_last_turn_edited(llm_server, project):
    llm_server.add_rule(has_tool_result(), Reply.text("edited"))
    read_first(llm_server, "hello.txt", then=EDIT)
    child = start(llm_server, project, "--approval-mode", "auto-edit")
    child.submit("change hello")
    child.expect("edited")
    child.wait_prompt()
    assert (project / "hello.txt").read_text() == "howdy world\n"
    child.submit("/undo")
    child.expect("restored hello.txt")
    quit_cleanly(child)
    assert (project / "hello.txt").read_text() == "hello world\n"


def test_an_at_mention_attaches_the_file(llm_server, project):
    llm_server.add_rule(always(), Reply.text("it greets the world"))
    child = start(llm_server, project)
    child.submit("what does @hello.txt say")
    child.expect("it greets the world")
    quit_cleanly(child)
    text = llm_server.requests[0].last_user_text
    assert "what does @hello.txt say" in text and "hello world" in text


def test_compact_replaces_the_history_with_a_summary(llm_server, project):
    llm_server.add_rule(last_user_text_contains("summary"), Reply.text("We talked about the sky."))
    llm_server.add_rule(always(), Reply.text("plain answer"))
    child = start(llm_server, project)
    child.submit("tell me about the sky")
    child.expect("plain answer")
    child.wait_prompt()
    child.submit("/compact")
    child.expect("compacted")
    child.wait_prompt()
    child.submit("and the sea?")
    child.expect("plain answer")
    quit_cleanly(child)
    messages = llm_server.requests[-1].body["messages"]
    assert messages[1]["content"].startswith(SUMMARY_HEADER)
    assert "We talked about the sky." in messages[1]["content"]
    assert messages[-1]["content"] == "and the sea?"


def test_an_unknown_slash_command_gets_a_message_and_no_model_call(llm_server, project):
    child = start(llm_server, project)
    child.submit("/frobnicate")
    child.expect("unknown command /frobnicate")
    quit_cleanly(child)
    assert llm_server.requests == []


def test_keys_typed_during_a_turn_appear_in_the_next_input_line(llm_server, project):
    llm_server.add_rule(last_user_text_contains("typed ahead"), Reply.text("got the typed text"))
    rule = llm_server.add_rule(always(), Reply.text("first answer"))
    hold = llm_server.hold(rule)
    child = start(llm_server, project)
    child.submit("first")
    hold.wait_arrived(timeout=20)
    child.send("typed ahead")
    hold.release()
    child.expect("first answer")
    child.wait_prompt()
    child.submit("")
    child.expect("got the typed text")
    quit_cleanly(child)
    assert llm_server.requests[-1].last_user_text == "typed ahead"


def test_typed_ahead_keys_never_answer_a_permission_question(llm_server, project):
    llm_server.add_rule(has_tool_result(), Reply.text("turn over"))
    llm_server.add_rule(last_user_text_contains("y"), Reply.text("echo of y"))
    llm_server.add_rule(result_of("r0"), Reply.tool_calls([EDIT]), first=True)
    rule = llm_server.add_rule(last_user_text_contains("change"), Reply.tool_calls([READ]))
    hold = llm_server.hold(rule)
    child = start(llm_server, project)
    child.submit("change hello")
    hold.wait_arrived(timeout=20)
    child.send("y")
    hold.release()
    child.expect("Allow edit")
    child.submit("n")
    child.expect("turn over")
    child.wait_prompt()
    assert (project / "hello.txt").read_text() == "hello world\n"
    child.submit("")
    child.expect("echo of y")
    quit_cleanly(child)
    assert llm_server.requests[-1].last_user_text == "y"


def test_starting_without_a_provider_or_the_local_extra_says_what_to_set(project, tmp_path):
    child = spawn_qshell(None, project, extra_env=without_local_extra(tmp_path))
    child.expect("OPENAI_API_KEY")
    assert child.finish() == 52
    assert "Traceback" not in child.text


def test_tab_completes_slash_commands_and_mentions_and_alt_enter_adds_a_newline(
    llm_server, project, isolated_home
):
    llm_server.add_rule(always(), Reply.text("noted"))
    child = start(llm_server, project)
    child.send("/sta\t")
    child.submit("")
    child.expect("model rounds: 0")
    child.wait_prompt()
    child.send("line one\x1b\rline two @hel\t")
    child.submit("")
    child.expect("noted")
    quit_cleanly(child)
    assert llm_server.requests[0].last_user_text.startswith("line one\nline two @hello.txt")
    history = isolated_home / "qshell" / "state" / "history"
    assert "line one" in history.read_text() and oct(history.stat().st_mode & 0o777) == "0o600"


def test_ctrl_c_twice_on_an_empty_prompt_exits(llm_server, project):
    child = start(llm_server, project)
    child.send("\x03")
    child.expect("press Ctrl-C again")
    child.wait_prompt()
    child.send("\x03")
    child.expect("resume it with")
    assert child.finish() == 0
