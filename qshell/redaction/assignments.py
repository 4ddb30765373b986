"""Secrets recognised by their name: values assigned to secret-sounding keys, in any form.

`password = …`, `"api_key": "…"`, `token: …`, `DB_PASSWORD=…`, git-config's `smtpPass = …`
and `oauthtoken = …` (and `git config --get-regexp`'s `sendemail.smtppass …`,
`hub.oauthtoken …` lines), npmrc's `_auth=…`, kubeconfig's `client-key-data: …`, `.netrc`'s
`password …`, and `Authorization: Bearer …` / `Basic …` / `token …`. Each pattern runs on the
lower-cased text and starts with its keyword (`key`, `token`, `pass`, …), which the key
must end with, followed by a separator (`=`, `:`, `:=`, `=>`) and a value in double, single
or no quotes — or, for a line that is a git key and its value, a space; the judge then
checks the key's start (not `bypass`, not `monkey`) and the value (judgement.py: not code,
not a placeholder, not a name). Pure: safe from any thread.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Callable

from qshell.redaction.base import WORD_CHARS, Detector, Finding, found, starts_word, value
from qshell.redaction.judgement import assigned_secret, mixed_random, random_enough

# a value: double-quoted, single-quoted or bare; a bare one ends before a backslash (in
# source code that is an escape: `"TOKEN=x\\n"`) and loses trailing `,` and `;`
VALUE = (
    r"(?:\"(?P<dq>(?:[^\"\\\n]|\\.){1,300})\"|'(?P<sq>(?:[^'\\\n]|\\.){1,300})'"
    r"|(?P<bare>[^\s\"'`\\]{1,300}?)[,;]*(?![^\s\"'`\\]))"
)
SEPARATOR = r"[\"']?[ \t]*(?:=>|:=|=(?![=~>])|:(?![:=]))[ \t]*"
MIN_BEARER_CHARS = 16
# what may come before `key` for it to name a secret (`api_key`, `secret_access_key`)
_KEY_OWNER = re.compile(
    r"(?:api|access|private|auth|signing|encryption|master|client|app|secret)[_.-]?\Z"
)
_AWS_SECRET = re.compile(r"aws[_.-]?secret[_.-]?(?:access[_.-]?)?\Z")
# prefixes that make a lower-case `pass` a password key (git's `smtppass`)
_PASS_OWNERS = ("smtp", "db", "ldap", "mysql", "redis", "sql", "root", "admin", "user", "imap")
_NETRC_BEFORE = re.compile(r"(?:^|\b(?:login|account)[ \t]+\S+)[ \t]*\Z")
# what starts a `git config --get-regexp` line before the keyword: `sendemail.smtp`, `hub.oauth`,
# `credential.https://host.` (a section, maybe a subsection, and the start of the name)
_GIT_KEY_BEFORE = re.compile(r"[a-z][a-z0-9-]*\.(?:\S*\.)?[a-z0-9-]*", re.IGNORECASE)
_HEADER_BEFORE = re.compile(r"\bauthorization:[ \t]*\Z", re.IGNORECASE)  # `Authorization: token …`


def _assigned(match: re.Match[str], text: str) -> tuple[str, str] | None:
    """The value group that matched and the value, when it is worth hiding."""
    group = next((g for g in ("dq", "sq", "bare") if match.group(g) is not None), None)
    if group is None:
        return None
    secret = value(match, text, group)
    return (group, secret) if assigned_secret(secret, quoted=group != "bare") else None


def _short_key(text: str, start: int) -> bool:
    """`pass`, `pwd` or `auth` name a key at a word's start, in camelCase (`smtpPass`) or
    after a known owner (`smtppass`): not `bypass`, not `oauth`."""
    if start == 0 or not text[start - 1].isalpha():
        return True
    if text[start].isupper() and text[start - 1].islower():
        return True
    return text[max(0, start - 5) : start].lower().endswith(_PASS_OWNERS)


def _keyword(
    kind: str, *, short: bool = False
) -> Callable[[re.Match[str], str], tuple[Finding, ...]]:
    """A keyword's value, of `kind`; a `short` keyword must start the key (`_short_key`)."""

    def judge(match: re.Match[str], text: str) -> tuple[Finding, ...]:
        if short and not _short_key(text, match.start()):
            return ()
        hit = _assigned(match, text)
        return found(kind, match, hit[0]) if hit else ()

    return judge


def _line_before(match: re.Match[str], text: str) -> str:
    return text[text.rfind("\n", 0, match.start()) + 1 : match.start()]


