"""Whether a candidate the detectors matched is a secret: the judgements on its value alone.

A token format (`ghp_…`, `AKIA…`) is judged by how random its body looks (`random_enough`);
a value assigned to a secret-sounding key (`password = …`, `"token": "…"`) by whether it
could be anything but code, a placeholder or a path (`assigned_secret`); a password where
only a password can be (in a URL, after `mysql -p`) by `explicit_password`. The rules lean
towards leaving ordinary code alone: a bare word that reads like an identifier, a type
name, an expression, an environment lookup or a template is not a secret, and neither is a
documentation placeholder. Under a strong key (`password`, `secret`), where the value
stands alone as a literal, a plain lower-case word (`correcthorsebattery`) or a
passphrase of lower-case words is one too — people choose those; a label
(`"Password"`, `"Enter your password"`) or a name with the key's word in it is not. Pure
functions of their arguments: safe from any thread.
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
        "boolean",
        "number",
        "object",
        "unknown",
        "integer",
        "invalid",
        "missing",
        "incorrect",
    }
)
# parts that make a plain word a name: of the key (`mypassword`, `clientsecret`: a label or
# a reference to the secret) or of a variable in code (`username`, `plaintext`, `hashed`)
NAME_PARTS = ("pass", "pwd", "secret", "user", "name", "value", "field", "input", "hash", "text")
# words of prose and labels that a chosen passphrase does not hold
PROSE_WORDS = frozenset(
    {"the", "and", "for", "you", "your", "are", "not", "with", "this", "that", "from", "will"}
    | {"must", "can", "has", "have", "was", "all", "any", "use", "used", "its", "our"}
    | {"enter", "please", "new", "old", "confirm"}
)
MIN_PASSPHRASE_WORDS = 3
# a bare value that starts with one of these is a reference, an operator, a template or
# markup; a quoted one only with the template and path ones
CODE_STARTS = frozenset("$%&*@!|>.~/\\=:#?^+-")
QUOTED_CODE_STARTS = frozenset("$%~/.")
CODE_CHARS = frozenset("(){}[]<>")
_PLACEHOLDER = re.compile("|".join(map(re.escape, PLACEHOLDER_PARTS)))
_DOTTED_NAME = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+")
_ENV_NAME = re.compile(r"[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+")
_WORDS = re.compile(r"[^\W\d_]+(?:[_.-]+[^\W\d_]+)*_*")  # letters of any script
_PASSPHRASE_WORD = re.compile(r"[a-z]{3,}")
_FILE_NAME = re.compile(
    r"[\w.-]+\.(?:py|js|ts|json|ya?ml|toml|ini|cfg|conf|txt|md|pem|key|crt|env|sh)"
)


# a value made only of runs everyone types as a stand-in: `abc`, `xyz`, `123…`, `qwerty`
_RUNS = re.compile(r"(?:abc(?:def?)?|xyz|qwerty|asdf|1234?5?6?7?8?9?0?|0123|foo|bar|baz)+")


def bits_per_char(text: str) -> float:
    """The Shannon entropy of `text`'s characters, in bits per character."""
    if not text:
        return 0.0
    total = len(text)
    return -sum(n / total * math.log2(n / total) for n in Counter(text).values())


def is_placeholder(value: str) -> bool:
    """A stand-in: a documented placeholder, a template, one character repeated, or a run
    of the keyboard or the alphabet (`abc123`, `123456`, `qwerty`)."""
    low = value.lower()
    if low in PLACEHOLDER_WORDS or len(set(low)) <= 2:
        return True
    if _RUNS.fullmatch(low):
        return True
    return _PLACEHOLDER.search(low) is not None


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
    value = value.lstrip("\\\"'")  # a quote escaped inside a string: `"\\"$var\\""`
    if not value or value[0] in starts or not CODE_CHARS.isdisjoint(value):
        return True
    if not quoted and value.endswith(":"):
        return True  # a block opens: `"pass": lambda: …`, `else:`
    if _DOTTED_NAME.fullmatch(value) or _ENV_NAME.fullmatch(value):
        return True
    if _FILE_NAME.fullmatch(value) or "://" in value or ("@" in value and "/" in value):
        return True  # a file, a URL, or the rest of one (`token:ghp_…@host/path`)
    return value.isdigit()


def _wordlike(value: str) -> bool:
    """Words without digits, maybe joined (`my_token`, `tokenValue`, `bench-key`,
    `Contraseña`)."""
    return _WORDS.fullmatch(value) is not None


def plain_word(value: str) -> bool:
    """One lower-case ASCII word that does not name its key (`correcthorsebattery`, not
    `mypassword`, `Passwort`, `user_password` or `PasswordStrength`): under a password key,
    where it stands alone, a password someone chose."""
    if not (value.isascii() and value.isalpha() and value.islower()):
        return False
    return not any(part in value for part in NAME_PARTS)


def passphrase(value: str) -> bool:
    """Lower-case words, one space apart, none of them a word of prose or of the key
    (`correct horse battery staple`, not `Enter your password` or `used for the session`)."""
    words = value.split(" ")
    if len(words) < MIN_PASSPHRASE_WORDS:
        return False
    return all(_PASSPHRASE_WORD.fullmatch(w) and w not in PROSE_WORDS for w in words) and not any(
        part in value for part in NAME_PARTS
    )


def assigned_secret(value: str, *, quoted: bool, strong: bool = False) -> bool:
    """The value of a secret-sounding key that is worth hiding: long enough, not code, not
    a placeholder, and either not shaped like a name or random like a generated key.
    A value shaped like an identifier needs a digit as well: in code it is a variable far
    more often than a password — unless the key is `strong` (a password or secret whose
    value stands alone as a literal), where a plain word or, quoted, a passphrase is one."""
    if len(value) < MIN_ASSIGNED_CHARS:
        return False
    if _code_like(value, quoted=quoted) or is_placeholder(value):
        return False
    if any(c.isspace() for c in value):
        return strong and quoted and passphrase(value)
    if _wordlike(value):
        mixed_case = value != value.lower() and value != value.upper()
        random_word = (
            len(value) >= MIN_WORDLIKE_CHARS
            and mixed_case
            and bits_per_char(value) >= MIN_WORDLIKE_BITS_PER_CHAR
        )
        return random_word or (strong and plain_word(value))
    return True


def explicit_password(value: str) -> bool:
    """A password where only a password can be (`scheme://user:password@host`, `mysql
    -p…`, `sshpass -p …`, `curl -u user:…`): not a placeholder or template."""
    if len(value) < 3 or value[0] in "$%{<*" or is_placeholder(value):
        return False
    return value.lower() not in {"pass", "pwd", "pw"}
