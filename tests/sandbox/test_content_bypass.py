"""Adversarial review of secrets judged by content (68ff80c): where a key still reaches the model.

Each case is a project file, or a piece of git's history, that holds a private key or a
token the content judge does not see — a directory holding a stand-in `CACHEDIR.TAG` or
`pyvenv.cfg`, a UTF-16 or gzip file, a git-lfs object, a commit message — and a read-only command that reshapes it
(`rev`, `tail -n +3`, `tr -d`) so the output scanner cannot tell it. For each, the
session's own audit (what `qshell check-shell` prints) says whether it runs without
asking; when it does, it runs in the session's jail and its result, redacted by the
session's vault as every tool result is, must hold no line of the secret reshaped.
(Documented limits, not cases here: a file or blob over `MAX_SCANNED_BYTES` is not judged,
and a hard link to a secret outside the project is judged only by what it holds.) Skipped where the machine cannot sandbox.
"""

from __future__ import annotations

import gzip
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from qshell.permissions.audit import audit_shell
from qshell.permissions.plugin_gate import prove
from qshell.permissions.policy import proven_context
from tests.permissions.test_git_scope import git
from tests.redaction.fakes import github_token, pem_block
from tests.sandbox.test_jail import FOUND, jailed, run

pytestmark = pytest.mark.skipif(not FOUND.jail, reason=f"no sandbox here: {FOUND.reason}")
KEY = pem_block() + "\n"
TOKEN = github_token(7)


def reshaped(secret: str) -> set[str]:
    """The pieces of `secret` a reshaping command prints: each line of 8 characters or
    more but a PEM armour line, as it is and reversed."""
    lines = {line.strip() for line in secret.splitlines() if len(line.strip()) >= 8}
    lines = {line for line in lines if not line.startswith("-----")}
    return lines | {line[::-1] for line in lines}


def plain_file(root: Path) -> tuple[str, str]:
    """The case the commit covers, for contrast: its copy shows a marker."""
    (root / "backup_key.txt").write_text(KEY)
    return "rev backup_key.txt", KEY


def cache_tag_at_root(root: Path) -> tuple[str, str]:
    (root / "CACHEDIR.TAG").write_text("Signature: 8a477f597d28d172789f06886806bc55\n")
    (root / "backup_key.txt").write_text(KEY)
    return "rev backup_key.txt", KEY


def pyvenv_cfg_directory(root: Path) -> tuple[str, str]:
    (root / "keys").mkdir()
    (root / "keys" / "pyvenv.cfg").mkdir()  # not even a file
    (root / "keys" / "deploy.txt").write_text(KEY)
    return "tail -n +3 keys/deploy.txt", KEY


def utf16_file(root: Path) -> tuple[str, str]:
    (root / "key16.txt").write_bytes(KEY.encode("utf-16"))
    return "tr -d '\\000' < key16.txt | tail -n +3", KEY


def gzip_file(root: Path) -> tuple[str, str]:
    (root / "key.gz").write_bytes(gzip.compress(KEY.encode()))
    return "zcat key.gz | tail -n +3", KEY


def lfs_object(root: Path) -> tuple[str, str]:
    where = root / ".git" / "lfs" / "objects" / "4d" / "7a"
    where.mkdir(parents=True)
    (where / ("4d7a" + "0" * 60)).write_text(KEY)  # git-lfs keeps each file's bytes as is
    return f"tail -n +3 .git/lfs/objects/4d/7a/4d7a{'0' * 60}", KEY


def commit_message(root: Path) -> tuple[str, str]:
    (root / "README.md").write_text("hello\n")
    git(root, "add", "README.md")
    git(root, "commit", "-qm", f"ci: deploy with {TOKEN}")
    return "git log --format=%B | rev", TOKEN


CASES: dict[str, Callable[[Path], tuple[str, str]]] = {
    "a key under a plain name": plain_file,
    "CACHEDIR.TAG at the root": cache_tag_at_root,
    "a directory named pyvenv.cfg": pyvenv_cfg_directory,
    "a UTF-16 file": utf16_file,
    "a gzip file": gzip_file,
    "a git-lfs object": lfs_object,
    "a commit message": commit_message,
}


def repository(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    root.mkdir()
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    return root


def sent_unasked(root: Path, command: str) -> str:
    """What `command` sends the model in the session's jail when its audit lets it run
    without asking, run as the runner runs it and redacted as every result is; "" when it
    asks (nothing reaches the model unasked)."""
    ctx = jailed(root)
    if not audit_shell(command, ctx).auto_run:
        return ""
    return ctx.secrets.redact(run(proven_context(ctx, prove(command, ctx)), command)).text


@pytest.mark.parametrize("case", list(CASES))
def test_a_secret_the_content_judge_misses_is_not_sent_reshaped(tmp_path: Path, case: str):
    root = repository(tmp_path)
    command, secret = CASES[case](root)
    sent = sent_unasked(root, command)
    leaked = sorted(piece for piece in reshaped(secret) if piece in sent)
    assert not leaked, f"{command!r} ran without asking and sent {leaked[0][:12]}…"
