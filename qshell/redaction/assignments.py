"""Secrets recognised by their name: values assigned to secret-sounding keys, in any form.

`password = …`, `"api_key": "…"`, `token: …`, `DB_PASSWORD=…`, `<password>…</password>`,
.NET's `<add key="DbPassword" value="…"/>` and connection strings' `Password=…;`, git-config's
`smtpPass = …` and `oauthtoken = …` (and `git config --get-regexp`'s `sendemail.smtppass …`,
`hub.oauthtoken …` lines), npmrc's `_auth=…`, kubeconfig's `client-key-data: …`, `.netrc`'s
`password …`, an option's `--password …`, and `Authorization: Bearer …` / `Basic …` /
`token …`. Each pattern runs on the lower-cased text and starts with its keyword (`key`,
`token`, `pass`, …), which the key must end with, followed by a separator (`=`, `:`, `:=`,
`=>`) and a value in double, single or no quotes, or by an XML element's text — or, for a
line that is a git key and its value, a space; the judge then checks the key's start (not
`bypass`, not `monkey`) and the value (judgement.py: not code, not a placeholder, not a
name). Password and secret keys are strong: where their value stands alone as a literal
(quoted, an XML element's, a bare one that ends its line or its connection-string field,
or an environment variable's or an option's `=` value), a plain word is a secret too;
`token` and `key` keep to values that look generated. Pure: safe from any thread.
"""

from __future__ import annotations

import base64
import binascii
import re

from qshell.redaction.base import (
    VALUE,
    WORD_CHARS,
    Detector,
    Finding,
    Judge,
    found,
    narrowed,
    starts_word,
    value,
)
from qshell.redaction.judgement import assigned_secret, mixed_random, random_enough

SEPARATOR = r"[\"']?[ \t]*(?:=>|:=|=(?![=~>])|:(?![:=]))[ \t]*"
XML_TEXT = r">(?P<xv>[^<\n]{1,300})</"  # `<password>…</password>`: the keyword ends the tag
MIN_BEARER_CHARS = 16
MAX_KEY_CHARS = 64
MIN_AZURE_KEY_CHARS = 43  # base64 of 32 bytes (a SAS key); a storage account's is of 64
# what may come before `key` for it to name a secret (`api_key`, `secret_access_key`)
_KEY_OWNER = re.compile(
    r"(?:api|access|private|auth|signing|encryption|master|client|app|secret"
    r"|account|sharedaccess)[_.-]?\Z"
)
_AZURE_OWNERS = ("account", "sharedaccess")  # `AccountKey=…;`: only an Azure key's shape
_AWS_SECRET = re.compile(r"aws[_.-]?secret[_.-]?(?:access[_.-]?)?\Z")
_HEX_40 = re.compile(r"[0-9a-f]{40}")  # a GCP service account's `private_key_id`
# prefixes that make a lower-case `pass` a password key (git's `smtppass`)
_PASS_OWNERS = ("smtp", "db", "ldap", "mysql", "redis", "sql", "root", "admin", "user", "imap")
_NETRC_BEFORE = re.compile(r"(?:^|\b(?:login|account)[ \t]+\S+)[ \t]*\Z")
# what starts a `git config --get-regexp` line before the keyword: `sendemail.smtp`, `hub.oauth`,
# `credential.https://host.` (a section, maybe a subsection, and the start of the name)
_GIT_KEY_BEFORE = re.compile(r"[a-z][a-z0-9-]*\.(?:\S*\.)?[a-z0-9-]*", re.IGNORECASE)
_HEADER_BEFORE = re.compile(r"\bauthorization:[ \t]*\Z", re.IGNORECASE)  # `Authorization: token …`
_XML_OPEN = re.compile(r"<[\w.:-]*\Z")  # `<db_password>`, not `</password>`
_NEXT_FIELD = re.compile(r";[ \t]*[A-Za-z][\w ]{0,40}=")  # `;Database=` after a password
_TYPED = re.compile(r"[ \t]*(?:\|[ \t]*None\b|=[ \t])")
_KEY_CHARS = WORD_CHARS | {".", "-"}
_VALUE_GROUPS = ("dq", "sq", "xv", "bare")
_FIELD_ENDS = ("", ";", "\n", "\r", '"', "'")


def _key_start(text: str, end: int) -> int:
    """Where the key that ends with the keyword starts (`DB_PASSWORD`, `--password`)."""
    start, stop = end, max(0, end - MAX_KEY_CHARS)
    while start > stop and text[start - 1] in _KEY_CHARS:
        start -= 1
    return start


