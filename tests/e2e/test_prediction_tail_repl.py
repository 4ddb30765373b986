"""The prompt comes back before the answer's hidden prediction line has streamed (pexpect,
scripted server): once the visible answer is whole, the REPL gives the prompt back and the
turn's end (its usage line, then the suggestion) is drawn above it. A message entered
meanwhile waits for the turn's end instead of cancelling it, so the answer stays in the
history the next request carries; Ctrl-C there cancels nothing either."""

from __future__ import annotations

import time

from qshell.agent.prediction import CLOSE
from tests.e2e.pty import Term, spawn_qshell
from tests.fakes.llm_server import Latency, Reply, ScriptedLLMServer, always
from tests.fakes.llm_server import last_user_text_contains as asks

VISIBLE = "it says hello"
# a slow stream: the hidden line (about 15 tokens) takes seconds after the visible words
SLOW = Latency(ttft_s=0.0, tokens_per_s=6)
ANSWER = f'{VISIBLE}\n\n<next-prompt confidence="0.9">run the tests{CLOSE}'


def started(server: ScriptedLLMServer, project) -> Term:
    server.add_rule(asks("second"), Reply.text("second answer"))
    server.add_rule(always(), Reply.text(ANSWER, latency=SLOW))
    extra = {"QSHELL_SUGGESTIONS": "1", "QSHELL_SPECULATION": "0"}
    child = spawn_qshell(server, project, extra_env=extra)
    child.expect("for commands, Ctrl-D to exit")
    child.wait_prompt()
    child.submit("first")
    child.expect(VISIBLE)
    return child


def carried_first_answer(server: ScriptedLLMServer) -> bool:
    second = next(r for r in server.requests if r.last_user_text.startswith("second"))
    return any(t.role == "assistant" and VISIBLE in t.text for t in second.turns)


def test_the_prompt_is_back_before_the_hidden_line_and_the_usage_line_follows_above_it(
    llm_server, project
):
    child = started(llm_server, project)
    child.wait_prompt()  # the prompt is active again…
    child.wait_for("tokens:")  # …before the turn's end prints its usage line
    child.send("\x04")
    assert child.finish() == 0
    assert "next-prompt" not in child.text and "run the tests" not in child.text.split(VISIBLE)[0]


def test_a_message_entered_under_the_hidden_line_waits_and_the_answer_stays(llm_server, project):
    child = started(llm_server, project)
    child.wait_prompt()
    child.send("second\r")  # while the hidden line still streams
    child.expect("second answer")
    child.wait_prompt()
    child.send("\x04")
    assert child.finish() == 0
    assert carried_first_answer(llm_server)
    asked = [r.last_user_text for r in llm_server.requests]
    assert asked.count("first") == 1  # nothing was cancelled and asked again


def test_ctrl_c_under_the_hidden_line_cancels_nothing(llm_server, project):
    child = started(llm_server, project)
    child.wait_prompt()
    child.send("\x03")
    child.wait_for("tokens:")  # the turn ended as it would have
    time.sleep(0.2)
    child.submit("second")
    child.expect("second answer")
    child.send("\x04")
    assert child.finish() == 0
    assert "cancelled" not in child.text
    assert carried_first_answer(llm_server)
