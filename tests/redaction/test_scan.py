"""The scanner finds each format it knows, whole, and leaves ordinary code and hashes alone."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from qshell.redaction import marker, redact, scan
from tests.redaction.fakes import (
    ASSIGNMENT_CASES,
    COMMAND_CASES,
    TOKEN_CASES,
    aws_key_id,
    github_token,
)

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("kind", "template", "secret"), TOKEN_CASES + ASSIGNMENT_CASES + COMMAND_CASES
)
def test_each_known_format_is_replaced_by_its_marker_and_nothing_else_changes(
    kind, template, secret
):
    text, findings = redact(template.format(secret=secret))
    assert text == template.format(secret=marker(kind, 1))
    assert [f.kind for f in findings] == [kind]


def test_a_private_key_a_read_file_page_numbered_is_replaced_whole():
    key = TOKEN_CASES[0][2].split("\n")
    page = "\n".join(f"{n:>6}\t{line}" for n, line in enumerate(["[x]", *key, "y = 1"], 1))
    text, _ = redact(page)
    assert text == f"     1\t[x]\n     2\t{marker('private-key', 1)}\n     8\ty = 1"


def test_a_private_key_cut_off_by_a_page_is_hidden_up_to_its_last_line():
    cut = "\n".join(TOKEN_CASES[0][2].split("\n")[:3])
    text, _ = redact(f"{cut}\n\n[Showing lines 1-3 of 9.]")
    assert text == f"{marker('private-key', 1)}\n\n[Showing lines 1-3 of 9.]"


def test_an_access_key_id_and_its_secret_key_in_a_credentials_csv_are_both_hidden():
    secret = TOKEN_CASES[8][2]
    text, findings = redact(f"User,Access key ID,Secret access key\nci,{aws_key_id()},{secret}\n")
    assert [f.kind for f in findings] == ["aws-access-key", "aws-secret-key"]
    assert text.endswith(f"ci,{marker('aws-access-key', 1)},{marker('aws-secret-key', 2)}\n")


def test_the_same_secret_twice_gets_one_marker_and_another_one_the_next_number():
    one, two = github_token(1), github_token(2)
    text, _ = redact(f"a={one}\nb={two}\nc={one}\n")
    first, second = marker("github-token", 1), marker("github-token", 2)
    assert text == f"a={first}\nb={second}\nc={first}\n"


ORDINARY = [
    "password = os.environ['DB_PASSWORD']",
    'token = os.environ.get("GITHUB_TOKEN")',
    "password=None",
    "token: str",
    "password: Optional[str] = None",
    "def login(user: str, password: str) -> Token:",
    "token = CancelToken()",
    "api_key = settings.api_key",
    "self.token = token",
    '{"password": password, "token": token}',
    "secret = secrets.token_hex(16)",
    "pwd = os.getcwd()",
    "if token == 'abc123def456':",
    "max_tokens=4096",
    "token_count: int = 0",
    "password_hash = 'pbkdf2_sha256$260000$abc$def'",
    "secret_name = 'prod-db'",
    "private_key_path = '~/.ssh/id_rsa'",
    "password: ${DB_PASSWORD}",
    'password: "{{ vault_db_password }}"',
    "password: !vault |",
    "auth: ${AUTH}",
    "bypass = 'abc123def'",
    "oauth = OAuth2Session(client_id)",
    'api_key="<your api key>"',
    "OPENAI_API_KEY=sk-...",
    "OPENAI_API_KEY=your-key-here",
    "TOKEN=xxxxxxxxxxxxxxxxxxxxxxxx",
    "aws_access_key_id = AKIAIOSFODNN7EXAMPLE",
    "url = https://user:password@example.com/path",
    "url = https://user:${PASS}@example.com/path",
    "git@github.com:owner/repo.git",
    "https://github.com/owner/repo/commit/3f9a1c2b4d5e6f708192a3b4c5d6e7f809192a3b",
    "commit 3f9a1c2b4d5e6f708192a3b4c5d6e7f809192a3b",
    "Merge: 3f9a1c2 4d5e6f7",
    'sha256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"',
    'hash = "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"',
    '"integrity": "sha512-z4PhNX7vuL3xVChQ1m2AB9Yg5AULVxXcg/SpIdNs6c5H0NE8XYXysP+DGNKHfuwvY7kxvUdBeoGlODJ6+SfaPg=="',
    "image: python@sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    f"id = '{uuid.UUID(int=0x123E4567E89B12D3A456426614174000)}'",
    'data = "aGVsbG8gd29ybGQsIHRoaXMgaXMgYmFzZTY0IHRlc3QgZGF0YQ=="',
    "Basic authentication is configured in the settings below.",
    "Use a bearer token for every request to the service.",
    "The password must be at least twelve characters long.",
    "the token is here",
    "a token value that is long 1a2b3c4d5e",
    "hub.oauthtoken 0123456789abcdef0123456789abcdef01234567 was revoked",
    "color.token green",
    "Authorization: token",
    "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----",
    "-----BEGIN PUBLIC KEY-----",
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl me@box",
]


@pytest.mark.parametrize("text", ORDINARY)
def test_ordinary_code_hashes_and_placeholders_are_left_alone(text):
    assert scan(text) == []


def test_no_module_of_qshell_holds_anything_the_scanner_would_hide():
    found = {
        str(path.relative_to(ROOT)): [f.kind for f in scan(path.read_text(encoding="utf-8"))]
        for path in sorted((ROOT / "qshell").rglob("*"))
        if path.suffix in (".py", ".md") and path.is_file()
    }
    assert {name: kinds for name, kinds in found.items() if kinds} == {}


def test_non_latin_text_keeps_every_offset():
    token = github_token()
    text, _ = redact(f"Пароль → token: {token} ✓ 密码")
    assert text == f"Пароль → token: {marker('github-token', 1)} ✓ 密码"


def test_a_secret_split_by_colour_codes_or_nuls_is_found_as_a_terminal_shows_it():
    """`grep --color=always`, `git log -p --color` and UTF-16 shown byte by byte put
    escape sequences or NULs inside a secret; the span covers them too."""
    token = github_token()
    coloured = f"\x1b[32m+password: correcthorse\x1b[m\ngrep: \x1b[01;31m{token}\x1b[m\n"
    done, found = redact(coloured)
    assert [f.kind for f in found] == ["password", "github-token"]
    assert "correcthorse" not in done and token not in done
    wide = "\x00".join("password: correcthorse") + "\x00"
    done, found = redact(wide)
    assert [f.kind for f in found] == ["password"] and "c\x00o\x00r" not in done
