"""Adversarial review of secrets judged by content (68ff80c): what the copies cost ordinary commands.

A tracked file the scanner finds a secret in is shown in the jail as a copy with the
secret a `#0` marker. Then a clean checkout looks changed to git in the jail (`git status`
lists the file as modified, `git diff` shows a change no one made), which tells the model
something false about the user's tree. And a placeholder the scanner takes for a key —
`export API_KEY=abc123` in a README — makes every `git grep`, and any patch piped to
`head`, ask in the whole repository, and `cat README.md` ask without the sandbox.
A line of git commands therefore sees the files as they are (its output reaches the
scanner whole); any other command sees the copy. Skipped where the machine cannot sandbox.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from qshell.permissions.audit import audit_shell
from qshell.permissions.plugin_gate import prove
from qshell.permissions.policy import proven_context
from qshell.tools.base import ToolContext
from qshell.tools.paths import PathResolver
from tests.permissions.test_git_scope import git
from tests.redaction.fakes import github_token
from tests.sandbox.test_jail import FOUND, jailed, run

pytestmark = pytest.mark.skipif(not FOUND.jail, reason=f"no sandbox here: {FOUND.reason}")
README = "# demo\n\nRun it with `export API_KEY=abc123` set. TODO: more.\n"
ORDINARY = ["git grep -n TODO", "git log -p -1 | head -20", "git show HEAD | head -20"]


def committed(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "proj"
    root.mkdir()
    git(root, "init", "-q")
    for name, text in files.items():
        (root / name).write_text(text)
    git(root, "add", ".")
    git(root, "commit", "-qm", "first")
    return root


def test_a_clean_checkout_looks_clean_to_git_in_the_jail(tmp_path: Path):
    root = committed(tmp_path, {"config.ini": f"[auth]\ntoken = {github_token()}\n"})
    ctx = jailed(root)
    for command in ("git status --porcelain", "git diff --stat"):
        assert audit_shell(command, ctx).auto_run
        shown = run(proven_context(ctx, prove(command, ctx)), command)  # as the runner runs it
        assert "config.ini" not in shown, f"{command!r} in the jail: {shown!r}"
    shown = run(proven_context(ctx, prove("cat config.ini", ctx)), "cat config.ini")
    assert "[redacted: github-token #0]" in shown  # not git: the copy, without the token


def test_a_placeholder_in_a_readme_does_not_make_ordinary_commands_ask(tmp_path: Path):
    root = committed(tmp_path, {"README.md": README, "app.py": "print(1)  # TODO\n"})
    ctx = jailed(root)
    audits = {command: audit_shell(command, ctx) for command in ORDINARY}
    asked = {c: a.ruling.decision.reason for c, a in audits.items() if not a.auto_run}
    assert not asked


def test_a_placeholder_in_a_readme_can_be_read_without_the_sandbox(tmp_path: Path):
    root = committed(tmp_path, {"README.md": README})
    bare = ToolContext(
        paths=PathResolver(root, home=Path(os.environ["HOME"])), environ=dict(os.environ)
    )
    audit = audit_shell("cat README.md", proven_context(bare))
    assert audit.auto_run, audit.ruling.decision.reason
