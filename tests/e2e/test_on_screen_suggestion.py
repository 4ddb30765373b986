"""What was on screen reaches the model, and the off switches hold, in the REPL and plain
mode (pexpect) against the scripted server.

A short reply typed while a suggestion showed carries one line naming that suggestion (a
"no" answers something); a long prompt and an accepted suggestion do not. A project's
`.qshell/settings.json` turning `suggestions.enabled` off means no ghost text and no
suggestion request, and `qshell doctor` says so; a usage limit (out of quota) on a
suggestion request pauses background requests, so no further suggestion is asked for.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from qshell.followup.suggestion import SUGGESTION_MARKER
from tests.e2e.helpers import main_requests
from tests.e2e.pty import Term, spawn_qshell
from tests.fakes.llm_server import (
    Fault,
    Reply,
    ToolCallSpec,
    always,
    has_tool_result,
    last_user_text_contains,
)
from tests.waiting import wait_until

SUGGESTION = "run the tests"
NOTE = f'[qshell note, not the user\'s words: the suggestion on screen was "{SUGGESTION}"]'


def script(server) -> None:
    """A turn that reads a file, so the next one gets a suggestion; every later turn: "ok"."""
    server.add_rule(last_user_text_contains(SUGGESTION_MARKER), Reply.text(SUGGESTION))
    server.add_rule(has_tool_result(), Reply.text("it says hello"))
    server.add_rule(
        last_user_text_contains("read hello"),
        Reply.tool_calls([ToolCallSpec("read_file", {"path": "hello.txt"})]),
    )
    server.add_rule(always(), Reply.text("understood"))


def repl(server, project: Path, **env: str) -> Term:
    child = spawn_qshell(
        server, project, extra_env={"QSHELL_SUGGESTIONS": "1", "QSHELL_SPECULATION": "0", **env}
    )
    child.expect("for commands, Ctrl-D to exit")
    child.wait_prompt()
    child.submit("read hello.txt")
    child.expect("it says hello")
    child.wait_prompt()
    return child


def transcripts_text() -> str:
    paths = Path(os.environ["QSHELL_HOME"]).rglob("projects/*/*.jsonl")
    return "".join(path.read_text() for path in paths)


def test_a_short_reply_to_a_ghost_suggestion_tells_the_model_what_was_shown(llm_server, project):
    script(llm_server)
    child = repl(llm_server, project)
    child.expect(SUGGESTION)
    child.submit("no")
    child.expect("understood")
    child.wait_prompt()
    child.send("\x04")
    assert child.finish() == 0
    sent = main_requests(llm_server)[-1].last_user_text
    assert sent == f"no\n\n{NOTE}"
    assert json.dumps(f"no\n\n{NOTE}")[1:-1] in transcripts_text()  # the message as sent


def test_a_long_prompt_typed_over_the_ghost_is_sent_as_typed(llm_server, project):
    script(llm_server)
    child = repl(llm_server, project)
    child.expect(SUGGESTION)
    long_prompt = "no, first explain what the greeting in hello.txt is for"
    child.submit(long_prompt)
    child.expect("understood")
    child.wait_prompt()
    child.send("\x04")
    assert child.finish() == 0
    assert main_requests(llm_server)[-1].last_user_text == long_prompt


@pytest.mark.parametrize("speculation", ["0", "1"], ids=["plain", "speculating"])
def test_an_accepted_ghost_suggestion_carries_no_note(llm_server, project, speculation):
    script(llm_server)
    child = repl(llm_server, project, QSHELL_SPECULATION=speculation)
    child.expect(SUGGESTION)
    child.send("\t")
    child.submit("")
    child.expect("understood")
    child.wait_prompt()
    child.send("\x04")
    assert child.finish() == 0
    assert all("qshell note" not in r.last_user_text for r in llm_server.requests)
    assert main_requests(llm_server)[-1].last_user_text == SUGGESTION


def test_a_reply_with_no_suggestion_on_screen_carries_no_note(llm_server, project):
    script(llm_server)
    child = spawn_qshell(llm_server, project)  # suggestions off
    child.expect("for commands, Ctrl-D to exit")
    child.wait_prompt()
    child.submit("read hello.txt")
    child.expect("it says hello")
    child.wait_prompt()
    child.submit("no")
    child.expect("understood")
    child.wait_prompt()
    child.send("\x04")
    assert child.finish() == 0
    assert main_requests(llm_server)[-1].last_user_text == "no"


def plain(server, project: Path) -> Term:
    env = {"INSIDE_EMACS": "29.1,comint", "QSHELL_SUGGESTIONS": "1", "QSHELL_SPECULATION": "0"}
    child = spawn_qshell(server, project, term="dumb", extra_env=env)
    child.expect(r"\n> ")
    child.send("read hello.txt\r")
    child.expect("it says hello")
    child.expect(r"\(suggestion: run the tests — enter \. to use it\)")
    return child


@pytest.mark.parametrize(("typed", "note"), [("no", True), (".", False)], ids=["no", "dot"])
def test_plain_mode_a_short_reply_to_the_hint_line_carries_the_note(
    llm_server, project, typed, note
):
    script(llm_server)
    child = plain(llm_server, project)
    child.send(typed + "\r")
    child.expect("understood")
    child.send("\x04")
    assert child.finish() == 0
    sent = main_requests(llm_server)[-1].last_user_text
    assert sent == (f"no\n\n{NOTE}" if note else SUGGESTION)


def test_a_project_settings_file_turns_suggestions_off(llm_server, project):
    script(llm_server)
    (project / ".qshell").mkdir()
    (project / ".qshell" / "settings.json").write_text('{"suggestions": {"enabled": false}}')
    child = repl(llm_server, project, QSHELL_SUGGESTIONS="", QSHELL_SPECULATION="")
    child.submit("no")
    child.expect("understood")
    child.wait_prompt()
    child.send("\x04")
    assert child.finish() == 0
    assert SUGGESTION not in child.text
    assert not any(SUGGESTION_MARKER in r.last_user_text for r in llm_server.requests)
    assert main_requests(llm_server)[-1].last_user_text == "no"


def test_doctor_says_a_project_turned_suggestions_and_speculation_off(project):
    (project / ".qshell").mkdir()
    (project / ".qshell" / "settings.json").write_text('{"suggestions": {"enabled": false}}')
    env = {k: v for k, v in os.environ.items() if not k.startswith("QSHELL_SU")}
    env.pop("QSHELL_SPECULATION", None)
    env["OPENAI_API_KEY"] = "sk-test"
    env["OPENAI_BASE_URL"] = "http://127.0.0.1:9/v1"
    run = subprocess.run(
        [sys.executable, "-m", "qshell", "doctor"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0, run.stderr
    assert "suggestions: off · speculation: off" in run.stdout


def suggestions_refused() -> list[dict]:
    """The suggestion outcomes in local telemetry that say no suggestion came."""
    folder = Path(os.environ["QSHELL_HOME"]) / "state" / "telemetry"
    records = [
        json.loads(line) for p in folder.glob("*.jsonl") for line in p.read_text().splitlines()
    ]
    return [
        r for r in records if r.get("event") == "suggestion" and r.get("outcome") == "suppressed"
    ]


@pytest.mark.parametrize("status", [None, 403], ids=["429", "403"])
def test_a_usage_limit_on_a_suggestion_stops_suggestions_while_the_turns_go_on(
    llm_server, project, status
):
    suggestion = llm_server.add_rule(
        last_user_text_contains(SUGGESTION_MARKER), Fault.usage_limit(status)
    )
    script(llm_server)
    child = repl(llm_server, project, QSHELL_SPECULATION="1")
    assert wait_until(lambda: len(suggestions_refused()) == 1, 20.0)
    assert suggestion.hits == 1  # asked once, refused: out of quota
    child.submit("read hello.txt again")
    child.expect("it says hello")
    child.wait_prompt()
    assert wait_until(lambda: len(suggestions_refused()) == 2, 20.0)  # the next one was tried...
    child.send("\x04")
    assert child.finish() == 0
    assert suggestion.hits == 1  # ...and refused without a request: background is paused
    assert SUGGESTION not in child.text
    assert "quota" not in child.text  # a background failure is never shown
    assert [r.get("reason") for r in suggestions_refused()] == ["error", "error"], (
        suggestions_refused()
    )
