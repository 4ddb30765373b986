"""`qshell check-shell` through the CLI: the same decision the runners make, as text or JSON."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from qshell.config import load_settings
from qshell.permissions.policy import shell_concern
from qshell.sessions import tool_context
from tests.e2e.helpers import run_qshell


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
    assert lines[4].startswith("asks: rm -rf src") and "rm" in lines[4]
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
