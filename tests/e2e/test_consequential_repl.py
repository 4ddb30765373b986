"""Consequence-aware suggestions in the full REPL and plain mode (pexpect) against the
scripted server: a suggestion that would push, deploy, delete… stays off the screen until
the user's own prompt asked for that kind, then carries a marker, and its speculation
stops at the first call that is not a read."""

from __future__ import annotations

import json

from qshell.followup.suggestion import SUGGESTION_MARKER
from tests.e2e.pty import spawn_qshell
from tests.e2e.test_plugins_repl import events, first_turn
from tests.e2e.test_speculation_repl import speculated, start
from tests.fakes.llm_server import (
    Reply,
    ToolCallSpec,
    always,
    has_tool_result,
    last_user_text_contains,
)
from tests.plugins.helpers import write_plugin

READ_HELLO = ToolCallSpec("read_file", {"path": "hello.txt"})
PUSH_SUGGESTION = "push the tag too"


def script(server, suggestion: str) -> None:
    """Every main prompt reads hello.txt and says so; every suggestion is `suggestion`."""
    server.add_rule(last_user_text_contains(SUGGESTION_MARKER), Reply.text(suggestion))
    server.add_rule(has_tool_result("hello world"), Reply.text("it says hello"))
    server.add_rule(always(), Reply.tool_calls([READ_HELLO]))


def test_a_push_never_asked_for_is_suppressed_as_consequential(llm_server, project, isolated_home):
    script(llm_server, "push it to origin")
    child = start(llm_server, project)
    first_turn(child)
    (suppressed,) = events(isolated_home, "suggestion")
    assert (suppressed["outcome"], suppressed["reason"]) == ("suppressed", "consequential")
    child.send("\x04")
    assert child.finish() == 0
    assert "push it to origin" not in child.text
    assert not [r for r in llm_server.requests if r.last_user_text == "push it to origin"]


def test_after_the_user_asked_to_push_it_shows_marked_and_speculates_reads_only(
    llm_server, project, isolated_home
):
    touched = project / "pushed.txt"
    push = ToolCallSpec("shell", {"command": f"touch {touched.name}"})
    llm_server.add_rule(has_tool_result("denied"), Reply.text("left unpushed"))
    llm_server.add_rule(last_user_text_contains(PUSH_SUGGESTION), Reply.tool_calls([push]))
    script(llm_server, PUSH_SUGGESTION)
    child = start(llm_server, project)
    child.submit("read hello.txt, then I will be pushing the branch")
    child.expect("it says hello")
    child.wait_prompt()
    child.expect(r"push the tag too\s+⚠ push")  # the ghost text carries the marker
    speculated(llm_server, PUSH_SUGGESTION)  # it ran up to its first call, not a read
    assert not touched.exists()
    child.send("\t")
    child.submit("")  # accepted: the live turn goes on from the boundary and asks
    child.expect("Allow")
    child.submit("n")
    child.expect("left unpushed")
    child.wait_prompt()
    child.send("\x04")
    assert child.finish() == 0
    assert not touched.exists()
    (outcome,) = events(isolated_home, "speculation")
    assert (outcome["outcome"], outcome["boundary_type"]) == ("accepted", "bash")
    assert outcome["tools_executed"] == 0


def test_plain_mode_marks_a_consequential_suggestion(llm_server, project):
    script(llm_server, "deploy it to staging")
    env = {"INSIDE_EMACS": "29.1,comint", "QSHELL_SUGGESTIONS": "1"}
    child = spawn_qshell(llm_server, project, term="dumb", extra_env=env)
    child.expect(r"\n> ")
    child.send("read hello.txt and get ready to deploy\r")
    child.expect("it says hello")
    child.expect(r"\(suggestion: deploy it to staging ⚠ deploy — enter \. to use it\)")
    child.send("\x04")
    assert child.finish() == 0


def test_a_plugin_adds_a_consequential_kind(llm_server, project, isolated_home):
    plugin = write_plugin(
        project.parent / "migrations.py",
        "qshell_consequential_words()",
        "return ['migrate: run the migration, migrate']",
    )
    script(llm_server, "run the migrations now")
    child = start(llm_server, project, "--plugin", str(plugin))
    first_turn(child)
    (suppressed,) = events(isolated_home, "suggestion")
    assert suppressed["reason"] == "consequential"
    child.send("\x04")
    assert child.finish() == 0
    assert "run the migrations now" not in child.text


def test_an_empty_rule_list_in_the_user_settings_turns_the_rule_off(
    llm_server, project, isolated_home
):
    """The user's own settings may turn the rule off; a project's may only add rules."""
    settings = isolated_home / "qshell" / "config" / "settings.json"
    settings.parent.mkdir(parents=True)
    settings.write_text(json.dumps({"suggestions": {"consequential": []}}))
    script(llm_server, "push it to origin")
    child = start(llm_server, project)
    first_turn(child)
    child.expect("push it to origin")
    child.send("\x04")
    assert child.finish() == 0
    assert "⚠" not in child.text


def test_a_failing_rules_plugin_is_said_once_and_the_defaults_still_hold(
    llm_server, project, isolated_home
):
    plugin = write_plugin(
        project.parent / "broken_words.py",
        "qshell_consequential_words()",
        "raise RuntimeError('words broke')",
    )
    script(llm_server, "push it to origin")
    child = start(llm_server, project, "--plugin", str(plugin))
    first_turn(child)
    (suppressed,) = events(isolated_home, "suggestion")
    assert suppressed["reason"] == "consequential"
    child.submit("read hello.txt again")
    child.expect("it says hello")
    child.wait_prompt()
    child.send("\x04")
    assert child.finish() == 0
    assert child.text.count("words broke") == 1
