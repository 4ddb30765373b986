"""Quote removal as bash 5 does it: how the proof turns a word's source text into a `Word`.

It decodes unquoted, double-quoted and ANSI-C quoted (`$'…'`) text exactly as bash does —
octal escapes keep their low 8 bits, `\\x` takes one or two hex digits, `\\c` makes a control
character, unknown escapes keep their backslash — and refuses what it cannot know from the text
(a NUL that truncates the word, bytes ≥ 0x80 and `\\u` beyond ASCII, which depend on the
locale, a quote where bash ends the string but the parser does not). What bash still expands
at run time becomes a piece of its own: globs, brace expansions (`{a,b}`, `{1..3}`, judged
over the whole word as bash's brace matching does), tildes other than a plain leading `~`
(`~+`, `~-`, `~user`, `a=~` in an assignment-like word) and substitutions; `assemble_word`
turns the pieces into the `Word` the rules see. The tree walkers (`words.py`, `walker.py`)
call it; it never looks at a syntax tree. Pure functions; any thread.
"""

from __future__ import annotations

import re
import shlex

from qshell.shellproof.rules import Read, Word, read_of
from qshell.shellproof.rules.spec import literal_read, refuse_environ
from qshell.shellproof.syntax import fail

# piece kinds of a word under construction
LIT, GLOB, DYN_QUOTED, DYN_UNQUOTED, PROCSUB, TILDE, HOME, BRACE_OPEN, BRACE_CLOSE = range(9)


_RUN_TIME = frozenset((GLOB, DYN_QUOTED, DYN_UNQUOTED, PROCSUB, TILDE))


_EXPANDS_AFTER_DOLLAR = re.compile(r"[A-Za-z0-9_({\[@*#?$!\-]")


_SPECIAL = re.compile(r"[\\*?\[{}$` \t\n]")  # what quote removal of unquoted text must look at


_ANSI_SIMPLE = dict(zip("abeEfnrtv\\'\"?", "\a\b\x1b\x1b\f\n\r\t\v\\'\"?", strict=True))


_ANSI_BODY = re.compile(r"(?:[^'\\]|\\.)*", re.DOTALL)  # where bash ends `$'…'`


_ANSI_DIGITS = {
    "x": re.compile("[0-9A-Fa-f]{1,2}"),
    "u": re.compile("[0-9A-Fa-f]{1,4}"),
    "U": re.compile("[0-9A-Fa-f]{1,8}"),
}


_OCTAL = re.compile("[0-7]{1,3}")


# `NAME=…` and `NAME[…]+=…` arguments: bash expands a `~` after the `=` and after each `:`
_ASSIGNMENT_LIKE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\[[^\]]*\])?\+?=")


def decode_unquoted(text: str, out: list[tuple[int, str]]) -> None:
    """Quote removal of an unquoted word part; specials become their own pieces. `out` empty
    means the part starts the word, where bash expands a tilde-prefix."""
    if not out and "~" in text[:3]:
        text = _tilde(text, out)
    if not _SPECIAL.search(text):
        out.append((LIT, text))
        return
    if "\\\n" in text and ("$" in text or "`" in text):
        fail("a line continuation next to '$' (bash joins what the parser split)")
    buf: list[str] = []
    i, n = 0, len(text)
    while i < n:
        char = text[i]
        if char == "\\":
            if i + 1 < n:
                if text[i + 1] != "\n":
                    buf.append(text[i + 1])
                i += 2
                continue
            buf.append(char)
        elif char in "*?[{}":
            if buf:
                out.append((LIT, "".join(buf)))
                buf = []
            kind = GLOB if char in "*?[" else BRACE_OPEN if char == "{" else BRACE_CLOSE
            out.append((kind, char))
        elif char == "`" or (char == "$" and _EXPANDS_AFTER_DOLLAR.match(text, i + 1)):
            fail("an expansion the parser did not see")
        elif char in " \t\n":
            fail("unquoted blank inside one word (the parser and bash disagree)")
        else:
            buf.append(char)
        i += 1
    if buf:
        out.append((LIT, "".join(buf)))


