"""`qshell -p` in a repository holding a private key reset away and a `.env` staged then
unstaged: the model runs every command that could print them from the reflog or the object
store, each is refused (print mode cannot ask), `git status` still runs, and no request the
scripted server receives holds the key or the password."""

from __future__ import annotations

from pathlib import Path

from tests.e2e.helpers import shell_calls
from tests.permissions.test_git_scope import git
from tests.permissions.test_git_unreachable import output, reset_key, unstage_env
from tests.redaction.fakes import pem_block


def test_history_the_branches_do_not_reach_is_never_sent(llm_server, tmp_path: Path):
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q")
    (root / "app.py").write_text("print(1)\n")
    git(root, "add", "app.py")
    git(root, "commit", "-qm", "first")
    sha = reset_key(root)
    blob = unstage_env(root, ("rm", "-q", "--cached", ".env"))
    assert output(root, "cat-file", "-p", blob) == "DB_PASSWORD=hunter2"
    leaking = [
        "git log -g -p",
        "git reflog -p",
        "git show HEAD@{1}",
        f"git diff {sha}",
        "git cat-file --batch-all-objects --batch",
        f"git show {blob}",
    ]
    shown = shell_calls(llm_server, [*leaking, "git status"], cwd=root, prompt="the history")
    key_line = pem_block().splitlines()[1]
    for request in llm_server.requests:
        assert b"hunter2" not in request.raw
        assert key_line.encode() not in request.raw
        assert b"PRIVATE KEY" not in request.raw
    for command in leaking:
        assert "print mode cannot ask for approval" in shown[command], (command, shown[command])
    assert "On branch" in shown["git status"]