def _git_listed(match: re.Match[str], text: str, group: str) -> bool:
    """A `git config --get-regexp` line: a git key ending in the keyword, one space, and
    a value that ends the line."""
    end = match.end(group)
    ends_line = end == len(text) or text[end] in "\r\n"
    return ends_line and _GIT_KEY_BEFORE.fullmatch(_line_before(match, text)) is not None


def _password(match: re.Match[str], text: str) -> tuple[Finding, ...]:
    """`password = …` and the like, `.netrc`'s `login bob password …`, or a git key's
    listed value (`sendemail.smtppass …`)."""
    word = match.group("word")
    if word in ("pass", "pwd") and not _short_key(text, match.start()):
        return ()
    if match.group("netrc") is None:
        hit = _assigned(match, text)
        return found("password", match, hit[0]) if hit else ()
    netrc = word == "password" and _NETRC_BEFORE.search(_line_before(match, text))
    if not (netrc or _git_listed(match, text, "nv")):
        return ()
    ok = assigned_secret(value(match, text, "nv"), quoted=False)
    return found("password" if ok else None, match, "nv")


def _listed_keyword(kind: str) -> Callable[[re.Match[str], str], tuple[Finding, ...]]:
    """`_keyword(kind)`, or a git key's listed value (`hub.oauthtoken …`), or — for a
    token — an `Authorization: token …` header's."""
    assigned = _keyword(kind)

    def judge(match: re.Match[str], text: str) -> tuple[Finding, ...]:
        if match.group("lv") is None:
            return assigned(match, text)
        secret = value(match, text, "lv")
        if kind == "token" and _HEADER_BEFORE.search(_line_before(match, text)):
            ok = len(secret) >= MIN_BEARER_CHARS and any(c.isdigit() for c in secret)
            return found("bearer-token" if ok and random_enough(secret) else None, match, "lv")
        if not _git_listed(match, text, "lv"):
            return ()
        return found(kind if assigned_secret(secret, quoted=False) else None, match, "lv")

    return judge


def _key(match: re.Match[str], text: str) -> tuple[Finding, ...]:
    """`api_key`, `secret_access_key`, `client-key-data`…: `key` after a known owner."""
    before = match.string[max(0, match.start() - 24) : match.start()]
    owner = _KEY_OWNER.search(before)
    hit = _assigned(match, text) if owner else None
    if hit is None:
        return ()
    group, secret = hit
    if _AWS_SECRET.search(before) and len(secret) == 40 and mixed_random(secret):
        kind = "aws-secret-key"
    elif "secret" in before[-16:]:
        kind = "secret"
    else:
        kind = "private-key" if before.endswith(("private", "private_", "private-")) else "api-key"
    return found(kind, match, group)


def _scheme(match: re.Match[str], text: str) -> tuple[Finding, ...]:
    """`Bearer <token>`, or `Basic <base64 of user:password>`."""
    if not starts_word(text, match.start(), WORD_CHARS):
        return ()
    token = value(match, text)
    if match.group("scheme") == "earer":
        ok = len(token) >= MIN_BEARER_CHARS and any(c.isdigit() for c in token)
        ok = ok and random_enough(token)
        return found("bearer-token" if ok else None, match)
    try:
        decoded = base64.b64decode(token + "=" * (-len(token) % 4), validate=True)
    except (binascii.Error, ValueError):
        return ()
    return found("basic-auth" if b":" in decoded and decoded.isascii() else None, match)


def _assignment(keyword: str, *, listed: bool = False) -> re.Pattern[str]:
    """`keyword`, a separator and a value; `listed`: or a space and a word (`lv`)."""
    other = r"|(?P<gap>[ \t]+)(?P<lv>[^\s]{1,300})" if listed else ""
    return re.compile(f"{keyword}(?:{SEPARATOR}{VALUE}{other})")


ASSIGNMENT_DETECTORS: tuple[Detector, ...] = (
    Detector(_assignment(r"key(?:[_-]?data)?"), _key, folded=True),
    Detector(_assignment("token", listed=True), _listed_keyword("token"), folded=True),
    Detector(
        re.compile(
            r"(?P<word>p(?:ass(?:word|wd|phrase|code)?|wd))"
            rf"(?:{SEPARATOR}{VALUE}|(?P<netrc>[ \t]+)(?P<nv>[^\s]+))"
        ),
        _password,
        folded=True,
    ),
    Detector(_assignment("secret", listed=True), _listed_keyword("secret"), folded=True),
    Detector(_assignment("auth"), _keyword("auth-token", short=True), folded=True),
    Detector(_assignment("credentials?"), _keyword("credential"), folded=True),
    Detector(
        re.compile(r"b(?P<scheme>earer|asic)[ \t]+(?P<secret>[a-z0-9._~+/-]{8,}=*)"),
        _scheme,
        folded=True,
    ),
)
