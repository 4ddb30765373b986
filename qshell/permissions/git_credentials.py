"""Credentials in git's configuration: which entries hold one, and the configuration without them.

A git configuration holds a credential in a remote or `insteadOf` URL (`https://user:pw@h`,
`https://<token>@h`, in a value or a subsection name), under a key named for one
(`http.extraHeader`, `*.password`, `sendemail.smtpPass`, `hub.oauthtoken`, `*.secret`), or
in any form the redaction scanner knows (a GitHub token, a JWT…). `credential_free(key,
value)` is the entry with each replaced by a marker (`[redacted: url-password #0]`: `#0`,
never a number a session's vault gives, so the file tools refuse to write it anywhere);
an entry holds a credential when that changes it, or when the read-scope rule's own pattern
(tools/paths.py `GIT_CREDENTIALS`) still finds one. `RedactedConfigs.copy_of(path)` writes
that configuration file with every entry made credential-free, in git's syntax, for the
jail to show git in place of the file (permissions/confine.py): git then works in the jail
— the remotes, the branches' upstreams, the repository format all there — and no command
there, however it transforms what it prints, can print a credential. The copy is checked
with git itself: read back, it must hold exactly the credential-free entries and none
that still holds a credential; otherwise there is no copy (the jail hides the file whole).
Runs only `git config --file - --no-includes --list -z`, which runs no program.
Thread-safe: the copies are made under a lock.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from qshell.permissions.file_secrets import Copies
from qshell.permissions.shell_scope import run_quietly
from qshell.redaction import marker, scan
from qshell.tools.paths import GIT_CREDENTIALS, MAX_GIT_CONFIG_BYTES

Entry = tuple[str, str | None]  # a key (`remote.origin.url`) and its value (None: no `=`)

# a variable named for a credential (`extraheader`, `smtppass`, `oauthtoken`, `password`);
# not `askpass`, which names a program
CREDENTIAL_NAME = re.compile(r"(?:extraheader|(?<!ask)pass(?:word|wd)?|token|secret)\Z")
# the user information of a URL: all up to the last `@` before the path
_USERINFO = re.compile(r"(?i)(?<=://)([^/\s]+)@")
_PLAIN_USER = re.compile(r"[A-Za-z0-9._-]{1,19}")  # a user name; longer is a token (paths.py)
GIT_TIMEOUT_S = 2.0  # any git helper command the checks run (git_scope.py too)
_PLAIN_VALUE = re.compile(r"[^\s\"\\#;]+(?:[ ][^\s\"\\#;]+)*")  # written without quotes
_ESCAPES = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\t": "\\t", "\b": "\\b"}


def hidden(kind: str) -> str:
    """The marker a credential of `kind` gets in a configuration (never a vault's number)."""
    return marker(kind, 0)


def credential_free(key: str, value: str | None) -> Entry:
    """The entry with every credential in its key or value replaced by a marker."""
    section, _, rest = key.partition(".")
    sub, dot, name = rest.rpartition(".")
    if dot:
        key = f"{section}.{_scrubbed(sub)}.{name}"
    if value is None:
        return key, None
    if value and CREDENTIAL_NAME.search(name.lower()):
        return key, hidden("git-credential")
    return key, _scrubbed(value)


def holds_credential(key: str, value: str | None) -> bool:
    """Whether the entry holds a credential (git would print it for `git config -l`)."""
    if credential_free(key, value) != (key, value):
        return True
    return GIT_CREDENTIALS.search(f"{key}={value or ''}") is not None


def _scrubbed(text: str) -> str:
    """`text` with the user information of each URL in it and each secret the scanner
    finds replaced by markers."""
    text = _USERINFO.sub(_userinfo, text)
    parts: list[str] = []
    last = 0
    for finding in scan(text):
        parts += [text[last : finding.start], hidden(finding.kind)]
        last = finding.end
    return "".join(parts) + text[last:]


def _userinfo(match: re.Match[str]) -> str:
    user, colon, _ = match.group(1).partition(":")
    if colon:
        return f"{user}:{hidden('url-password')}@"
    if _PLAIN_USER.fullmatch(user):
        return match.group()
    return f"{hidden('url-token')}@"


def _still_secret(key: str, value: str | None) -> bool:
    """Whether an entry of a copy still holds a credential (a value that is a marker, under
    a key named for a credential, is none)."""
    if value is not None and value == hidden("git-credential"):
        return False
    return holds_credential(key, value)


def parse(text: str) -> list[Entry]:
    """The entries of `git config --list -z` output, in order."""
    entries: list[Entry] = []
    for item in text.split("\0")[:-1]:
        key, newline, value = item.partition("\n")
        entries.append((key, value if newline else None))
    return entries


def serialized(entries: list[Entry]) -> str | None:
    """`entries` as a configuration file git reads back as the same entries (sections in
    order, values quoted where they need it); None for a key git could not have listed."""
    lines: list[str] = []
    current: tuple[str, str | None] | None = None
    for key, value in entries:
        section, _, rest = key.partition(".")
        sub, dot, name = rest.rpartition(".")
        if not section or not name or "\n" in sub or '"' in section:
            return None
        header = (section, sub if dot else None)
        if header != current:
            shown = sub.replace("\\", "\\\\").replace('"', '\\"')
            lines.append(f'[{section} "{shown}"]' if dot else f"[{section}]")
            current = header
        lines.append(f"\t{name}" if value is None else f"\t{name} = {_quoted(value)}")
    return "".join(line + "\n" for line in lines)


def _quoted(value: str) -> str:
    if _PLAIN_VALUE.fullmatch(value):
        return value
    return '"' + "".join(_ESCAPES.get(char, char) for char in value) + '"'


class RedactedConfigs(Copies):
    """Credential-free copies of git configuration files (file_secrets.py's `Copies`)."""

    limit = MAX_GIT_CONFIG_BYTES
    prefix = "qshell-git-config-"

    def shown(self, data: bytes, directory: Path) -> bytes | None:
        """The configuration in `data` without its credentials, or None when git does not
        read that back as the credential-free entries."""
        entries = _listed(data, directory)
        if entries is None:
            return None
        expected = [credential_free(key, value) for key, value in entries]
        text = serialized(expected)
        if text is None:
            return None
        made = text.encode("utf-8", "surrogateescape")
        back = _listed(made, directory)
        if back != expected or any(_still_secret(key, value) for key, value in back):
            return None
        return made


def _listed(data: bytes, cwd: Path) -> list[Entry] | None:
    """The entries git reads from a configuration file holding `data` (given on its
    standard input: the credentials never touch the disk again), or None when git cannot."""
    environ = {
        "PATH": os.environ.get("PATH", os.defpath),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_CEILING_DIRECTORIES": str(cwd.parent),
        "LC_ALL": "C",
    }
    argv = ["git", "config", "--file", "-", "--no-includes", "--list", "-z"]
    done = run_quietly(argv, cwd, environ, GIT_TIMEOUT_S, given=data)
    if done is None or done.returncode != 0:
        return None
    return parse(done.stdout.decode("utf-8", "surrogateescape"))
