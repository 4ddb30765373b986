"""Local telemetry keeps what the user or the model wrote only under `telemetry.logText`:
a permission question about a shell command with a secret in it, asked in print mode and
in the REPL, leaves the program's name and word count in the events file, not the line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.helpers import provider_env, run_qshell
from tests.e2e.pty import spawn_qshell
from tests.fakes.llm_server import Reply, ToolCallSpec, always, has_tool_result

SECRET = "sk-test-5f0c2a9e77d1"
COMMAND = f'curl -H "Authorization: Bearer {SECRET}" https://api.example.com/v1/charge'
SHELL = ToolCallSpec("shell", {"command": COMMAND}, id="s1")


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    root.mkdir()
    return root


def events_file(home: Path) -> Path:
    return home / "qshell" / "state" / "telemetry" / "events.jsonl"


def permissions(home: Path) -> list[dict[str, Any]]:
    lines = events_file(home).read_text().splitlines()
    return [r for r in map(json.loads, lines) if r["event"] == "permission"]


def script(server) -> None:
    server.add_rule(has_tool_result(), Reply.text("not run, then"))
    server.add_rule(always(), Reply.tool_calls([SHELL]))


@pytest.mark.parametrize("log_text", [False, True], ids=["logText off", "logText on"])
def test_a_denied_command_is_kept_whole_only_under_log_text(
    llm_server, project, isolated_home, log_text
):
    script(llm_server)
    env = {**provider_env(llm_server, "openai")}
    if log_text:
        env["QSHELL_TELEMETRY__LOG_TEXT"] = "1"
    run = run_qshell("-p", "charge the card", cwd=project, env=env)
    assert run.code == 0, run.stderr
    (record,) = permissions(isolated_home)
    assert (record["tool"], record["verdict"]) == ("shell", "deny")
    assert (record["program"], record["arg_count"]) == ("curl", 3)
    text = events_file(isolated_home).read_text()
    assert (SECRET in text) is log_text
    assert ("api.example.com" in text) is log_text
    assert (record.get("target") == COMMAND) is log_text


def test_a_command_asked_about_in_the_repl_leaves_no_argument_in_telemetry(
    llm_server, project, isolated_home
):
    script(llm_server)
    child = spawn_qshell(llm_server, project)
    child.expect("for commands, Ctrl-D to exit")
    child.wait_prompt()
    child.submit("charge the card")
    child.expect("Allow shell")
    child.submit("n")
    child.expect("not run, then")
    child.wait_prompt()
    child.send("\x04")
    child.expect("resume it with: qshell --resume")
    assert child.finish() == 0
    (record,) = permissions(isolated_home)
    assert (record["program"], record["verdict"]) == ("curl", "ask")
    assert SECRET not in events_file(isolated_home).read_text()
    assert "target" not in record and "reason" not in record
