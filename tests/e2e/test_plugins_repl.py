"""Gate plugins in the full REPL (pexpect) against the scripted server: the speculation
gate asks them as the main loop does, and a suggestion filter keeps text off the screen."""

from __future__ import annotations

from pathlib import Path

import pytest

from qshell.followup.suggestion import SUGGESTION_MARKER
from qshell.telemetry import EVENTS_FILENAME, TELEMETRY_DIRNAME, read_events
from tests.e2e.pty import Term
from tests.e2e.test_speculation_repl import start
from tests.fakes.llm_server import (
    Reply,
    ToolCallSpec,
    always,
    has_tool_result,
    last_user_text_contains,
)
from tests.plugins.helpers import EXAMPLES, write_plugin
from tests.waiting import wait_until

SECRET = "vault-token-5d1c22aa"
READ_HELLO = ToolCallSpec("read_file", {"path": "hello.txt"})


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    (root / "deploy").mkdir(parents=True)
    (root / "deploy" / "prod.vault").write_text(f"token={SECRET}\n")
    (root / "hello.txt").write_text("hello world\n")
    return root


def first_turn(child: Term) -> None:
    child.submit("read hello.txt")
    child.expect("it says hello")
    child.wait_prompt()


def events(home: Path, name: str, timeout_s: float = 10.0, **fields: object) -> list[dict]:
    """The telemetry events called `name` (with these `fields`), once there is one."""
    path = home / "qshell" / "state" / TELEMETRY_DIRNAME / EVENTS_FILENAME
    return wait_until(
        lambda: [
            e
            for e in read_events(path)
            if e.get("event") == name and all(e.get(k) == v for k, v in fields.items())
        ],
        timeout_s,
    )


def sent(server) -> str:
    return "\n".join(request.raw.decode("utf-8", "replace") for request in server.requests)


def test_a_speculative_run_stops_at_a_protect_secrets_boundary(llm_server, project, isolated_home):
    suggested = "show me the vault token"
    llm_server.add_rule(last_user_text_contains(SUGGESTION_MARKER), Reply.text(suggested))
    llm_server.add_rule(has_tool_result("protect_secrets"), Reply.text("that one is protected"))
    vault = ToolCallSpec("read_file", {"path": "deploy/prod.vault"})
    llm_server.add_rule(last_user_text_contains(suggested), Reply.tool_calls([vault]))
    llm_server.add_rule(has_tool_result("hello world"), Reply.text("it says hello"))
    llm_server.add_rule(always(), Reply.tool_calls([READ_HELLO]))
    child = start(llm_server, project, "--plugin", str(EXAMPLES / "protect_secrets.py"))
    first_turn(child)
    child.expect(suggested)
    speculative = events(isolated_home, "permission", speculative=True)
    assert speculative and speculative[0]["verdict"] == "boundary"
    assert speculative[0]["decided_by"] == "protect_secrets"
    child.send("\t")
    child.submit("")  # accepted: it goes on live from the boundary, where the plugin denies
    child.expect("that one is protected")
    child.wait_prompt()
    child.send("\x04")
    assert child.finish() == 0
    (outcome,) = events(isolated_home, "speculation")
    assert (outcome["outcome"], outcome["boundary_type"]) == ("accepted", "plugin")
    assert SECRET not in sent(llm_server)


def test_a_speculation_stops_where_a_failing_gate_plugin_is_and_says_so_once(
    llm_server, project, isolated_home
):
    plugin = write_plugin(
        project.parent / "picky.py",
        "qshell_tool_gate(call, context)",
        "if context.speculative and 'notes' in str(call.paths):",
        "    raise RuntimeError('picky broke')",
        "return None",
    )
    (project / "notes.txt").write_text("some notes\n")
    suggested = "read the notes"
    llm_server.add_rule(last_user_text_contains(SUGGESTION_MARKER), Reply.text(suggested))
    llm_server.add_rule(has_tool_result("some notes"), Reply.text("the notes say hi"))
    notes = ToolCallSpec("read_file", {"path": "notes.txt"})
    llm_server.add_rule(last_user_text_contains(suggested), Reply.tool_calls([notes]))
    llm_server.add_rule(has_tool_result("hello world"), Reply.text("it says hello"))
    llm_server.add_rule(always(), Reply.tool_calls([READ_HELLO]))
    child = start(llm_server, project, "--plugin", str(plugin))
    first_turn(child)
    child.expect(suggested)
    assert events(isolated_home, "speculation", timeout_s=0.1) == []
    child.send("\t")
    child.submit("")  # the main loop asks the plugin too, outside speculation: it passes
    child.expect("the notes say hi")
    child.wait_prompt()
    child.send("\x04")
    assert child.finish() == 0
    assert child.text.count("picky broke") == 1  # the notice, once
    (outcome,) = events(isolated_home, "speculation")
    assert outcome["boundary_type"] == "plugin"


def test_no_push_suggestions_keeps_a_push_off_the_screen(llm_server, project, isolated_home):
    llm_server.add_rule(last_user_text_contains(SUGGESTION_MARKER), Reply.text("push it to origin"))
    llm_server.add_rule(has_tool_result("hello world"), Reply.text("it says hello"))
    llm_server.add_rule(always(), Reply.tool_calls([READ_HELLO]))
    plugin = str(EXAMPLES / "no_push_suggestions.py")
    child = start(llm_server, project, "--plugin", plugin)
    first_turn(child)
    (suppressed,) = events(isolated_home, "suggestion")
    assert suppressed["outcome"] == "suppressed"
    assert suppressed["reason"] == "plugin:no_push_suggestions"
    child.send("\x04")
    assert child.finish() == 0
    assert "push it to origin" not in child.text
    assert not [r for r in llm_server.requests if r.last_user_text == "push it to origin"]


def test_the_repl_names_a_plugin_that_failed_to_load_once_under_its_banner(llm_server, project):
    broken = project / "broken.py"
    broken.write_text("import this_module_is_not_installed\n")
    llm_server.add_rule(has_tool_result("hello world"), Reply.text("it says hello"))
    llm_server.add_rule(always(), Reply.tool_calls([READ_HELLO]))
    child = start(llm_server, project, "--plugin", "broken.py")
    first_turn(child)
    child.send("\x04")
    assert child.finish() == 0
    assert child.text.count("this_module_is_not_installed") == 1
    assert child.text.index("plugin broken") < child.text.index("it says hello")
