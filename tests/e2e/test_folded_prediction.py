"""The next-prompt prediction folded into the answer, in the full REPL (pexpect) against the
scripted server: an answer ending with its `<next-prompt>` line shows that prediction as
ghost text with no suggestion request, the line never reaches the screen, a speculated
answer predicts the prompt after it the same way, and an answer without the line falls
back to one suggestion request. Print mode never asks for the line."""

from __future__ import annotations

from pathlib import Path

from qshell.agent.prediction import CLOSE, OPEN, PREDICTION_PROMPT
from qshell.followup.suggestion import SUGGESTION_MARKER
from tests.e2e.helpers import provider_env, run_qshell
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

READ = ToolCallSpec("read_file", {"path": "hello.txt"})


def start(server: ScriptedLLMServer, project: Path, *, fold: str = "true", spec: str = "1") -> Term:
    env = {
        "QSHELL_SUGGESTIONS": "1",
        "QSHELL_SPECULATION": spec,
        "QSHELL_SUGGESTIONS__FOLD": fold,
    }
    child = spawn_qshell(server, project, extra_env=env)
    child.expect("for commands, Ctrl-D to exit")
    child.wait_prompt()
    return child


def system_prompt(request: RecordedRequest) -> str:
    first = request.body["messages"][0]
    assert first["role"] == "system"
    return str(first["content"])


def suggestion_requests(server: ScriptedLLMServer) -> list[RecordedRequest]:
    return [r for r in server.requests if SUGGESTION_MARKER in r.last_user_text]


def test_the_answers_own_prediction_is_the_ghost_text_with_no_suggestion_request(
    llm_server, project
):
    llm_server.add_rule(asks(SUGGESTION_MARKER), Reply.text("never asked for"))
    after = f"all 12 tests pass\n\n{OPEN}commit this{CLOSE}"
    llm_server.add_rule(asks("run the tests"), Reply.text(after))
    first = f"it says hello\n\n{OPEN}run the tests{CLOSE}\n"
    llm_server.add_rule(has_tool_result(), Reply.text(first))
    llm_server.add_rule(always(), Reply.tool_calls([READ]))
    child = start(llm_server, project)
    child.submit("read hello.txt")
    child.expect("it says hello")
    child.expect("run the tests")  # the ghost text
    child.send("\t")
    child.submit("")
    child.expect("all 12 tests pass")
    child.expect("commit this")  # predicted by the speculated answer itself
    child.send("\x04")
    assert child.finish() == 0
    assert suggestion_requests(llm_server) == []
    assert OPEN not in child.text and "next-prompt" not in child.text
    assert all(PREDICTION_PROMPT in system_prompt(r) for r in llm_server.requests)
    speculated = [r for r in llm_server.requests if r.last_user_text == "run the tests"]
    assert len(speculated) == 1  # the speculation's request; Enter showed it at once


def test_an_answer_without_the_line_falls_back_to_one_suggestion_request(llm_server, project):
    llm_server.add_rule(asks(SUGGESTION_MARKER), Reply.text("run the tests"))
    llm_server.add_rule(asks("run the tests"), Reply.text("all 12 tests pass"))
    llm_server.add_rule(has_tool_result(), Reply.text("it says hello"))
    llm_server.add_rule(always(), Reply.tool_calls([READ]))
    child = start(llm_server, project, spec="0")  # (a speculation would pipeline another)
    child.submit("read hello.txt")
    child.expect("it says hello")
    child.expect("run the tests")
    child.send("\x04")
    assert child.finish() == 0
    assert len(suggestion_requests(llm_server)) == 1


def test_with_fold_off_the_system_prompt_does_not_ask_for_the_line(llm_server, project):
    llm_server.add_rule(asks(SUGGESTION_MARKER), Reply.text("run the tests"))
    llm_server.add_rule(always(), Reply.text("hi"))
    child = start(llm_server, project, fold="false")
    child.submit("hello")
    child.expect("hi")
    child.wait_prompt()
    child.send("\x04")
    assert child.finish() == 0
    assert not any(PREDICTION_PROMPT in system_prompt(r) for r in llm_server.requests)


def test_print_mode_never_asks_for_the_line_and_never_prints_one(llm_server, project):
    llm_server.add_rule(always(), Reply.text(f"hello\n\n{OPEN}what next{CLOSE}"))
    run = run_qshell("-p", "hi", cwd=project, env=provider_env(llm_server, "openai"))
    assert run.code == 0, run.stderr
    assert PREDICTION_PROMPT not in system_prompt(llm_server.requests[0])
    assert run.stdout.strip().endswith(CLOSE)  # not asked for, so not taken away either


def test_a_separate_suggestion_that_answers_with_the_line_shows_only_its_words(llm_server, project):
    """The fork shares the system prompt that asks answers for the line, so the suggestion
    request's reply may be one too."""
    llm_server.add_rule(asks(SUGGESTION_MARKER), Reply.text(f"{OPEN}run the tests{CLOSE}"))
    llm_server.add_rule(has_tool_result(), Reply.text("it says hello"))
    llm_server.add_rule(always(), Reply.tool_calls([READ]))
    child = start(llm_server, project, spec="0")
    child.submit("read hello.txt")
    child.expect("it says hello")
    child.expect("run the tests")
    child.settle()
    child.send("\x04")
    assert child.finish() == 0
    assert "next-prompt" not in child.text


def test_print_mode_resuming_a_session_that_predicts_hides_the_line(llm_server, project):
    llm_server.add_rule(asks("hello"), Reply.text(f"hi\n\n{OPEN}what next{CLOSE}"))
    llm_server.add_rule(asks("and now"), Reply.text(f"still here\n{OPEN}bye{CLOSE}"))
    child = start(llm_server, project, spec="0")
    child.submit("hello")
    child.expect("hi")
    child.wait_prompt()
    child.send("\x04")
    assert child.finish() == 0
    env = provider_env(llm_server, "openai")
    run = run_qshell("-p", "--continue", "and now", cwd=project, env=env)
    assert run.code == 0, run.stderr
    assert run.stdout.strip() == "still here"


def test_instructions_that_quote_the_request_do_not_make_print_mode_hide_a_line(
    llm_server, project
):
    llm_server.add_rule(always(), Reply.text(f"hello\n{OPEN}keep me{CLOSE}"))
    args = ("-p", "hi", "--append-system-prompt", PREDICTION_PROMPT)
    run = run_qshell(*args, cwd=project, env=provider_env(llm_server, "openai"))
    assert run.code == 0, run.stderr
    assert run.stdout.strip().endswith(f"{OPEN}keep me{CLOSE}")
