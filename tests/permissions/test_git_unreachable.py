"""Secrets git keeps where no branch or tag reaches, checked in a throwaway repository: a
private key committed then reset away (the reflog holds it) and a `.env` staged then unstaged
(a dangling blob, with no file name to judge). Every command that could print them asks,
with the decision `qshell check-shell` and a session use (policy.shell_concern)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from qshell.permissions.policy import shell_concern
from tests.permissions.test_git_scope import context, git
from tests.redaction.fakes import pem_block

ENV_LINE = "DB_PASSWORD=hunter2\n"
ORDINARY = ("git log -p", "git show HEAD", "git diff HEAD~1", "git log -g -p", "git reflog -p")


def output(cwd: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True)
    return done.stdout.strip()


@pytest.fixture
def clean(tmp_path: Path) -> Path:
    """A repository with two ordinary commits and nothing unreachable."""
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q")
    for n in (1, 2):
        (root / "app.py").write_text(f"print({n})\n")
        git(root, "add", "app.py")
        git(root, "commit", "-qm", f"commit {n}")
    return root.resolve()


def reset_key(root: Path) -> str:
    """Commits a private key, resets it away; returns the reset commit's id."""
    (root / "id_rsa").write_text(pem_block("OPENSSH PRIVATE KEY") + "\n")
    git(root, "add", "id_rsa")
    git(root, "commit", "-qm", "deploy key")
    sha = output(root, "rev-parse", "HEAD")
    git(root, "reset", "-q", "--hard", "HEAD~1")
    return sha


def unstage_env(root: Path, how: tuple[str, ...]) -> str:
    """Stages `.env`, unstages it (`how`), deletes it; returns its blob's id."""
    (root / ".env").write_text(ENV_LINE)
    git(root, "add", "-f", ".env")
    blob = output(root, "rev-parse", ":.env")
    git(root, *how)
    (root / ".env").unlink()
    return blob


def test_ordinary_history_commands_run_in_a_clean_repository(clean):
    ctx = context(clean)
    head = output(clean, "rev-parse", "HEAD")
    blob = output(clean, "rev-parse", "HEAD:app.py")
    commands = (*ORDINARY, f"git show {head[:7]}", f"git cat-file -p {blob}")
    for command in (*commands, "git cat-file --batch-all-objects --batch"):
        assert shell_concern(command, ctx) is None, command


def test_a_key_reset_away_and_an_unstaged_env_make_history_commands_ask(clean):
    sha = reset_key(clean)
    blob = unstage_env(clean, ("reset", "-q"))
    ctx = context(clean)
    commands = (
        "git log -g -p",
        "git reflog -p",
        "git show HEAD@{1}",
        f"git diff {sha}",
        f"git show {sha[:8]}",
        "git cat-file --batch-all-objects --batch",
        f"git show {blob}",
        f"git cat-file -p {blob[:10]}",
        f"git diff HEAD {blob[:7]}:.env",
    )
    for command in commands:
        assert shell_concern(command, ctx), command
    assert "id_rsa" in (shell_concern("git reflog -p", ctx) or "")
    assert shell_concern("git status", ctx) is None  # names only
    assert shell_concern("git log --oneline -3", ctx)  # log may show what the reflog holds


@pytest.mark.parametrize("how", [("reset", "-q"), ("rm", "-q", "--cached", ".env")])
def test_an_env_staged_then_unstaged_asks_for_commands_that_print_any_object(clean, how):
    """The dangling blob has no name: only the commands that name it by id, or take every
    object, could print it; the rest of the history holds no secret and runs."""
    blob = unstage_env(clean, how)
    ctx = context(clean)
    for command in (
        f"git show {blob}",
        f"git cat-file blob {blob[:6]}",
        "git cat-file --batch-all-objects --batch",
        "git cat-file --batch-all-objects --batch-check",
        "git cat-file --batch",
        "git log --stdin -p",
    ):
        assert "no branch, tag or reflog reaches" in (shell_concern(command, ctx) or ""), command
    for command in ORDINARY:
        assert shell_concern(command, ctx) is None, command


def test_a_dropped_stash_is_unreachable(clean):
    (clean / "app.py").write_text("TOKEN = 'x'\n")
    git(clean, "stash", "-q")
    stash = output(clean, "rev-parse", "stash@{0}")
    ctx = context(clean)
    assert shell_concern(f"git show {stash}", ctx) is None  # refs/stash reaches it
    git(clean, "stash", "drop", "-q")
    assert shell_concern(f"git show {stash}", ctx)


def test_fsck_that_lists_or_writes_lost_objects_asks(clean):
    ctx = context(clean)
    for command in ("git fsck --lost-found", "git fsck --unreachable", "git fsck --dangling"):
        assert shell_concern(command, ctx), command
