"""Credentials in git's configuration, and the copy of a configuration file without them.

The copy is what the jail shows git in place of `.git/config`: read back by the real git it
must hold every entry of the original — quoting, comments, includes, odd sections and all —
with each credential replaced by a marker, and none of the credentials."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from qshell.permissions.git_credentials import (
    RedactedConfigs,
    credential_free,
    hidden,
    holds_credential,
    parse,
)
from tests.redaction.fakes import body, github_token

TOKEN = github_token(7)
PASSWORD = body(14, seed=3)


@pytest.mark.parametrize(
    ("key", "value", "free"),
    [
        (
            "remote.origin.url",
            f"https://alice:{PASSWORD}@github.com/o/r.git",
            f"https://alice:{hidden('url-password')}@github.com/o/r.git",
        ),
        (
            "remote.origin.url",
            f"https://{TOKEN}@github.com/o/r.git",
            f"https://{hidden('url-token')}@github.com/o/r.git",
        ),
        (
            "remote.origin.url",
            f"https://bob:p@ss{PASSWORD}@host/r.git",  # the userinfo ends at its last `@`
            f"https://bob:{hidden('url-password')}@host/r.git",
        ),
        ("http.https://github.com/.extraheader", "AUTHORIZATION: basic eC1hY2Nlc3M=", None),
        ("sendemail.smtppass", "hunter2", None),
        ("hub.oauthtoken", body(40, "0123456789abcdef"), None),
        ("credential.https://example.com.password", PASSWORD, None),
        ("github.token", TOKEN, None),
        ("ci.note", f"deploy with {TOKEN}", f"deploy with {hidden('github-token')}"),
    ],
)
def test_each_credential_is_replaced_by_a_marker(key, value, free):
    expected = free if free is not None else hidden("git-credential")
    assert credential_free(key, value) == (key, expected)
    assert holds_credential(key, value)


def test_a_token_in_an_insteadof_section_name_is_replaced_too():
    key = f"url.https://{TOKEN}@github.com/.insteadof"
    free = f"url.https://{hidden('url-token')}@github.com/.insteadof"
    assert credential_free(key, "https://github.com/") == (free, "https://github.com/")
    assert holds_credential(key, "https://github.com/")


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("remote.origin.url", "git@github.com:o/r.git"),
        ("remote.origin.url", "ssh://git@example.com/o/r.git"),
        ("remote.origin.url", "https://github.com/o/r.git"),
        ("core.askpass", "/usr/libexec/git-askpass"),
        ("user.name", "Alice Example"),
        ("core.bare", None),
        ("branch.main.merge", "refs/heads/main"),
    ],
)
def test_an_ordinary_entry_holds_no_credential(key, value):
    assert credential_free(key, value) == (key, value)
    assert not holds_credential(key, value)


def git(*args: str, cwd: Path) -> bytes:
    env = {"PATH": os.environ["PATH"], "GIT_CONFIG_NOSYSTEM": "1", "HOME": str(cwd)}
    return subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True).stdout


def listed(path: Path) -> list[tuple[str, str | None]]:
    return parse(
        git(
            "config", "--file", str(path), "--no-includes", "--list", "-z", cwd=path.parent
        ).decode()
    )


def tricky_config(path: Path) -> None:
    """A configuration written partly by hand, partly by git, with what git's syntax allows."""
    path.write_text(
        "# a comment with https://x:y@z\n"
        "[core]\n\tbare = false\n\tflag\n"
        "[Old.Style]\n\tkey = kept ; a comment\n"
        '[weird "sub \\"quoted\\" \\\\ name"]\n\tv = "  spaced  "\n'
        "[include]\n\tpath = other.inc\n"
    )
    for key, value in [
        ("remote.origin.url", f"https://alice:{PASSWORD}@github.com/o/r.git"),
        ("remote.origin.fetch", "+refs/heads/*:refs/remotes/origin/*"),
        (f"url.https://{TOKEN}@github.com/.insteadOf", "https://github.com/"),
        ("sendemail.smtpPass", 'pa"ss#;\\word'),
        ("alias.lg", "log --graph # not a comment\tnor this"),
        ("x.multi", "line one\nline two"),
    ]:
        git("config", "--file", str(path), "--add", key, value, cwd=path.parent)


def test_the_copy_holds_every_entry_with_each_credential_replaced(tmp_path):
    original = tmp_path / "config"
    tricky_config(original)
    entries = listed(original)
    configs = RedactedConfigs()  # its copies live as long as it does
    copy = configs.copy_of(original)
    assert copy is not None
    assert listed(copy) == [credential_free(key, value) for key, value in entries]
    text = copy.read_text()
    assert PASSWORD not in text and TOKEN not in text and 'pa\\"ss' not in text
    assert "[redacted: url-password #0]" in text
    assert '[url "https://[redacted: url-token #0]@github.com/"]' in text
    assert not any(holds_credential(k, v) for k, v in listed(copy) if v != hidden("git-credential"))


def test_a_configuration_without_credentials_is_copied_as_it_reads(tmp_path):
    original = tmp_path / "config"
    git("config", "--file", str(original), "user.name", "A ; B", cwd=tmp_path)
    git("config", "--file", str(original), "remote.up.url", "git@h:o/r.git", cwd=tmp_path)
    configs = RedactedConfigs()
    copy = configs.copy_of(original)
    assert copy is not None and listed(copy) == listed(original)


def test_one_copy_per_content_and_none_for_what_git_cannot_read(tmp_path):
    configs = RedactedConfigs()
    first, second = tmp_path / "a", tmp_path / "b"
    for path in (first, second):
        path.write_text("[user]\n\tname = x\n")
    assert configs.copy_of(first) == configs.copy_of(second) is not None
    broken = tmp_path / "broken"
    broken.write_text('[remote "origin"\n\turl = https://u:p4ss@h/r\n')
    assert configs.copy_of(broken) is None
    assert configs.copy_of(tmp_path / "missing") is None
