"""Next-prompt suggestions in the full REPL (pexpect) against the scripted server."""

from __future__ import annotations

from pathlib import Path

import pytest

from qshell.followup.suggestion import SUGGESTION_MARKER
from tests.e2e.helpers import main_requests
from tests.e2e.pty import Term, spawn_qshell
from tests.fakes.llm_server import (
    Reply,
    Rule,
    ToolCallSpec,
    always,
    has_tool_result,
    last_user_text_contains,
)

SUGGESTION = "run the tests"


def start(server, project: Path, *, speculation: bool = False) -> Term:
    # with speculation on (its default), every suggestion also sends a speculative request
    env = {"QSHELL_SUGGESTIONS": "1", "QSHELL_SPECULATION": "1" if speculation else "0"}
    child = spawn_qshell(server, project, extra_env=env)
    child.expect("for commands, Ctrl-D to exit")
    child.wait_prompt()
    return child


def script_two_turns(server) -> Rule:
    """Turn 1 reads a file (two assistant messages); each turn then gets a suggestion."""
    suggestion = server.add_rule(last_user_text_contains(SUGGESTION_MARKER), Reply.text(SUGGESTION))
    server.add_rule(last_user_text_contains(SUGGESTION), Reply.text("all 12 tests pass"))
    server.add_rule(has_tool_result(), Reply.text("it says hello"))
    server.add_rule(
        last_user_text_contains("read"),
        Reply.tool_calls([ToolCallSpec("read_file", {"path": "hello.txt"})]),
    )
    server.add_rule(always(), Reply.text("fine"))
    return suggestion


def ghost_shown(server, project, **kw):
    """A REPL after the two-turn script's file-reading turn, its suggestion on screen."""
    script_two_turns(server)
    child = start(server, project, **kw)
    child.submit("read hello.txt")
    child.expect("it says hello")
    child.wait_prompt()
    child.expect(SUGGESTION)
    return child


def tab_and_enter_run_the_suggestion(server, child: Term) -> None:
    """Tab fills the shown suggestion, Enter submits it as the next turn's prompt; then exit."""
    child.send("\t")
    child.submit("")
    child.expect("all 12 tests pass")
    child.wait_prompt()
    child.send("\x04")
    assert child.finish() == 0
    assert main_requests(server)[-1].last_user_text == SUGGESTION


@pytest.mark.parametrize("speculation", [False, True], ids=["plain", "speculating"])
def test_after_two_turns_tab_fills_the_ghost_text_and_enter_submits_it(
    llm_server, project, speculation
):
    script_two_turns(llm_server)
    child = start(llm_server, project, speculation=speculation)
    child.submit("hello there")
    child.expect("fine")
    child.wait_prompt()
    child.submit("read hello.txt")
    child.expect("it says hello")
    child.wait_prompt()
    child.expect(SUGGESTION)
    tab_and_enter_run_the_suggestion(llm_server, child)


@pytest.mark.parametrize("speculation", [False, True], ids=["plain", "speculating"])
def test_enter_on_an_empty_line_fills_but_does_not_submit(llm_server, project, speculation):
    """If the first Enter submitted, the model would see two messages, not one."""
    child = ghost_shown(llm_server, project, speculation=speculation)
    child.send("\r")  # fills the line with the suggestion; must not submit it
    child.submit(" please")
    child.expect("all 12 tests pass")
    child.wait_prompt()
    child.send("\x04")
    assert child.finish() == 0
    mains = main_requests(llm_server)
    if speculation:  # speculative requests for the suggestion come and go around the turn
        mains = [r for r in mains if r.last_user_text != SUGGESTION]
    assert mains[-1].last_user_text == SUGGESTION + " please"


def test_typing_dismisses_the_suggestion_and_cancels_its_request(llm_server, project):
    suggestion_rule = script_two_turns(llm_server)
    hold = llm_server.hold(suggestion_rule)
    child = start(llm_server, project)
    child.submit("read hello.txt")
    child.expect("it says hello")
    child.wait_prompt()
    request = hold.wait_arrived(timeout=20)
    child.send("x")
    assert request.disconnected.wait(10)
    child.send("\x15")
    child.submit("something else")
    child.expect("fine")
    child.wait_prompt()
    child.send("\x04")
    assert child.finish() == 0
    assert SUGGESTION not in child.text.split("something else")[-1]
