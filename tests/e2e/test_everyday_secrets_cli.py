"""`qshell -p` in a project with a `.env` and a token in its remote URL: everyday commands run.

In default mode (print mode cannot ask, so whatever would ask is refused) the model runs
`git status`, `git remote -v`, `grep -rn KEY .` and `cat .git/config`: with the sandbox all
four run without asking, and no request the scripted server receives holds the `.env`
value or the token, in any part. With `sandbox.enabled: off` git that prints no
configuration still runs, and the rest is refused as before — the secrets stay out too."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.everyday_commands import SecretProject, secret_project
from qshell.sandbox import probe
from tests.e2e.helpers import shell_calls

FOUND = probe(None)
COMMANDS = ["git status", "git remote -v", "grep -rn KEY .", "cat .git/config"]


@pytest.fixture
def project(tmp_path: Path) -> SecretProject:
    return secret_project(tmp_path)


def session(llm_server, project: SecretProject, sandbox: str) -> dict[str, str]:
    """Run the four commands through `qshell -p`; each command's result by command."""
    env = {"QSHELL_SANDBOX__ENABLED": sandbox}
    shown = shell_calls(llm_server, COMMANDS, cwd=project.root, env=env)
    for request in llm_server.requests:
        for secret in project.secrets:
            assert secret[4:16].encode() not in request.raw, f"{secret[:4]}… reached the model"
    return shown


@pytest.mark.skipif(not FOUND.jail, reason=f"no sandbox here: {FOUND.reason}")
def test_with_the_sandbox_everyday_commands_run_and_no_secret_is_sent(llm_server, project):
    shown = session(llm_server, project, "auto")
    assert "Your branch is up to date with 'origin/main'" in shown["git status"]
    assert "origin\thttps://alice:[redacted: url-password #0]@github.com" in shown["git remote -v"]
    assert "README.md:3:KEY ideas" in shown["grep -rn KEY ."]
    assert '[remote "origin"]' in shown["cat .git/config"]


def test_with_no_sandbox_git_runs_and_the_rest_is_refused(llm_server, project):
    shown = session(llm_server, project, "off")
    assert "Your branch is up to date with 'origin/main'" in shown["git status"]
    for command in COMMANDS[1:]:
        assert "print mode cannot ask for approval" in shown[command], shown[command]