def _stands_alone(match: re.Match[str], text: str, end: int, cut: bool) -> bool:
    """A bare value that is a literal, not a name in code: a connection string's or a
    query's field (`;Password=…;`), an environment variable's (`PGPASSWORD=… psql`) or an
    option's (`--password=…`), or one that ends its line (`password: …`, `DB_PASSWORD=…`;
    not `pass = username + …`, `secret: optional string`, `f(password=pw, …)`)."""
    key_start = _key_start(text, match.start())
    field = text[max(0, key_start - 8) : key_start].rstrip(" \t")[-1:] in (";", "&", "?")
    ends = text[end : end + 1]
    if cut or ends == "&" or (field and ends in _FIELD_ENDS):
        return True
    if text.startswith("=", match.end("word")) and (
        text[key_start : match.end("word")].isupper() or text.startswith("-", key_start)
    ):
        return True
    line_end = text.find("\n", end)
    rest = text[end : len(text) if line_end < 0 else line_end].strip()
    return not rest or rest.startswith(("#", "//"))


def _value_span(match: re.Match[str], text: str, *, strong: bool = False) -> tuple[int, int] | None:
    """Where the assigned value is, when it is worth hiding (a bare one ends before a
    connection string's next field; `strong`: a password or secret key's)."""
    group = match.lastgroup  # the value's group closes last: `word` closes before it
    if group not in _VALUE_GROUPS:
        return None
    start, end = match.span(group)
    if group == "xv" and not _XML_OPEN.search(text, max(0, match.start() - 64), match.start()):
        return None
    if group == "bare" and _TYPED.match(text, end):
        return None  # an annotation: `password: SecretType | None = None`
    field = _NEXT_FIELD.search(text, start, end) if group == "bare" else None
    cut = field is not None
    if field is not None:
        end = field.start()
    strong = strong and (group != "bare" or _stands_alone(match, text, end, cut))
    ok = assigned_secret(text[start:end], quoted=group != "bare", strong=strong)
    return (start, end) if ok and start < end else None


def _hidden(kind: str, span: tuple[int, int] | None) -> tuple[Finding, ...]:
    return (Finding(kind, *span),) if span else ()


def _short_key(text: str, start: int) -> bool:
    """`pass`, `pwd` or `auth` name a key at a word's start, in camelCase (`smtpPass`) or
    after a known owner (`smtppass`): not `bypass`, not `oauth`."""
    if start == 0 or not text[start - 1].isalpha():
        return True
    if text[start].isupper() and text[start - 1].islower():
        return True
    return text[max(0, start - 5) : start].lower().endswith(_PASS_OWNERS)


def _keyword(kind: str, *, short: bool = False, strong: bool = False) -> Judge:
    """A keyword's value, of `kind`; a `short` keyword must start the key (`_short_key`)."""

    def judge(match: re.Match[str], text: str) -> tuple[Finding, ...]:
        if short and not _short_key(text, match.start()):
            return ()
        return _hidden(kind, _value_span(match, text, strong=strong))

    return judge


def _line_before(match: re.Match[str], text: str) -> str:
    return text[text.rfind("\n", 0, match.start()) + 1 : match.start()]


def _git_listed(match: re.Match[str], text: str, group: str) -> bool:
    """A `git config --get-regexp` line: a git key ending in the keyword, one space, and
    a value that ends the line."""
    end = match.end(group)
    ends_line = end == len(text) or text[end] in "\r\n"
    return ends_line and _GIT_KEY_BEFORE.fullmatch(_line_before(match, text)) is not None


def _listed(kind: str, match: re.Match[str], text: str, *, strong: bool) -> tuple[Finding, ...]:
    """A value after a space: a git key's listed one (strong when the key is), or an
    option's (`--password …`: judged like a token, as prose says `--password option`)."""
    if not _git_listed(match, text, "lv"):
        if not text.startswith("--", _key_start(text, match.start())):
            return ()
        strong = False
    ok = assigned_secret(value(match, text, "lv"), quoted=False, strong=strong)
    return found(kind if ok else None, match, "lv")


def _password(match: re.Match[str], text: str) -> tuple[Finding, ...]:
    """`password = …` and the like, `.netrc`'s `login bob password …`, or a git key's
    listed value (`sendemail.smtppass …`): a strong key."""
    word = match.group("word")
    if word in ("pass", "pwd") and not _short_key(text, match.start()):
        return ()
    if match.group("lv") is None:
        return _hidden("password", _value_span(match, text, strong=True))
    if word == "password" and _NETRC_BEFORE.search(_line_before(match, text)):
        ok = assigned_secret(value(match, text, "lv"), quoted=False, strong=True)
        return found("password" if ok else None, match, "lv")
    return _listed("password", match, text, strong=True)


