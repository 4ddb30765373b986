"""`qshell check-shell` through the CLI: the same decision the runners make, as text or JSON,
with the gate plugins a session loads (named with --plugin or in the user plugins folder)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from qshell.config import load_settings
from qshell.permissions.policy import shell_concern
from qshell.sessions import tool_context
from tests.e2e.helpers import provider_env, run_qshell
from tests.fakes.llm_server import Reply, ToolCallSpec, always
from tests.plugins.helpers import EXAMPLES, readme_plugin, write_plugin


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    (root / "src").mkdir(parents=True)
    (root / "src" / "a.py").write_text("x = 1\n")
    (root / ".env").write_text("API_KEY=sk-1\n")
    return root


COMMANDS = ["git status", "ls -la src", "cat .env", "cat .e*", "rm -rf src", "cat /etc/hostname"]


def test_it_prints_one_line_per_command_with_the_reason_it_asks(project):
    run = run_qshell("check-shell", *COMMANDS, cwd=project)
    assert run.code == 0, run.stderr
    lines = run.stdout.splitlines()
    assert lines[:2] == ["runs without asking: git status", "runs without asking: ls -la src"]
    assert lines[2].startswith("asks: cat .env") and "secret" in lines[2]
    assert lines[3].startswith("asks: cat .e*") and "secret" in lines[3]
    assert lines[4] == "asks: rm -rf src  ('rm' deletes files)"
    assert lines[5].startswith("asks: cat /etc/hostname") and "outside" in lines[5]


def test_json_reads_commands_from_stdin_and_matches_the_runners_decision(project, tmp_path):
    run = run_qshell(
        "check-shell",
        "--json",
        "--root",
        str(project),
        cwd=tmp_path,
        stdin="\n".join(COMMANDS) + "\n\n",
    )
    assert run.code == 0, run.stderr
    records = [json.loads(line) for line in run.stdout.splitlines()]
    assert [r["command"] for r in records] == COMMANDS
    settings = load_settings(project_root=project, environ={})
    ctx = tool_context(settings, root=project, environ={"HOME": str(tmp_path / "home")})
    for record in records:
        reason = shell_concern(record["command"], ctx)
        assert record["auto_run"] is (reason is None)
        assert record["reason"] == (reason or "")


def test_a_bad_option_or_root_is_one_line_and_exit_42(project):
    run = run_qshell("check-shell", "--nope", cwd=project)
    assert run.code == 42 and run.stderr.startswith("qshell: ") and run.stderr.count("\n") == 1
    missing = run_qshell("check-shell", "--root", str(project / "missing"), "ls", cwd=project)
    assert missing.code == 42 and "not a directory" in missing.stderr


@pytest.fixture
def prod(project):
    (project / "prod.cfg").write_text("db=prod\n")
    return project


def user_folder_plugin(project: Path) -> tuple[list[str], dict[str, str]]:
    """no_prod in the user plugins folder (QSHELL_HOME's), selected as a session selects it."""
    readme_plugin(Path(os.environ["QSHELL_HOME"]) / "config" / "plugins" / "no_prod.py")
    return [], {"QSHELL_PLUGINS": "no_prod"}


def named_plugin(project: Path) -> tuple[list[str], dict[str, str]]:
    """no_prod named with --plugin."""
    return ["--plugin", str(readme_plugin(project.parent / "no_prod.py"))], {}


@pytest.mark.parametrize("loaded", [named_plugin, user_folder_plugin])
def test_the_gate_plugins_a_session_loads_have_their_say(prod, loaded, llm_server):
    """The README's no_prod plugin asks before `cat prod.cfg`: check-shell says so and names
    it, and a session with the same plugins does ask (print mode, which cannot, refuses)."""
    options, env = loaded(prod)
    run = run_qshell("check-shell", *options, "cat prod.cfg", "cat src/a.py", cwd=prod, env=env)
    assert run.code == 0, run.stderr
    assert run.stdout.splitlines() == [
        "asks: cat prod.cfg  (it touches production; decided by the no_prod plugin)",
        "runs without asking: cat src/a.py",
    ]
    listed = run_qshell("check-shell", "--json", *options, "cat prod.cfg", cwd=prod, env=env)
    record = json.loads(listed.stdout)
    assert (record["auto_run"], record["verdict"], record["decided_by"]) == (
        False,
        "ask",
        "no_prod",
    )
    assert record["reason"] == "it touches production" and record["speculates"] is False
    calls = [Reply.tool_calls([ToolCallSpec("shell", {"command": "cat prod.cfg"})])]
    llm_server.add_rule(always(), replies=[*calls, Reply.text("done")], times=4)
    session = run_qshell(
        *options, "-p", "show it", cwd=prod, env={**provider_env(llm_server, "openai"), **env}
    )
    assert session.code == 0, session.stderr
    (result,) = [t.content for r in llm_server.requests for t in r.last_tool_results]
    assert "it touches production" in result and "db=prod" not in result


def test_a_plugin_that_denies_is_a_refusal_named_and_nothing_is_recorded(prod, tmp_path):
    """check-shell runs nothing, so it writes no decision: the audit_log plugin, which logs
    every decision a session takes, gets none from it."""
    log = tmp_path / "audit.jsonl"
    options = json.dumps({"audit_log": {"path": str(log)}})
    plugins = ["--plugin", str(EXAMPLES / "protect_secrets.py")]
    plugins += ["--plugin", str(EXAMPLES / "audit_log.py")]
    run = run_qshell(
        "check-shell",
        *plugins,
        "cat .env",
        "ls",
        cwd=prod,
        env={"QSHELL_PLUGINS__OPTIONS": options},
    )
    assert run.code == 0, run.stderr
    refused, listed = run.stdout.splitlines()
    assert refused == (
        "refused: cat .env  (protect_secrets: .env is a protected secret;"
        " decided by the protect_secrets plugin)"
    )
    assert listed == "runs without asking: ls"
    assert not log.exists()


def test_a_plugin_that_allows_an_unproven_command_is_named_and_speculation_still_stops(project):
    plugin = write_plugin(
        project.parent / "allow_make.py",
        "qshell_tool_gate(call, context)",
        "if call.command == 'make test':",
        "    return GateDecision.allow('our CI target')",
    )
    run = run_qshell("check-shell", "--json", "--plugin", str(plugin), "make test", cwd=project)
    assert run.code == 0, run.stderr
    record = json.loads(run.stdout)
    assert (record["auto_run"], record["decided_by"], record["speculates"]) == (
        True,
        "allow_make",
        False,  # a plugin cannot let a speculative command bypass the proof or the jail
    )
