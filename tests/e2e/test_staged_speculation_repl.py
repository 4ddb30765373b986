"""Staged speculation in the full REPL (pexpect) against the scripted server: a suggestion
the model gives no confidence for is speculated up to its first tool batch, and the answer's
round is asked for only once the user shows intent — Tab — so the accepted turn still ends
with the speculated read and no second read; typing another prompt instead leaves that
round never asked for (a wrong guess costs one round). The gate's telemetry says "staged".
The plain line mode (as Emacs runs it) never reports keystrokes: there the dwell time lets the
run go on, and a suggestion typed by hand while held goes on live from the speculated batch."""

from __future__ import annotations

import time

from qshell.agent.prediction import CLOSE, OPEN
from qshell.telemetry import EVENTS_FILENAME, TELEMETRY_DIRNAME, read_events
from tests.e2e.pty import Term, spawn_qshell
from tests.fakes.llm_server import (
    RecordedRequest,
    Reply,
    ScriptedLLMServer,
    ToolCallSpec,
    always,
    has_tool_result,
)
from tests.fakes.llm_server import last_user_text_contains as asks
from tests.waiting import wait_until

SUGGESTED = "read hello.txt again"
AGAIN = ToolCallSpec("read_file", {"path": "hello.txt"}, id="again")
WAIT_S = 20.0
HELD = {"QSHELL_SPECULATION__DWELL_MS": "600000"}  # no dwell in the test's time: intent only


def answers_round(request: RecordedRequest) -> bool:
    """The speculated turn's second round: it carries the result of the speculated read."""
    return any(r.tool_call_id == "again" for r in request.last_tool_results)


def assert_used_once(server: ScriptedLLMServer) -> None:
    """The answer's round was asked for once, and the speculated read was used, not
    asked for again (one first round carrying SUGGESTED)."""
    assert sum(answers_round(r) for r in server.requests) == 1
    firsts = [
        r for r in server.requests if r.last_user_text == SUGGESTED and not r.last_tool_results
    ]
    assert len(firsts) == 1


def shown(
    server: ScriptedLLMServer, project, extra: dict[str, str], *, plain: bool = False
) -> Term:
    """qshell after one turn whose answer predicted SUGGESTED with no confidence (`plain`:
    the line mode Emacs runs)."""
    server.add_rule(has_tool_result("hello world"), Reply.text("it says hello world, again"))
    server.add_rule(asks(SUGGESTED), Reply.tool_calls([AGAIN]))
    server.add_rule(has_tool_result(), Reply.text(f"one file\n\n{OPEN}{SUGGESTED}{CLOSE}"))
    server.add_rule(always(), Reply.tool_calls([ToolCallSpec("ls", {})]))
    env = {"QSHELL_SUGGESTIONS": "1", "QSHELL_SPECULATION": "1", **HELD, **extra}
    if plain:
        env["INSIDE_EMACS"] = "29.1,comint"
    child = spawn_qshell(server, project, term="dumb" if plain else "xterm-256color", extra_env=env)
    child.expect("for commands, Ctrl-D to exit")
    if plain:
        child.expect(r"\n> ")
        child.send("list files\r")
    else:
        child.wait_prompt()
        child.submit("list files")
    child.expect("one file")
    child.expect(SUGGESTED)
    return child


def speculated_first_round(server: ScriptedLLMServer) -> bool:
    return wait_until(lambda: any(r.last_user_text == SUGGESTED for r in server.requests), WAIT_S)


def test_the_answers_round_waits_for_tab_and_the_accepted_turn_uses_the_read(
    llm_server, project, isolated_home
):
    child = shown(llm_server, project, {})
    assert speculated_first_round(llm_server)
    child.settle(0.5)
    assert not any(answers_round(r) for r in llm_server.requests)  # held before Tab
    tab_at = time.monotonic()
    child.send("\t")
    answer = wait_until(lambda: [r for r in llm_server.requests if answers_round(r)], WAIT_S)
    assert answer and answer[0].received_at >= tab_at  # asked for once Tab was pressed
    child.submit("")
    child.expect("it says hello world, again")
    child.expect("saved")
    child.wait_prompt()
    child.send("\x04")
    assert child.finish() == 0
    assert_used_once(llm_server)
    path = isolated_home / "qshell" / "state" / TELEMETRY_DIRNAME / EVENTS_FILENAME
    events = read_events(path)
    [gate] = [e for e in events if e.get("event") == "speculation_gate"]
    assert (gate["stage"], gate["kind"], gate["confidence"]) == ("staged", "show", None)
    [spec] = [e for e in events if e.get("event") == "speculation"]
    assert (spec["outcome"], spec["stage"], spec["resumed_by"]) == ("accepted", "staged", "tab")


def test_a_wrong_guess_costs_one_round(llm_server, project, isolated_home):
    llm_server.add_rule(asks("what is in it"), Reply.text("the words hello world"))
    child = shown(llm_server, project, {})
    assert speculated_first_round(llm_server)
    child.submit("what is in it")
    child.expect("the words hello world")
    child.wait_prompt()
    child.send("\x04")
    assert child.finish() == 0
    assert not any(answers_round(r) for r in llm_server.requests)


def test_in_plain_mode_the_dwell_time_lets_the_run_go_on_and_a_dot_uses_it(
    llm_server, project, isolated_home
):
    child = shown(llm_server, project, {"QSHELL_SPECULATION__DWELL_MS": "300"}, plain=True)
    assert wait_until(lambda: any(answers_round(r) for r in llm_server.requests), WAIT_S)
    child.send(".\r")
    child.expect("it says hello world, again")
    child.expect("saved")
    child.expect(r"\n> ")
    child.send("\x04")
    assert child.finish() == 0
    assert sum(answers_round(r) for r in llm_server.requests) == 1
    path = isolated_home / "qshell" / "state" / TELEMETRY_DIRNAME / EVENTS_FILENAME
    [spec] = [e for e in read_events(path) if e.get("event") == "speculation"]
    assert (spec["outcome"], spec["stage"], spec["resumed_by"]) == ("accepted", "staged", "dwell")


def test_in_plain_mode_a_suggestion_typed_by_hand_while_held_goes_on_live_from_its_batch(
    llm_server, project
):
    child = shown(llm_server, project, {}, plain=True)
    assert speculated_first_round(llm_server)
    child.settle(0.5)
    assert not any(answers_round(r) for r in llm_server.requests)  # held: no keystroke seen
    child.send(f"{SUGGESTED}\r")
    child.expect("it says hello world, again")
    child.expect(r"\n> ")
    child.send("\x04")
    assert child.finish() == 0
    assert_used_once(llm_server)
