"""Whether a candidate the detectors matched is a secret: the judgements on its value alone.

A token format (`ghp_…`, `AKIA…`) is judged by how random its body looks (`random_enough`);
a value assigned to a secret-sounding key (`password = …`, `"token": "…"`) by whether it
could be anything but code, a placeholder or a path (`assigned_secret`); a password in a
URL by `url_password`. The rules lean towards leaving ordinary code alone: a bare word
that reads like an identifier, a type name, an expression, an environment lookup or a
template is not a secret, and neither is a documentation placeholder. Pure functions of
their arguments: safe from any thread.
"""

from __future__ import annotations

import math
import re
from collections import Counter

MIN_ASSIGNED_CHARS = 6  # `hunter2` is a password; `abc` is not worth hiding
MIN_WORDLIKE_CHARS = 16  # a value of letters only is a secret only when long and random
MIN_RANDOM_BITS_PER_CHAR = 3.0  # Shannon entropy of a token body, per character
MIN_WORDLIKE_BITS_PER_CHAR = 3.5

# text that marks a value as a stand-in someone writes in documentation or a template
PLACEHOLDER_PARTS = (
    "example",
    "placeholder",
    "changeme",
    "change_me",
    "change-me",
    "your_",
    "your-",
    "yourpass",
    "xxxx",
    "****",
    "...",
    "…",
    "redacted",
    "dummy",
    "replace",
    "fixme",
    "todo",
    "fake",
    "sample",
    "<",
    "${",
    "{{",
    "%s",
    "%(",
)
# whole values that are words of code or configuration, never a secret
PLACEHOLDER_WORDS = frozenset(
    {
        "none",
        "null",
        "nil",
        "true",
        "false",
        "undefined",
        "required",
        "optional",
        "empty",
        "string",
        "bytes",
        "secret",
        "password",
        "passwd",
        "token",
        "default",
        "hidden",
        "masked",
        "unset",
        "prompt",
        "environment",
    }
)
# a bare value that starts with one of these is a reference, an operator, a template or
# markup; a quoted one only with the template and path ones
CODE_STARTS = frozenset("$%&*@!|>.~/\\=:#?^+-")
QUOTED_CODE_STARTS = frozenset("$%~/.")
CODE_CHARS = frozenset("(){}[]<>")
_DOTTED_NAME = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+")
_ENV_NAME = re.compile(r"[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+")
_WORDS = re.compile(r"[A-Za-z]+(?:[_.-]+[A-Za-z]+)*_*")
_FILE_NAME = re.compile(
    r"[\w.-]+\.(?:py|js|ts|json|ya?ml|toml|ini|cfg|conf|txt|md|pem|key|crt|env|sh)"
)


def bits_per_char(text: str) -> float:
    """The Shannon entropy of `text`'s characters, in bits per character."""
    if not text:
        return 0.0
    total = len(text)
    return -sum(n / total * math.log2(n / total) for n in Counter(text).values())


def is_placeholder(value: str) -> bool:
    """A stand-in: a documented placeholder, a template, one character repeated."""
    low = value.lower()
    if low in PLACEHOLDER_WORDS or len(set(low)) <= 2:
        return True
    return any(part in low for part in PLACEHOLDER_PARTS)


def random_enough(body: str, *, min_distinct: int = 8) -> bool:
    """A token body that looks generated: varied characters, no placeholder text."""
    if len(set(body)) < min(min_distinct, len(body)) or is_placeholder(body):
        return False
    return bits_per_char(body) >= MIN_RANDOM_BITS_PER_CHAR


def mixed_random(body: str) -> bool:
    """A base64-like body (an AWS secret key): random, and of upper case, lower case and
    digits alike, so a git SHA or a word is not one."""
    classes = (
        any(c.isupper() for c in body),
        any(c.islower() for c in body),
        any(c.isdigit() for c in body),
    )
    return all(classes) and random_enough(body)


def _code_like(value: str, *, quoted: bool) -> bool:
    """An expression, a reference, a type or a name of something else, not a literal."""
    starts = QUOTED_CODE_STARTS if quoted else CODE_STARTS
    if value[0] in starts or any(c in CODE_CHARS for c in value):
        return True
    if _DOTTED_NAME.fullmatch(value) or _ENV_NAME.fullmatch(value):
        return True
    if _FILE_NAME.fullmatch(value) or "://" in value or ("@" in value and "/" in value):
        return True  # a file, a URL, or the rest of one (`token:ghp_…@host/path`)
    return value.isdigit()


def _wordlike(value: str) -> bool:
    """Words without digits, maybe joined (`my_token`, `tokenValue`, `bench-key`)."""
    return _WORDS.fullmatch(value) is not None


def assigned_secret(value: str, *, quoted: bool) -> bool:
    """The value of a secret-sounding key that is worth hiding: long enough, not code, not
    a placeholder, and either not shaped like a name or random like a generated key.
    A value shaped like an identifier needs a digit as well: in code it is a variable far
    more often than a password."""
    if len(value) < MIN_ASSIGNED_CHARS or any(c.isspace() for c in value):
        return False
    if _code_like(value, quoted=quoted) or is_placeholder(value):
        return False
    if _wordlike(value):
        mixed_case = value != value.lower() and value != value.upper()
        return (
            len(value) >= MIN_WORDLIKE_CHARS
            and mixed_case
            and bits_per_char(value) >= MIN_WORDLIKE_BITS_PER_CHAR
        )
    return True


def url_password(value: str) -> bool:
    """The password part of `scheme://user:password@host`: not a placeholder or template."""
    if len(value) < 3 or value[0] in "$%{<*" or is_placeholder(value):
        return False
    return value.lower() not in {"pass", "pwd", "pw"}
