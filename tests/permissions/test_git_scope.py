"""What a proven git command could do beyond its text, checked in a throwaway repository:
a project inside a bigger repository, secrets in the history, credentials in the config."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from qshell.config import ApprovalMode
from qshell.permissions.policy import Verdict, decide, shell_concern
from qshell.tools.base import Access, Kind, ToolContext
from qshell.tools.paths import PathResolver


def git(cwd: Path, *args: str) -> None:
    env = {
        "HOME": str(cwd.parent / "home"),
        "PATH": os.environ.get("PATH", ""),
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@x",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@x",
    }
    subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True)


def context(root: Path) -> ToolContext:
    home = root.parent / "home"
    home.mkdir(exist_ok=True)
    environ = {"HOME": str(home), "PATH": os.environ.get("PATH", "")}
    return ToolContext(paths=PathResolver(root, home=home), environ=environ)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q")
    (root / "README.md").write_text("# repo\n")
    git(root, "add", "README.md")
    git(root, "commit", "-qm", "first")
    return root.resolve()


def test_a_project_inside_a_bigger_repository_asks_for_git(repo):
    app = repo / "app"
    app.mkdir()
    (app / "main.py").write_text("print(1)\n")
    assert shell_concern("git status", context(repo)) is None
    reason = shell_concern("git status", context(app)) or ""
    assert "not the project root" in reason


def test_a_secret_only_in_the_history_asks_for_commands_that_print_history(repo):
    (repo / ".env").write_text("API_KEY=sk-history\n")
    git(repo, "add", "-f", ".env")
    git(repo, "commit", "-qm", "oops")
    git(repo, "rm", "-q", "--cached", ".env")
    git(repo, "commit", "-qm", "remove it")
    ctx = context(repo)
    for command in ("git show HEAD~1", "git log -p", "git diff HEAD~1 HEAD", "git grep KEY HEAD~1"):
        assert ".env" in (shell_concern(command, ctx) or ""), command
    assert shell_concern("git status", ctx) is None  # names only
    assert shell_concern("git log --oneline", ctx) is not None  # log can show content


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("remote.origin.url", "https://x-access-token:ghp_abcdef0123456789@github.com/o/r.git"),
        ("remote.origin.url", "https://ghp_abcdefghijklmnopqrstuvwxyz0123@github.com/o/r.git"),
        ("http.https://github.com/.extraheader", "AUTHORIZATION: basic eC1hY2Nlc3M="),
    ],
)
def test_a_credential_in_the_git_configuration_is_never_printed(repo, key, value):
    """With no sandbox, what prints configuration (or reads the file) asks; the rest of
    git prints none of it and runs."""
    git(repo, "config", key, value)
    ctx = context(repo)
    printing = ("git remote -v", "git remote get-url origin", "git config --local -l")
    for command in (*printing, "git config --get remote.origin.url"):
        assert "credential" in (shell_concern(command, ctx) or ""), command
    for command in ("cat .git/config", "grep -rn x ."):
        assert ".git/config" in (shell_concern(command, ctx) or ""), command
    for command in ("git status", "git log --oneline", "git branch -vv", "git diff --stat"):
        assert shell_concern(command, ctx) is None, command
    read = [Access(repo / ".git" / "config")]
    assert decide(ApprovalMode.DEFAULT, Kind.READ, read, ctx).verdict is Verdict.ASK


@pytest.mark.parametrize(
    ("key", "value"),
    [("sendemail.smtpPass", "hunter2-x"), ("hub.oauthtoken", "0123456789abcdef" * 2)],
)
def test_a_password_or_token_key_is_a_credential_too(repo, key, value):
    git(repo, "config", key, value)
    ctx = context(repo)
    assert "credential" in (shell_concern(f"git config --get {key}", ctx) or "")
    assert "credential" in (shell_concern("git config --local --list", ctx) or "")
    assert shell_concern("git status", ctx) is None


def test_a_credential_an_included_file_holds_asks_for_what_prints_it(repo):
    (repo / ".git" / "creds.inc").write_text('[remote "origin"]\n\turl = https://u:p4ssw0rd@h/r\n')
    git(repo, "config", "include.path", "creds.inc")
    ctx = context(repo)
    assert "credential" in (shell_concern("git remote -v", ctx) or "")
    assert shell_concern("git log --oneline", ctx) is None


def test_an_ordinary_remote_is_no_credential(repo):
    git(repo, "remote", "add", "origin", "git@github.com:o/r.git")
    git(repo, "remote", "add", "up", "ssh://git@example.com/o/r.git")
    ctx = context(repo)
    assert shell_concern("git remote -v", ctx) is None
    assert shell_concern("cat .git/config", ctx) is None
