"""The secret formats recognised by their shape: private keys, cloud and forge tokens, JWTs,
credentials in URLs.

Each pattern starts with the literal its format starts with (`-----BEGIN `, `gh`, `AKIA`,
`://`…), and its judge checks what a literal prefix cannot: that the token starts a word
and that its body looks generated (judgement.py), so `ghp_` + 36 copies of one letter, a
documentation example or a word is left alone. A private key is found whole, from its
BEGIN line to its END line (or to the last line of key material, when a page cut it
off), whether its lines break for real or as `\\n` inside JSON (a GCP service-account
file's `private_key`). Pure: safe from any thread.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Callable

from qshell.redaction.base import Detector, Finding, Judge, found, starts_word, value
from qshell.redaction.judgement import mixed_random, random_enough, url_password


def _always(kind: str) -> Judge:
    return lambda match, text: found(kind, match)


def _token(kind: str, prefix: int, check: Callable[[str], bool] = random_enough) -> Judge:
    """A token that starts a word and whose body (after `prefix` characters) passes `check`."""

    def judge(match: re.Match[str], text: str) -> tuple[Finding, ...]:
        body = text[match.start() + prefix : match.end()]
        return found(kind if starts_word(text, match.start()) and check(body) else None, match)

    return judge


def _base64_private_key(match: re.Match[str], text: str) -> tuple[Finding, ...]:
    """A base64-encoded PEM block (kubeconfig's `client-key-data`) holding a private key."""
    head = match.group()[:64]
    try:
        decoded = base64.b64decode(head[: len(head) // 4 * 4])
    except (binascii.Error, ValueError):
        return ()
    return found("private-key" if b"PRIVATE KEY" in decoded else None, match)


def _prefixed(kinds: dict[str, tuple[str, int]]) -> Judge:
    """Tokens of several formats in one pattern: the kind and the body's offset by the
    token's start (the longest of `kinds`' keys it starts with); the body must look
    generated and the token start a word."""
    starts = sorted(kinds, key=len, reverse=True)

    def judge(match: re.Match[str], text: str) -> tuple[Finding, ...]:
        token = match.group()
        kind, skip = kinds[next(s for s in starts if token.startswith(s))]
        ok = starts_word(text, match.start()) and random_enough(token[skip:])
        return found(kind if ok else None, match)

    return judge


def _aws_or_google(match: re.Match[str], text: str) -> tuple[Finding, ...]:
    """An AWS access key id, with the secret key beside it in a credentials CSV line, or a
    Google API key (both start with `A`, so one pattern finds them)."""
    start = match.start()
    if not starts_word(text, start):
        return ()
    if match.group("google") is not None:
        return found("google-api-key" if random_enough(match.group()[4:]) else None, match)
    if not random_enough(match.group("aws")[3:], min_distinct=6):
        return ()
    pair = value(match, text, "pair")
    secret = found("aws-secret-key" if mixed_random(pair) else None, match, "pair")
    return (Finding("aws-access-key", start, match.end("aws")), *secret)


def _stripe(match: re.Match[str], text: str) -> tuple[Finding, ...]:
    """`sk_live_…`, `rk_test_…`: the pattern starts at `k_`; the letter before says which."""
    start = match.start() - 1
    if start < 0 or text[start] not in "sr" or not starts_word(text, start):
        return ()
    body = match.group()[8:]
    return (Finding("stripe-key", start, match.end()),) if random_enough(body) else ()


def _openai_or_anthropic(match: re.Match[str], text: str) -> tuple[Finding, ...]:
    kind = "anthropic-key" if match.group().startswith("sk-ant-") else "openai-key"
    body = match.group()[7 if kind == "anthropic-key" else 3 :]
    return found(kind if starts_word(text, match.start()) and random_enough(body) else None, match)


def _url(match: re.Match[str], text: str) -> tuple[Finding, ...]:
    """A password (`://user:password@`), a token as the user (`://ghp_…@`), or a Slack
    webhook's secret path."""
    if match.group("pw") is not None:
        return found("url-password" if url_password(match.group("pw")) else None, match, "pw")
    if match.group("user") is not None:
        return found("url-token" if random_enough(match.group("user")) else None, match, "user")
    return found("slack-webhook", match, "hook")


_PEM_LINE = r"(?:\r?\n|\\n)(?:[ \t]*\d+\t)?(?:[A-Za-z0-9+/=]{16,}|[A-Za-z-]+: [^\n\\]{0,100})"
_URL = (
    r"://(?:[^\s/@:\"'<>]{0,100}:(?P<pw>[^\s/@\"'<>]{1,200})@(?=[\w\[%-])"
    r"|(?P<user>[A-Za-z0-9_-]{20,200})@(?=[\w\[-])"
    r"|hooks\.slack\.com/(?:services|workflows|triggers)/(?P<hook>[\w/-]{20,}))"
)
TOKEN_DETECTORS: tuple[Detector, ...] = (
    Detector(
        re.compile(
            r"-----BEGIN (?P<label>(?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?)-----"
            rf"(?:[\s\S]{{0,16384}}?-----END (?P=label)-----|(?:{_PEM_LINE})*)"
        ),
        _always("private-key"),
    ),
    Detector(re.compile(r"LS0tLS1CRUdJTi[A-Za-z0-9+/]{20,}={0,2}"), _base64_private_key),
    Detector(
        re.compile(
            r"PuTTY-User-Key-File-\d+:[\s\S]{0,16384}?Private-(?:MAC|Hash):[ \t]*[0-9a-fA-F]+"
        ),
        _always("putty-private-key"),
    ),
    Detector(
        re.compile(
            r"A(?:(?P<aws>(?:KIA|SIA|BIA|CCA)[A-Z0-9]{16})(?![A-Za-z0-9])"
            r"(?:[\"']?[ \t]*[,:;|\t][ \t]*[\"']?(?P<pair>[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+=]))?"
            r"|(?P<google>Iza[0-9A-Za-z_-]{35})(?![\w-]))"
        ),
        _aws_or_google,
    ),
    Detector(
        re.compile(
            r"g(?:h[pousr]_[A-Za-z0-9]{36,251}|ithub_pat_[A-Za-z0-9_]{22,242}"
            r"|l(?:pat|dt|ptt|rt|cbt|soat|ft|imt)-[A-Za-z0-9_-]{20,})(?![A-Za-z0-9_])"
        ),
        _prefixed(
            {
                "gh": ("github-token", 4),
                "github_pat_": ("github-token", 11),
                "gl": ("gitlab-token", 0),
            }
        ),
    ),
    Detector(re.compile(r"xox[abposre]-[A-Za-z0-9-]{10,}"), _token("slack-token", 5)),
    Detector(re.compile(r"k_(?:live|test)_[A-Za-z0-9]{16,}"), _stripe),
    Detector(re.compile(r"whsec_[A-Za-z0-9]{24,}"), _token("stripe-key", 6)),
    Detector(
        re.compile(r"sk-(?:ant-|proj-|svcacct-|admin-)?[A-Za-z0-9_-]{32,}"), _openai_or_anthropic
    ),
    Detector(re.compile(r"npm_[A-Za-z0-9]{36}(?![A-Za-z0-9])"), _token("npm-token", 4)),
    Detector(re.compile(r"pypi-Ag[A-Za-z0-9_-]{40,}"), _always("pypi-token")),
    Detector(
        re.compile(r"h(?:f_[A-Za-z0-9]{30,}|v[sbr]\.[A-Za-z0-9_-]{24,})"),
        _prefixed({"hf_": ("huggingface-token", 3), "hv": ("vault-token", 4)}),
    ),
    Detector(
        re.compile(r"eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{16,}"),
        _token("jwt", 0, lambda body: True),
    ),
    Detector(re.compile(_URL), _url),
)
