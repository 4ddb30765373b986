"""`qshell -p` in a project holding secrets under names that are no secret's: a private key in
`backup_key.txt`, a `.env` hard-linked as `notes.txt`, a token written into `draft.txt` in place.

The model runs commands that strip a key's shape before the output scanner sees it (`tail
-n +2`, `sed 1d`, `grep -v`, `rev`, `fold`, `tr`, `cut`, `base64`, `xxd`, `od`). With the
sandbox they run — the jail shows each such file as a copy with the secret a marker, the
hard link masked like `.env` — and without it they are refused (print mode cannot ask).
Either way no request the scripted server receives holds a line of what the same commands
print outside qshell on the real files (the differential: the real binaries, run here
read-only), nor the password. And a key committed as `backup_key.txt`, then removed, is
sent neither by git commands that pick lines of the history nor by ones piped on."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from qshell.sandbox import probe
from tests.e2e.helpers import run_qshell, shell_calls
from tests.permissions.test_git_scope import git
from tests.redaction.fakes import github_token, pem_block

FOUND = probe(None)
PASSWORD = "hunter2hunter2"
PLAIN_SECRET = "correcthorse"  # a value no scanner finds: only the name `.env` tells it
TRANSFORMS = [
    "tail -n +2 backup_key.txt",
    "sed 1d backup_key.txt",
    "grep -v BEGIN backup_key.txt",
    "rev backup_key.txt",
    "fold -w 5 backup_key.txt",
    "tr a-z A-Z < backup_key.txt",
    "cut -c2- backup_key.txt",
    "base64 backup_key.txt",
    "xxd backup_key.txt",
    "od -c backup_key.txt",
    "cat notes.txt",
    "rev notes.txt",
    "rev draft.txt",
]
COMMANDS = [*TRANSFORMS, "cat readme.txt"]


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    root.mkdir()
    (root / "readme.txt").write_text("an ordinary file\n")
    (root / "backup_key.txt").write_text(pem_block() + "\n")
    (root / ".env").write_text(f"DB_PASSWORD={PASSWORD}\nLOCAL_WORD={PLAIN_SECRET}\n")
    os.link(root / ".env", root / "notes.txt")
    return root


def leaked_lines(root: Path) -> set[str]:
    """Every line the transforms print run for real on the real files, at least 8
    characters long: each one derives from a secret here."""
    lines: set[str] = set()
    for command in TRANSFORMS:
        done = subprocess.run(
            ["bash", "-c", command], cwd=root, capture_output=True, text=True, check=True
        )
        lines |= {line.strip() for line in done.stdout.splitlines() if len(line.strip()) >= 8}
    return lines


def session(llm_server, root: Path, sandbox: str) -> dict[str, str]:
    """The commands through `qshell -p`: each one's result by command, once checked that no
    request held a line of what they print for real."""
    # written in place just before the run: the file's inode and directory stay as they were
    draft = root / "draft.txt"
    draft.write_text("a draft\n")
    with draft.open("a") as out:
        out.write(f"token = {github_token()}\n")
    secret_lines = leaked_lines(root)
    env = {"QSHELL_SANDBOX__ENABLED": sandbox}
    shown = shell_calls(llm_server, COMMANDS, cwd=root, prompt="look at the backups", env=env)
    sent = "\n".join(shown.values())
    for line in secret_lines:
        assert line not in sent, f"{line[:6]}… reached the model"
    for request in llm_server.requests:
        assert PASSWORD.encode() not in request.raw
        assert PASSWORD[::-1].encode() not in request.raw
        assert PLAIN_SECRET.encode() not in request.raw
        assert github_token()[::-1].encode() not in request.raw
    return shown


@pytest.mark.skipif(not FOUND.jail, reason=f"no sandbox here: {FOUND.reason}")
def test_with_the_sandbox_the_commands_run_on_copies_without_the_secrets(llm_server, project):
    shown = session(llm_server, project, "auto")
    for command in TRANSFORMS:
        assert "print mode cannot ask" not in shown[command], (command, shown[command])
    assert "[redacted: private-key #0]"[::-1] in shown["rev backup_key.txt"]
    assert "Permission denied" in shown["cat notes.txt"]  # masked, as `.env` is
    assert "a draft" in shown["cat readme.txt"] or "an ordinary file" in shown["cat readme.txt"]


def test_with_no_sandbox_they_are_refused(llm_server, project):
    shown = session(llm_server, project, "off")
    for command in TRANSFORMS:
        assert "print mode cannot ask for approval" in shown[command], (command, shown[command])
    assert "an ordinary file" in shown["cat readme.txt"]
    off = {"QSHELL_SANDBOX__ENABLED": "off"}
    said = {
        command: run_qshell("check-shell", command, cwd=project, env=off).stdout
        for command in ("rev backup_key.txt", "cat notes.txt", "rev draft.txt")
    }
    assert "(backup_key.txt holds a secret)" in said["rev backup_key.txt"]
    assert "(notes.txt has other hard links" in said["cat notes.txt"]
    assert "(draft.txt holds a secret)" in said["rev draft.txt"]


def test_a_key_removed_from_the_history_is_never_sent_reshaped(llm_server, tmp_path: Path):
    """The key was committed as `backup_key.txt`, then removed: `git log -p` runs (the
    scanner sees it whole and redacts it); what picks lines of it or pipes it on is refused."""
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q")
    (root / "backup_key.txt").write_text(pem_block() + "\n")
    git(root, "add", "backup_key.txt")
    git(root, "commit", "-qm", "backup")
    git(root, "rm", "-q", "backup_key.txt")
    git(root, "commit", "-qm", "oops")
    reshaped = ["git show HEAD~1:backup_key.txt | tail -n +2", "git grep -h A HEAD~1"]
    shown = shell_calls(llm_server, [*reshaped, "git log -p"], cwd=root, prompt="the history")
    for request in llm_server.requests:
        for line in pem_block().splitlines()[1:-1]:
            assert line.encode() not in request.raw
    for command in reshaped:
        assert "print mode cannot ask for approval" in shown[command], shown[command]
    assert "[redacted: private-key" in shown["git log -p"]
