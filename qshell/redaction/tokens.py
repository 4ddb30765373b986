"""The secret formats recognised by their shape: private keys, cloud, forge and service
tokens (SendGrid, Twilio, Mailgun, Shopify, DigitalOcean, Databricks…), JWTs, credentials
in URLs.

Each pattern starts with the literal its format starts with (`-----BEGIN `, `gh`, `AKIA`,
`SG.`, `dapi`, `://`…), or a letter or two into it where that letter is rarer (`k_` of
`sk_live_`, `hp` of `shpat_`, `J` of a JWT's `eyJ`): a pattern costs about 0.03 ms per
100 kB even where it finds nothing, and more the commoner its first letter, so formats
that share a first letter share a pattern. Its judge checks what a literal prefix cannot:
that the token starts a word and that its body looks generated (judgement.py), so `ghp_` +
36 copies of one letter, a documentation example or a word is left alone. A private key is
found whole, from its BEGIN line to its END line (or to the last line of key material, when
a page cut it off), whether its lines break for real or as `\\n` inside JSON (a GCP
service-account file's `private_key`; its `private_key_id` is assignments.py's). Pure:
safe from any thread.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Callable

from qshell.redaction.base import Detector, Finding, Judge, found, starts_word, value
from qshell.redaction.judgement import explicit_password, mixed_random, random_enough


def _always(kind: str) -> Judge:
    return lambda match, text: found(kind, match)


def _token(kind: str, prefix: int, check: Callable[[str], bool] = random_enough) -> Judge:
    """A token that starts a word and whose body (after `prefix` characters) passes `check`."""

    def judge(match: re.Match[str], text: str) -> tuple[Finding, ...]:
        body = text[match.start() + prefix : match.end()]
        return found(kind if starts_word(text, match.start()) and check(body) else None, match)

    return judge


# a line of a key's body as a command may leave it: base64, maybe prefixed (`+`, `cat -n`)
_BODY_LINE = re.compile(r"[ \t+-]*(?:\d+\t)?[A-Za-z0-9+/=]{16,}[ \t]*")
_LINE_PREFIX = re.compile(r"[ \t+-]*(?:\d+\t)?")
MAX_BODY_LINES = 400  # a 16 kB key at 40 characters a line


def _key_before_end(match: re.Match[str], text: str) -> tuple[Finding, ...]:
    """The END line of a private key whose BEGIN line is gone (`tail -n +2 key.pem`): the
    finding reaches back over the body lines above it."""
    start = match.start()
    line_start = text.rfind("\n", 0, start) + 1
    if _LINE_PREFIX.fullmatch(text, line_start, start):  # `+-----END …` in a patch
        start = line_start
    for _ in range(MAX_BODY_LINES):
        if start == 0 or text[start - 1] != "\n":
            break
        line_start = text.rfind("\n", 0, start - 1) + 1
        if not _BODY_LINE.fullmatch(text, line_start, start - 1):
            break
        start = line_start
    return (Finding("private-key", start, match.end()),)


def _base64_private_key(match: re.Match[str], text: str) -> tuple[Finding, ...]:
    """A base64-encoded PEM block (kubeconfig's `client-key-data`) holding a private key."""
    head = match.group()[:64]
    try:
        decoded = base64.b64decode(head[: len(head) // 4 * 4])
    except (binascii.Error, ValueError):
        return ()
    return found("private-key" if b"PRIVATE KEY" in decoded else None, match)


def _prefixed(
    kinds: dict[str, tuple[str, int]],
    leads: dict[str, tuple[str, ...]] | None = None,
    check: Callable[[str], bool] = random_enough,
) -> Judge:
    """Tokens of several formats in one pattern: the kind and the body's offset by the
    match's start (the longest of `kinds`' keys the match starts with); the body must pass
    `check` and the token start a word. `leads`: for a format whose pattern starts a few
    letters into its token, what may come first — a pattern costs by how often its first
    letter occurs, so `sk-…` is matched from `k-` (beside `key-…`), `shpat_…` from `hp`
    (beside `hf_…`), a JWT's `eyJ…` from `J`."""
    starts = sorted(kinds, key=len, reverse=True)
    before = leads or {}

    def judge(match: re.Match[str], text: str) -> tuple[Finding, ...]:
        token, start = match.group(), match.start()
        prefix = next(s for s in starts if token.startswith(s))
        kind, skip = kinds[prefix]
        if prefix in before:
            lead = next((x for x in before[prefix] if text.startswith(x, start - len(x))), None)
            if lead is None or start < len(lead):
                return ()
            start -= len(lead)
        ok = starts_word(text, start) and check(token[skip:])
        return (Finding(kind, start, match.end()),) if ok else ()

    return judge


def _hex_random(body: str) -> bool:
    """A hex body that looks generated: random, of letters and digits alike."""
    return any(c.isdigit() for c in body) and any(c.isalpha() for c in body) and random_enough(body)


def _aws_google_or_twilio(match: re.Match[str], text: str) -> tuple[Finding, ...]:
    """An AWS access key id, with the secret key beside it in a credentials CSV line, a
    Google API key, or a Twilio account SID's auth token beside it (`AC…, <32 hex>`: the SID
    names the account, the token is the secret). All start with `A`: one pattern."""
    start = match.start()
    if not starts_word(text, start):
        return ()
    if match.group("google") is not None:
        return found("google-api-key" if random_enough(match.group()[4:]) else None, match)
    if match.group("sid") is not None:
        ok = _hex_random(match.group("sid")[1:]) and _hex_random(match.group("auth"))
        return found("twilio-auth-token" if ok else None, match, "auth")
    if not random_enough(match.group("aws")[3:], min_distinct=6):
        return ()
    pair = value(match, text, "pair")
    secret = found("aws-secret-key" if mixed_random(pair) else None, match, "pair")
    return (Finding("aws-access-key", start, match.end("aws")), *secret)


def _url(match: re.Match[str], text: str) -> tuple[Finding, ...]:
    """A password (`://user:password@`), a token as the user (`://ghp_…@`), or a Slack
    webhook's secret path."""
    if match.group("pw") is not None:
        ok = explicit_password(value(match, text, "pw"))
        return found("url-password" if ok else None, match, "pw")
    if match.group("user") is not None:
        ok = random_enough(value(match, text, "user"))
        return found("url-token" if ok else None, match, "user")
    return found("slack-webhook", match, "hook")


def _twilio_or_sendgrid(match: re.Match[str], text: str) -> tuple[Finding, ...]:
    """A Twilio API key secret's sid (`SK` + 32 hex) or a SendGrid key (`SG.<22>.<43>`)."""
    twilio = match.group().startswith("SK")
    kind = "twilio-api-key" if twilio else "sendgrid-key"
    body = match.group()[2:] if twilio else match.group()[3:].replace(".", "")
    ok = starts_word(text, match.start()) and (_hex_random if twilio else random_enough)(body)
    return found(kind if ok else None, match)


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
    Detector(re.compile(r"-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----"), _key_before_end),
    Detector(re.compile(r"LS0tLS1CRUdJTi[A-Za-z0-9+/]{20,}={0,2}"), _base64_private_key),
    Detector(
        re.compile(
            r"PuTTY-User-Key-File-\d+:[ \t]*[\w@.-]+\r?\n"
            r"[\s\S]{0,16384}?Private-(?:MAC|Hash):[ \t]*[0-9a-fA-F]+"
        ),
        _always("putty-private-key"),
    ),
    Detector(
        re.compile(
            r"A(?:(?P<aws>(?:KIA|SIA|BIA|CCA)[A-Z0-9]{16})(?![A-Za-z0-9])"
            r"(?:[\"']?[ \t]*[,:;|\t][ \t]*[\"']?(?P<pair>[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+=]))?"
            r"|(?P<google>Iza[0-9A-Za-z_-]{35})(?![\w-])"
            r"|(?P<sid>C[0-9a-f]{32})[\"']?[ \t]*[,:][ \t]*[\"']?(?P<auth>[0-9a-f]{32})(?![\w-]))"
        ),
        _aws_google_or_twilio,
    ),
    Detector(
        re.compile(
            r"S(?:K[0-9a-fA-F]{32}|G\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43})(?![A-Za-z0-9_-])"
        ),
        _twilio_or_sendgrid,
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
    Detector(
        re.compile(
            r"k(?:_(?:live|test)_[A-Za-z0-9]{16,}|ey-[0-9a-zA-Z]{32}(?![A-Za-z0-9])"
            r"|-(?:ant-|proj-|svcacct-|admin-)?[A-Za-z0-9_-]{32,})"
        ),
        _prefixed(
            {
                "k_": ("stripe-key", 7),
                "key-": ("mailgun-key", 4),
                "k-ant-": ("anthropic-key", 6),
                "k-": ("openai-key", 2),
            },
            {"k_": ("s", "r"), "k-ant-": ("s",), "k-": ("s",)},
        ),
    ),
    Detector(re.compile(r"whsec_[A-Za-z0-9]{24,}"), _token("stripe-key", 6)),
    Detector(re.compile(r"npm_[A-Za-z0-9]{36}(?![A-Za-z0-9])"), _token("npm-token", 4)),
    Detector(
        re.compile(r"d(?:o[opr]_v1_[a-f0-9]{64}|api[a-f0-9]{32}(?:-\d{1,2})?)(?![A-Za-z0-9])"),
        _prefixed({"do": ("digitalocean-token", 7), "dapi": ("databricks-token", 4)}),
    ),
    Detector(re.compile(r"pypi-Ag[A-Za-z0-9_-]{40,}"), _always("pypi-token")),
    Detector(
        re.compile(
            r"h(?:f_[A-Za-z0-9]{30,}|v[sbr]\.[A-Za-z0-9_-]{24,}"
            r"|p(?:at|ss|ca|pa)_[a-fA-F0-9]{32}(?![A-Za-z0-9]))"
        ),
        _prefixed(
            {"hf_": ("huggingface-token", 3), "hv": ("vault-token", 4), "hp": ("shopify-token", 5)},
            {"hp": ("s",)},
        ),
    ),
    Detector(
        re.compile(r"J[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{16,}"),
        _prefixed({"J": ("jwt", 0)}, {"J": ("ey",)}, lambda body: True),
    ),
    Detector(re.compile(_URL), _url),
)