def _listed_keyword(kind: str, *, strong: bool = False) -> Judge:
    """`_keyword(kind)`, or a value after a space (`_listed`), or — for a token — an
    `Authorization: token …` header's."""
    assigned = _keyword(kind, strong=strong)

    def judge(match: re.Match[str], text: str) -> tuple[Finding, ...]:
        if match.group("lv") is None:
            return assigned(match, text)
        if kind == "token" and _HEADER_BEFORE.search(_line_before(match, text)):
            secret = value(match, text, "lv")
            ok = len(secret) >= MIN_BEARER_CHARS and any(c.isdigit() for c in secret)
            return found("bearer-token" if ok and random_enough(secret) else None, match, "lv")
        return _listed(kind, match, text, strong=strong)

    return judge


def _key_kind(before: str, owner: str, secret: str, suffix: str) -> str | None:
    """What a `key` after `owner` holds: an AWS secret key, an Azure one, a GCP service
    account's private key id, a secret, a private key or an API key."""
    if suffix.endswith("id"):
        private = owner.startswith("private") and _HEX_40.fullmatch(secret)
        return "private-key-id" if private else None
    if owner.startswith(_AZURE_OWNERS):
        body = secret.rstrip("=")
        azure = len(secret) >= MIN_AZURE_KEY_CHARS and secret.endswith("=")
        return "azure-key" if azure and mixed_random(body) else None
    if _AWS_SECRET.search(before) and len(secret) == 40 and mixed_random(secret):
        return "aws-secret-key"
    if "secret" in before[-16:]:
        return "secret"
    return "private-key" if owner.startswith("private") else "api-key"


def _key(match: re.Match[str], text: str) -> tuple[Finding, ...]:
    """`api_key`, `secret_access_key`, `client-key-data`, `AccountKey`, `private_key_id`…:
    `key` after a known owner."""
    before = match.string[max(0, match.start() - 24) : match.start()]
    owner = _KEY_OWNER.search(before)
    span = _value_span(match, text) if owner else None
    if owner is None or span is None:
        return ()
    kind = _key_kind(before, owner.group(), text[span[0] : span[1]], match.group("word"))
    return _hidden(kind, span) if kind else ()


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
    """`keyword`, then a separator and a value or an XML element's text; `listed`: or a
    space and a word (`lv`)."""
    other = r"|(?P<gap>[ \t]+)(?P<lv>[^\s]{1,300})" if listed else ""
    return re.compile(f"(?P<word>{keyword})(?:{SEPARATOR}{VALUE}|{XML_TEXT}{other})")


_BY_NAME: tuple[Detector, ...] = (
    Detector(_assignment(r"key(?:[_-]?(?:data|id))?"), _key, folded=True),
    Detector(_assignment("token", listed=True), _listed_keyword("token"), folded=True),
    Detector(
        _assignment(r"p(?:ass(?:word|wd|phrase|code)?|wd)", listed=True), _password, folded=True
    ),
    Detector(
        _assignment("secret", listed=True),
        _listed_keyword("secret", strong=True),
        folded=True,
    ),
    Detector(_assignment("auth"), _keyword("auth-token", short=True), folded=True),
    Detector(_assignment("credentials?"), _keyword("credential"), folded=True),
    Detector(
        re.compile(r"b(?P<scheme>earer|asic)[ \t]+(?P<secret>[a-z0-9._~+/-]{8,}=*)"),
        _scheme,
        folded=True,
    ),
)


def _setting(match: re.Match[str], text: str) -> tuple[Finding, ...]:
    """.NET's `<add key="DbPassword" value="…"/>`: the value judged as the assignment
    `DbPassword="…"` would be, by the detectors above (so a connection string's
    `Password=…;` inside it is found too)."""
    name = value(match, text, "name")
    start, end = match.span("dq")
    field = f'{name}="{text[start:end]}"'
    shift = start - len(name) - 2
    narrow = narrowed(field)
    folded = narrow.lower()
    return tuple(
        Finding(f.kind, f.start + shift, f.end + shift)
        for detector in _BY_NAME
        for f in detector.findings(field, narrow, folded)
        if f.start + shift >= start
    )


ASSIGNMENT_DETECTORS: tuple[Detector, ...] = (
    *_BY_NAME,
    Detector(
        re.compile(r'<add key="(?P<name>[^"<>\n]{1,100})"[ \t]+value="(?P<dq>[^"\n]{1,300})"'),
        _setting,
    ),
)