def _tilde(text: str, out: list[tuple[int, str]]) -> str:
    """The tilde-prefix at the start of a word (up to the first `/`): a plain `~` is HOME (kept
    as `~` when the word is otherwise literal, as `Proof.paths` promises); `~+`, `~-`,
    `~user`, `~N` are known only at run time. A quoted character in it stops the expansion."""
    end = text.find("/")
    prefix = text if end < 0 else text[:end]
    if "\\\n" in prefix:
        fail("a line continuation next to a tilde")
    if not prefix.startswith("~") or "\\" in prefix:  # a quoted character: no expansion
        return text
    if any(c in prefix for c in "*?[{}$`"):
        fail("a tilde-prefix with a glob, brace or expansion inside is not checked")
    out.append((HOME if prefix == "~" else TILDE, prefix))
    return text[len(prefix) :]


def decode_double(text: str, buf: list[str]) -> bool:
    """Quote removal inside "…"; an unescaped `$` becomes NUL (checked later against what
    follows). Returns whether a line continuation was removed."""
    escapable = '$`"\\\n'
    joined = False
    i, n = 0, len(text)
    while i < n:
        char = text[i]
        if char == "\\" and i + 1 < n and text[i + 1] in escapable:
            if text[i + 1] == "\n":
                joined = True
            else:
                buf.append(text[i + 1])
            i += 2
            continue
        if char == "`":
            fail("an expansion the parser did not see")
        buf.append("\0" if char == "$" else char)
        i += 1
    return joined


def check_dollars(decoded: str, joined: bool) -> str:
    """Reject a literal `$` that bash would expand (tree-sitter saw text, bash sees `$(`)."""
    if "\0" not in decoded:
        return decoded
    if joined:
        fail("a line continuation inside quotes next to '$'")
    for match in re.finditer("\0", decoded):
        if _EXPANDS_AFTER_DOLLAR.match(decoded, match.end()):
            fail("an expansion the parser did not see")
    return decoded.replace("\0", "$")


def decode_ansi(text: str) -> str:
    """`$'…'` decoded as bash does, or refused where the result is not known from the text."""
    body = text[2:-1]
    if not text.endswith("'") or not _ANSI_BODY.fullmatch(body):
        fail("an ANSI-C string that bash ends elsewhere than the parser ($'\\\\' is one backslash)")
    out: list[str] = []
    i = 0
    while (j := body.find("\\", i)) >= 0:
        out.append(body[i:j])
        char = body[j + 1]  # present: the body check pairs every backslash
        i = j + 2
        if char in _ANSI_SIMPLE:
            out.append(_ANSI_SIMPLE[char])
            continue
        value, i = _ansi_value(body, char, i)
        if value < 0:
            out.append("\\" + char)  # bash keeps an unknown escape as typed
        elif value == 0:
            fail("NUL in an ANSI-C string truncates the word")
        elif value >= 0x80:
            fail("an ANSI-C escape beyond ASCII depends on the locale")
        else:
            out.append(chr(value))
    out.append(body[i:])
    return "".join(out)


def _ansi_value(body: str, char: str, i: int) -> tuple[int, int]:
    """The byte (or code point) of the escape `\\<char>…` whose digits start at `i`, -1 when
    bash keeps it as typed, and where decoding goes on."""
    if char in "01234567":
        match = _OCTAL.match(body, i - 1)
        assert match is not None
        return int(match.group(), 8) & 0xFF, match.end()  # bash keeps the low 8 bits
    if char in _ANSI_DIGITS:
        if char == "x" and body.startswith("{", i):
            fail("ANSI-C escape \\x{…} is not checked")
        match = _ANSI_DIGITS[char].match(body, i)
        if match is None:
            return -1, i
        value = int(match.group(), 16)
        return (value & 0xFF if char == "x" else value), match.end()
    if char == "c":
        if i >= len(body) or not body[i].isascii():
            fail("ANSI-C escape \\c without an ASCII character after it")
        ctl = body[i]
        i += 2 if ctl == "\\" and body.startswith("\\", i + 1) else 1
        return (0x7F if ctl == "?" else ord(ctl.upper()) & 0x1F), i
    return -1, i


