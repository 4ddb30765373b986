"""Adversarial review of c8fb644 (a line of git commands sees files as they are, its output
left to the output scanner): git options that print a secret in a shape the scanner misses.

Each case is a project file or a commit holding a password, a private key or a token, and a
line of git commands only (proven read-only, so it runs in the jail that shows files as they
are) that reshapes what git prints: `--color=always` closes each line with an escape the
password finder does not see past, `-a`/a blob of a UTF-16 file prints it as its bytes, a
`--format` width (`%>(N,ltrunc)`) or `head -c` keeps all of a token but its first or last
characters. For each, the session's own audit says whether it runs without asking; when it
does, it runs as the runner runs it (`proven_context` with its proof) and its result, redacted
by the session's vault, must hold no piece of the secret. Skipped where the machine cannot
sandbox.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from qshell.permissions.audit import audit_shell
from qshell.permissions.plugin_gate import prove
from qshell.permissions.policy import proven_context
from tests.permissions.test_git_scope import git
from tests.redaction.fakes import github_token
from tests.sandbox.test_content_bypass import repository, sent_unasked
from tests.sandbox.test_jail import FOUND, jailed, run

pytestmark = pytest.mark.skipif(not FOUND.jail, reason=f"no sandbox here: {FOUND.reason}")
PASSWORD = "correcthorse"
TOKEN = github_token(7)
CONFIG = f"db:\n  host: db1\n  password: {PASSWORD}\n"


def committed(root: Path, files: dict[str, bytes], message: str = "init") -> None:
    for name, data in files.items():
        (root / name).write_bytes(data)
    git(root, "add", *files)
    git(root, "commit", "-qm", message)


def colored_work_tree(root: Path) -> tuple[str, list[str]]:
    committed(root, {"README.md": b"hello\n", "config.yml": CONFIG.encode()})
    return "git diff --no-index --color=always README.md config.yml", [PASSWORD]


def colored_history(root: Path) -> tuple[str, list[str]]:
    committed(root, {"config.yml": CONFIG.encode()})
    return "git log -p --color=always", [PASSWORD]


def utf16_blob(root: Path) -> tuple[str, list[str]]:
    committed(root, {"conf16.txt": CONFIG.encode("utf-16")})
    return "git show HEAD:conf16.txt", [PASSWORD.encode("utf-16-le").decode()]


def utf16_work_tree(root: Path) -> tuple[str, list[str]]:
    committed(root, {"README.md": b"hello\n", "conf16.txt": CONFIG.encode("utf-16")})
    return "git diff --no-index -a README.md conf16.txt", [PASSWORD.encode("utf-16-le").decode()]


def message_cut_by_format(root: Path) -> tuple[str, list[str]]:
    committed(root, {"README.md": b"hello\n"}, f"ci: deploy with {TOKEN}")
    return "git log '--format=%>(30,ltrunc)%s'", [TOKEN[-20:]]


def message_cut_by_head(root: Path) -> tuple[str, list[str]]:
    committed(root, {"README.md": b"hello\n"}, f"ci: deploy with {TOKEN}")
    cut = len("ci: deploy with ") + len(TOKEN) - 2
    return f"git log --format=%s | head -c {cut}", [TOKEN[:-2]]


CASES: dict[str, Callable[[Path], tuple[str, list[str]]]] = {
    "a colored diff of a work-tree file": colored_work_tree,
    "a colored patch of the history": colored_history,
    "a UTF-16 blob": utf16_blob,
    "a UTF-16 work-tree file diffed as text": utf16_work_tree,
    "a message cut by a format width": message_cut_by_format,
    "a message cut by head -c": message_cut_by_head,
}


@pytest.mark.parametrize("case", list(CASES))
def test_git_output_reshaped_by_git_sends_no_secret(tmp_path: Path, case: str):
    root = repository(tmp_path)
    command, pieces = CASES[case](root)
    sent = sent_unasked(root, command)
    leaked = [piece for piece in pieces if piece in sent]
    assert not leaked, f"{command!r} ran without asking and sent {leaked[0][:8]!r}…"


def test_a_pickaxe_is_no_oracle_on_a_work_tree_secret(tmp_path: Path):
    """`-G` prints a diff or nothing as the regex matches the file's real bytes: one
    character of the password per few guesses, every guess run without asking."""
    root = repository(tmp_path)
    committed(root, {"README.md": b"hello\n", "config.yml": CONFIG.encode()})
    ctx = jailed(root)
    answers = set()
    for guess in (PASSWORD[:4], PASSWORD[:3] + "x"):
        command = f"git diff --no-index --stat -G'password: {guess}' README.md config.yml"
        if not audit_shell(command, ctx).auto_run:
            return
        answers.add(ctx.secrets.redact(run(proven_context(ctx, prove(command, ctx)), command)).text)
    assert len(answers) == 1, "a right and a wrong guess of the password print different things"
