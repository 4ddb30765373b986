"""Keys in the full REPL (pexpect): Esc acts at once and never pairs with a later Enter,
Alt-Enter still inserts a newline, and the ghost text stays distinguishable under NO_COLOR."""

from __future__ import annotations

import re
import time

from tests.e2e.helpers import main_requests
from tests.e2e.pty import spawn_qshell
from tests.e2e.test_suggestions_repl import (
    SUGGESTION,
    ghost_shown,
    script_two_turns,
    start,
    tab_and_enter_run_the_suggestion,
)
from tests.waiting import wait_until


def test_esc_dismisses_at_once_and_a_later_enter_is_an_enter(llm_server, project):
    child = ghost_shown(llm_server, project)
    child.send("\x1b")
    time.sleep(0.3)  # well inside the old 1.5 s in which Esc and Enter made a newline
    child.submit("")  # an empty line: the prompt just comes back
    child.wait_prompt()
    child.submit("hello")
    child.expect("fine")
    child.wait_prompt()
    child.send("\x04")
    assert child.finish() == 0
    mains = main_requests(llm_server)
    assert mains[-1].last_user_text == "hello"


def test_alt_enter_inserts_a_newline(llm_server, project):
    llm_server.add_rule(
        lambda request: True,
        __import__("tests.fakes.llm_server", fromlist=["Reply"]).Reply.text("got it"),
    )
    child = start(llm_server, project)
    child.send("first")
    child.send("\x1b\r")  # what a terminal sends for Alt-Enter, in one write
    child.submit("second")
    child.expect("got it")
    child.wait_prompt()
    child.send("\x04")
    assert child.finish() == 0
    assert llm_server.requests[-1].last_user_text == "first\nsecond"


def test_the_ghost_text_is_italic_also_under_no_color(llm_server, project):
    script_two_turns(llm_server)
    child = spawn_qshell(
        llm_server,
        project,
        extra_env={"QSHELL_SUGGESTIONS": "1", "QSHELL_SPECULATION": "0", "NO_COLOR": "1"},
    )
    child.expect("for commands, Ctrl-D to exit")
    child.wait_prompt()
    child.submit("read hello.txt")
    child.expect("it says hello")
    child.wait_prompt()
    child.expect(SUGGESTION)
    ghost = child.raw.rfind(SUGGESTION[:3])
    styles = re.findall(r"\x1b\[([0-9;]*)m", child.raw[max(0, ghost - 80) : ghost])
    assert any("3" in style.split(";") for style in styles), styles
    child.send("\x04")
    assert child.finish() == 0


def test_typing_the_start_of_the_suggestion_shows_the_rest_and_tab_fills_it(llm_server, project):
    child = ghost_shown(llm_server, project)
    child.send("run")  # the rest of the ghost stays on screen after what was typed
    time.sleep(0.2)
    tab_and_enter_run_the_suggestion(llm_server, child)


HINT = "Tab fills"


def test_a_line_left_by_ctrl_c_keeps_no_stale_key_hint(llm_server, project):
    child = ghost_shown(llm_server, project)
    child.send("\x03")
    child.expect(r"press Ctrl-C again")
    child.wait_prompt()
    child.settle()
    lines = [line for line in child.screen() if line.strip()]
    left = lines[: lines.index("(press Ctrl-C again or Ctrl-D to exit)")]
    assert left[-1] == ">" and not any(HINT in line for line in left), lines
    child.send("\x04")
    assert child.finish() == 0


def test_a_line_left_by_enter_keeps_no_stale_key_hint(llm_server, project):
    child = ghost_shown(llm_server, project)
    child.send("run")  # the ghost's rest and its hint stay while this is a prefix
    child.settle()
    assert any(HINT in line for line in child.screen())
    child.submit("")  # Enter submits what is typed; the line it leaves has no hint
    child.expect("fine|run")
    child.wait_prompt()
    child.send("\x04")
    assert child.finish() == 0
    assert not any(HINT in line for line in child.screen()), child.screen()


def test_a_line_left_by_ctrl_d_keeps_no_stale_key_hint(llm_server, project):
    child = ghost_shown(llm_server, project)
    child.settle()
    assert any(HINT in line for line in child.screen())
    child.send("\x04")
    assert child.finish() == 0
    assert not any(HINT in line for line in child.screen()), child.screen()


def test_the_ghost_text_on_screen_is_read_at_any_moment(llm_server, project):
    """Term.ghost gives the italic rest after the cursor as drawn now (a bench's user looks
    at it once, when done reading): the whole suggestion, its rest after a typed prefix,
    and nothing once what is typed differs."""
    child = ghost_shown(llm_server, project)
    assert wait_until(lambda: child.ghost() == SUGGESTION), child.screen()
    child.send("run")
    assert wait_until(lambda: child.ghost() == SUGGESTION.removeprefix("run").strip())
    child.send("s")
    assert wait_until(lambda: child.ghost() == ""), child.screen()
    child.send("\x03")
    child.expect(r"press Ctrl-C again")
    child.wait_prompt()
    child.send("\x04")
    assert child.finish() == 0