def assemble_word(pieces: list[tuple[int, str]], raw: str) -> Word:
    if len(pieces) == 1 and pieces[0][0] == LIT and ("~" not in raw or "=" not in raw):
        text = pieces[0][1]
        return Word(text, raw, True, text.startswith("-"), False, text)
    kinds = [kind for kind, _ in pieces]
    text = "".join(piece for _, piece in pieces)
    if BRACE_OPEN in kinds:
        _mark_brace(pieces, kinds)
    dynamic = [i for i, kind in enumerate(kinds) if kind in _RUN_TIME]
    if dynamic and kinds[0] == HOME:
        dynamic.insert(0, 0)  # `~` is kept as text only in a word that is otherwise literal
    assignment = _ASSIGNMENT_LIKE.match(raw) if "~" in raw else None
    tilde = assignment is not None and "~" in raw[assignment.end() - 1 :]
    if not dynamic:
        if tilde:  # `a=~/x`, `a=b:~`: bash expands the tilde after `=` and `:`
            return Word(text, raw, False, False, False, text.partition("~")[0])
        return Word(text, raw, True, text.startswith("-"), False, text)
    first = dynamic[0]
    prefix = "".join(piece for _, piece in pieces[:first])
    if tilde:
        prefix = prefix.partition("~")[0]
    unquoted = DYN_UNQUOTED in kinds
    splits = unquoted or GLOB in kinds
    quiet = (PROCSUB, TILDE, HOME)  # never expand into an option on their own
    flaggable = unquoted or prefix.startswith("-") or (not prefix and kinds[first] not in quiet)
    return Word(text, raw, False, flaggable, splits, prefix)


_UNQUOTED_TILDE = re.compile(r"~[^/'\"\\$`]*(?:/|$)")  # up to an unquoted slash, nothing quoted


def unexpanded_read(pieces: list[tuple[int, str]], raw: str) -> Read:
    """The file a word names where bash expands its tilde, parameters and substitutions but
    neither braces nor globs (`[[ -e ~/x* ]]` tests the file `$HOME/x*`): a `Read` whose
    `raw` bash expands to that one name, or, with anything known only at run time, the
    word's own read (which the caller cannot check)."""
    kinds = {kind for kind, _ in pieces}
    if kinds & {DYN_QUOTED, DYN_UNQUOTED, PROCSUB}:
        return read_of(assemble_word(pieces, raw))
    tilde = pieces[0][1] if pieces and pieces[0][0] in (HOME, TILDE) else ""
    if not _UNQUOTED_TILDE.match(raw):  # `~"x"`, `~"/x"`: a quoted tilde-prefix stays as typed
        tilde = ""
    rest = "".join(piece for _, piece in pieces)[len(tilde) :]
    if not tilde:
        return literal_read(rest)
    refuse_environ(tilde + rest)
    quoted = "/" + shlex.quote(rest[1:]) if rest[1:] else rest  # the slash ends the prefix
    return Read(tilde + rest, tilde + quoted, pieces[0][0] == HOME)


def _mark_brace(pieces: list[tuple[int, str]], kinds: list[int]) -> None:
    """Bash expands braces holding an unquoted `,` or `..` (`{a,b}`, `{1..3}`) and looks past a
    `}` without one (`{x}a,b}` is `x}a b`): over-approximated as any `,`, `..` or run-time
    part between the first unquoted `{` and the last unquoted `}`; `{}` and `{x}` stay."""
    opened = kinds.index(BRACE_OPEN)
    closed = max((i for i, kind in enumerate(kinds) if kind == BRACE_CLOSE), default=-1)
    if closed < opened:
        return
    inner = "".join(piece for _, piece in pieces[opened + 1 : closed])
    if "," in inner or ".." in inner or any(k in _RUN_TIME for k in kinds[opened:closed]):
        kinds[opened] = GLOB
