"""The vocabulary of the shell read-only proof: node kinds, word decoding and gap checks.

It holds what `shell_safety`'s tree walker builds on: the tables of tree-sitter-bash node and
operator kinds, the `Verdict` and `_Scope` values, the decoders that turn a word's source text
(unquoted, double-quoted, ANSI-C quoted, brace and glob pieces) into the literal text bash
would see or reject it, and the check that no source text was silently skipped by the parser.
It never runs a command. Pure functions and immutable tables; any thread.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import NoReturn

from tree_sitter import Node

from qshell.followup.shell_rules import Unproven, Word

MAX_DEPTH = 60  # nested statements and words


def _set(names: str) -> frozenset[str]:
    return frozenset(names.split())


# characters bash and tree-sitter may split differently, or that hide text from a reader
_BAD_CHARS = re.compile(
    "[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\x85\xa0\u1680\u2000-\u200f\u2028-\u202f\u205f\u3000\ufeff]"
)


_STATEMENT_SEPARATORS = frozenset((";", "\n"))


_WRITE_OPS = _set("> >> &> &>> >|")


_NETWORK_DEVICES = ("/dev/tcp/", "/dev/udp/", "/dev/tcp", "/dev/udp")


_REDIRECTS = _set("file_redirect heredoc_redirect herestring_redirect")


_EXPANSION_OPS = _set("${ } # ## % %% - :- + :+ / // /# /% , ,, ^ ^^")


_EXPANSION_REJECTS = {
    "=": "${x=…} assigns a variable",
    ":=": "${x:=…} assigns a variable",
    "?": "${x?…} is not checked",
    ":?": "${x:?…} is not checked",
    "@": "${x@…} transformations can run code",
    "!": "${!x} indirection is not checked",
    ":": "${x:offset} with a variable offset evaluates it as arithmetic code",
}


_ARITH_NODES = _set(
    "number binary_expression unary_expression parenthesized_expression ternary_expression"
)


_ARITH_ASSIGN = _set("= += -= *= /= %= <<= >>= &= ^= |= ++ --")


_TEST_ARITH = _set("-eq -ne -lt -le -gt -ge")


_TEST_FILE_OPS = _set("-a -b -c -d -e -f -g -h -k -p -r -s -u -w -x -G -L -N -O -S")


_WORD_NODES = _set(
    "word number string raw_string ansi_c_string concatenation "
    "simple_expansion expansion command_substitution process_substitution "
    "arithmetic_expansion brace_expression"
)


_SIMPLE_EXPANSION = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*|[0-9]+|[@*#?$!\-])")


_VARIABLE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|[0-9]+|[@*#?$!\-]")


_HEREDOC_DELIMITER = re.compile(r"[A-Za-z0-9_.\-'\"\\]+")


_EXPANDS_AFTER_DOLLAR = re.compile(r"[A-Za-z0-9_({\[@*#?$!\-]")


_RUNS_AFTER_DOLLAR = re.compile(rb"[({\[]")  # $( ${ $[ can run code; $name is only a value


_RUNS_AFTER_DOLLAR_TEXT = re.compile(r"\$[({\[]")


_ANSI_ESCAPES = dict(zip("abeEfnrtv\\'\"?", "\a\b\x1b\x1b\f\n\r\t\v\\'\"?", strict=True))


_ANSI_NUMERIC = re.compile(r"[0-7]{1,3}|x[0-9A-Fa-f]{1,2}|u[0-9A-Fa-f]{1,4}|U[0-9A-Fa-f]{1,8}")


# piece kinds of a word under construction
_LIT, _GLOB, _DYN_QUOTED, _DYN_UNQUOTED, _PROCSUB, _BRACE_OPEN, _BRACE_CLOSE = range(7)


_RUN_TIME = frozenset((_GLOB, _DYN_QUOTED, _DYN_UNQUOTED, _PROCSUB))


@dataclass(frozen=True, slots=True)
class Verdict:
    """Whether a command line is proven read-only, and what it reads if so."""

    read_only: bool
    reason: str  # "read-only", or the first thing not proven
    commands: tuple[str, ...] = ()  # commands seen, in order ("git log", "head", …)
    paths: tuple[str, ...] = ()  # literal path arguments (after quote removal, `~` kept)
    # shell source text of paths known only at run time: globs, `$VAR`, `$(…)`, and the files
    # named inside another file (`$(<list)`) or on stdin (`$(</dev/stdin)`, from xargs)
    dynamic_paths: tuple[str, ...] = ()


@dataclass(slots=True)
class _Scope:
    """Shell state a statement runs in: a subshell may cd; relative paths follow the cd."""

    subshell: bool = False
    cwd: str | None = None
    cd_done: bool = False

    def child(self) -> _Scope:
        return _Scope(True, self.cwd, self.cd_done)


def _fail(reason: str) -> NoReturn:
    raise Unproven(reason)


def _text(node: Node) -> str:
    return (node.text or b"").decode("utf-8", "surrogateescape")


def _decode_unquoted(text: str, out: list[tuple[int, str]]) -> None:
    """Quote removal of an unquoted word; specials become their own pieces."""
    if not any(c in text for c in "\\*?[{}$` \t\n"):
        out.append((_LIT, text))
        return
    if "\\\n" in text and ("$" in text or "`" in text):
        _fail("a line continuation next to '$' (bash joins what the parser split)")
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
                out.append((_LIT, "".join(buf)))
                buf = []
            kind = _GLOB if char in "*?[" else _BRACE_OPEN if char == "{" else _BRACE_CLOSE
            out.append((kind, char))
        elif char == "`" or (char == "$" and _EXPANDS_AFTER_DOLLAR.match(text, i + 1)):
            _fail("an expansion the parser did not see")
        elif char in " \t\n":
            _fail("unquoted blank inside one word (the parser and bash disagree)")
        else:
            buf.append(char)
        i += 1
    if buf:
        out.append((_LIT, "".join(buf)))


def _decode_double(text: str, buf: list[str]) -> bool:
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
            _fail("an expansion the parser did not see")
        buf.append("\0" if char == "$" else char)
        i += 1
    return joined


def _check_dollars(decoded: str, joined: bool) -> str:
    """Reject a literal `$` that bash would expand (tree-sitter saw text, bash sees `$(`)."""
    if "\0" not in decoded:
        return decoded
    if joined:
        _fail("a line continuation inside quotes next to '$'")
    for match in re.finditer("\0", decoded):
        if _EXPANDS_AFTER_DOLLAR.match(decoded, match.end()):
            _fail("an expansion the parser did not see")
    return decoded.replace("\0", "$")


def _decode_ansi(text: str) -> str:
    body, out, i = text[2:-1], [], 0
    while i < len(body):
        char = body[i]
        if char != "\\" or i + 1 >= len(body):
            out.append(char)
            i += 1
            continue
        nxt = body[i + 1]
        if nxt in _ANSI_ESCAPES:
            out.append(_ANSI_ESCAPES[nxt])
            i += 2
            continue
        match = _ANSI_NUMERIC.match(body, i + 1)
        if not match:
            _fail(f"ANSI-C escape \\{nxt} is not checked")
        digits = match.group()
        value = int(digits, 8) if digits[0].isdigit() else int(digits[1:], 16)
        if value == 0:
            _fail("NUL in an ANSI-C string truncates the word")
        out.append(chr(value))
        i = match.end()
    return "".join(out)


def _assemble(pieces: list[tuple[int, str]], raw: str) -> Word:
    kinds = [kind for kind, _ in pieces]
    text = "".join(piece for _, piece in pieces)
    if _BRACE_OPEN in kinds:
        _mark_brace(pieces, kinds)
    dynamic = [i for i, kind in enumerate(kinds) if kind in _RUN_TIME]
    if not dynamic:
        return Word(text, raw, True, text.startswith("-"), False, text)
    first = dynamic[0]
    prefix = "".join(piece for _, piece in pieces[:first])
    unquoted = _DYN_UNQUOTED in kinds
    splits = unquoted or _GLOB in kinds
    flaggable = unquoted or prefix.startswith("-") or (not prefix and kinds[first] != _PROCSUB)
    return Word(text, raw, False, flaggable, splits, prefix)


def _mark_brace(pieces: list[tuple[int, str]], kinds: list[int]) -> None:
    """Bash expands `{a,b}` and `{1..3}` (unquoted `,` or `..` inside); `{}` and `{x}` stay."""
    opened = -1
    for i, kind in enumerate(kinds):
        if kind == _BRACE_OPEN and opened < 0:
            opened = i
        elif kind == _BRACE_CLOSE and opened >= 0:
            inner = "".join(p for k, p in pieces[opened + 1 : i] if k == _LIT)
            if "," in inner or ".." in inner or any(k in _RUN_TIME for k in kinds[opened:i]):
                kinds[opened] = _GLOB
                return
            opened = -1


def _check_heredoc_body(body: Node) -> None:
    """An unquoted heredoc body expands `$(…)`, `${…}`, `$[…]` and backquotes: each must start a
    node the walker checks, and no line continuation may join `$` to what follows."""
    text = body.text or b""
    base = body.start_byte
    spans = sorted(
        (child.start_byte - base, child.end_byte - base)
        for child in body.named_children
        if child.type != "heredoc_content"
    )
    joined = False
    i = 0
    while i < len(text):
        char = text[i : i + 1]
        if spans and i >= spans[0][0]:
            i = max(i, spans.pop(0)[1])
            continue
        if char == b"\\":
            joined |= text[i + 1 : i + 2] == b"\n"
            i += 2
            continue
        if char == b"`" or (char == b"$" and _RUNS_AFTER_DOLLAR.match(text, i + 1)):
            _fail("an expansion the parser did not see")
        i += 1
    if joined and (b"$" in text or b"`" in text):
        _fail("a line continuation in a heredoc next to '$'")


def _plain_pattern(node: Node) -> None:
    """Operand or pattern text the parser left unparsed (`${x-…}`, `[[ x == … ]]`): bash still
    expands it, so no substitution may hide there, even across a line continuation."""
    joined = _text(node).replace("\\\n", "")
    if "`" in joined or _RUNS_AFTER_DOLLAR_TEXT.search(joined):
        _fail("substitution inside an unparsed operand or pattern")


def _construct_reason(node: Node) -> str:
    kind = node.type
    if kind in ("variable_assignment", "variable_assignments"):
        return "variable assignment changes the shell"
    if kind in ("declaration_command", "unset_command"):
        first = node.children[0].type if node.child_count else kind
        return f"'{first}' changes the shell"
    if kind == "function_definition":
        return "function definition"
    if kind in ("for_statement", "c_style_for_statement", "while_statement"):
        return f"loop ({kind.removesuffix('_statement').replace('_', '-')})"
    if kind == "case_statement":
        return "case statement"
    if kind == "ERROR":
        return "parse error"
    return f"unsupported construct '{kind}'"


def _token_reason(token: str) -> str:
    if token == "&":
        return "background job '&'"
    return f"unexpected '{token}'"


_LEAF_NODES = _set("raw_string heredoc_start heredoc_body comment")


def _leaves(root: Node) -> list[Node]:
    out: list[Node] = []
    stack = [root]
    while stack:
        node = stack.pop()
        if node.child_count == 0 or node.type in _LEAF_NODES:
            out.append(node)
        else:
            stack.extend(reversed(node.children))
    out.sort(key=lambda n: n.start_byte)
    return out


def _check_gaps(source: bytes, root: Node) -> None:
    """Bytes between tokens must be blanks, or line continuations next to blanks: bash joins
    `-\\<newline>o` into one word where tree-sitter sees two."""
    position = 0
    for leaf in (*_leaves(root), None):
        start = leaf.start_byte if leaf is not None else len(source)
        if start > position:
            gap = source[position:start]
            stripped = gap.replace(b"\\\n", b"")
            if b"\r" in stripped:
                _fail("carriage return outside quotes (bash keeps it in the word)")
            if stripped.strip(b" \t\n"):
                _fail("text the parser skipped")
            if not stripped and position and leaf is not None:
                _fail("a line continuation joins two words")
        if leaf is not None:
            position = max(position, leaf.end_byte)
