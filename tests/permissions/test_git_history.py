"""A key committed under a name that tells nothing (`backup_key.txt`), then removed: git
commands that print the history whole run, and what they print, run for real here, is
redacted whole by the output scanner (the differential); those that pick lines out of it
or pipe it on ask, since no scanner can judge the reshaped lines; commands that print no
file of the history run; and in a history that holds no secret, all of them run."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from qshell.permissions.policy import shell_concern
from qshell.redaction import redact
from tests.permissions.test_git_scope import context, git
from tests.permissions.test_git_unreachable import clean  # noqa: F401 (a fixture)
from tests.redaction.fakes import github_token, pem_block

KEY = pem_block() + "\n"
WHOLE = [
    "git log -p",
    "git show HEAD~1",
    "git show HEAD",
    "git show HEAD~1:backup_key.txt",
    "git cat-file -p HEAD~1:backup_key.txt",
    "git diff HEAD~2 HEAD~1",
]
RESHAPED = [
    "git show HEAD~1:backup_key.txt | tail -n +2",
    "git log -p | rev",
    "git grep -h A HEAD~1",
    "git blame HEAD~1 -- backup_key.txt",
    "git log -L2,3:backup_key.txt HEAD~1",
    "git diff -U0 HEAD~2 HEAD~1",
    "git show HEAD~1 | grep -v BEGIN",
    "git log -p --word-diff=porcelain",
    "git log -p --color-words",
]
NO_FILES = ["git log --oneline | head", "git status | cat", "git log --stat | rev"]


@pytest.fixture
def removed_key(clean: Path) -> Path:  # noqa: F811 (the fixture it extends)
    (clean / "backup_key.txt").write_text(KEY)
    git(clean, "add", "backup_key.txt")
    git(clean, "commit", "-qm", "backup")
    git(clean, "rm", "-q", "backup_key.txt")
    git(clean, "commit", "-qm", "oops")
    return clean


@pytest.mark.parametrize("command", WHOLE)
def test_history_printed_whole_runs_and_the_scanner_redacts_all_of_the_key(removed_key, command):
    assert shell_concern(command, context(removed_key)) is None
    done = subprocess.run(["bash", "-c", command], cwd=removed_key, capture_output=True, check=True)
    shown, _ = redact(done.stdout.decode())
    for line in KEY.splitlines()[1:-1]:
        assert line not in shown, command


@pytest.mark.parametrize("command", RESHAPED)
def test_history_picked_into_lines_or_piped_on_asks(removed_key, command):
    concern = shell_concern(command, context(removed_key))
    assert concern is not None and "in git's history holds a secret" in concern


@pytest.mark.parametrize("command", NO_FILES)
def test_commands_that_print_no_file_of_the_history_run(removed_key, command):
    assert shell_concern(command, context(removed_key)) is None


@pytest.mark.parametrize("command", [*WHOLE[:2], "git log -p | rev", "git grep -h print HEAD~1"])
def test_a_history_without_secrets_runs_every_form(clean, command):  # noqa: F811
    assert shell_concern(command, context(clean)) is None


@pytest.fixture
def token_in_message(clean: Path) -> Path:  # noqa: F811 (the fixture it extends)
    (clean / "notes.txt").write_text("notes\n")
    git(clean, "add", "notes.txt")
    git(clean, "commit", "-qm", f"deploy with {github_token()}")
    return clean


@pytest.mark.parametrize(
    ("command", "asks"),
    [
        ("git log --format=%B | rev", True),
        ("git branch -v | rev", True),
        ("git log --oneline", False),
        ("git log --oneline | head -c 49", True),  # a token cut short of its shape
        ("git log --oneline -Gdeploy", True),  # which commits match: an oracle for a guess
        ("git status | rev", False),
    ],
)
def test_a_commit_message_holding_a_token_is_not_passed_on_reshaped(
    token_in_message, command, asks
):
    concern = shell_concern(command, context(token_in_message))
    assert (concern is not None and "holds a secret" in concern) is asks, concern


def test_the_object_store_is_read_with_git_only(removed_key):
    objects = removed_key / ".git" / "objects"
    loose = next(p for p in objects.glob("??/*") if p.is_file())
    rel = loose.relative_to(removed_key).as_posix()
    concern = shell_concern(f"base64 {rel}", context(removed_key))
    assert concern is not None and "git's object store" in concern
