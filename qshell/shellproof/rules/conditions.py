"""Which words of a conditional expression bash uses as files: `test`/`[` and `[[ … ]]`.

A file test (`-e -f -d -r -s -L …`, `-nt -ot -ef`) reveals that a file exists, its type, owner,
permissions or age, so each file operand is a read the caller checks for scope as `cat`'s.
`test_files` follows bash 5's test builtin (test.c: the forms by argument count, then
`expr`/`or`/`and`/`term`; a file tested before a syntax error was still looked at); `cond_roles`
follows bash's `[[ … ]]` grammar (parse.y `cond_term`) over its tokens and says what each word
is: a file, a number, a pattern, a regular expression, a string or an operator. Operators are
recognised by their source text, as bash does: a quoted `"-f"` is a string in `[[ … ]]`, an
operator in `test`, whose quotes are gone before it runs. Pure functions; any thread.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from contextlib import suppress
from dataclasses import dataclass
from enum import Enum

from qshell.shellproof.rules.spec import ShellproofError, Unproven, word_set

FILE_UNARY = word_set("-a -b -c -d -e -f -g -h -k -p -r -s -u -w -x -G -L -N -O -S")
UNARY = FILE_UNARY | word_set("-n -o -t -v -z -R")  # bash's test_unop
FILE_BINARY = word_set("-nt -ot -ef")
ARITH_BINARY = word_set("-eq -ne -lt -le -gt -ge")
PATTERN_BINARY = word_set("= == !=")
BINARY = FILE_BINARY | ARITH_BINARY | PATTERN_BINARY | word_set("< >")  # bash's test_binop
ANDOR = word_set("-a -o")
VARIABLE_TESTS = word_set("-v -R")  # they evaluate an array index as code
_NUMBER = re.compile(r"\s*[-+]?[0-9]+\s*")  # what bash's legal_number takes (for -t FD)


class _Stop(ShellproofError):
    """Bash's test stops here with a syntax error (what it looked at before stays looked at)."""


class _TestParse:
    """One run of bash's test builtin over argument texts, noting the file operands."""

    def __init__(self, texts: Sequence[str]) -> None:
        self.argv = list(texts)
        self.pos = 0
        self.files: list[int] = []

    def at(self, offset: int = 0) -> str | None:
        index = self.pos + offset
        return self.argv[index] if 0 <= index < len(self.argv) else None

    def posix(self) -> None:
        count = len(self.argv)
        if count == 2:
            self.two()
        elif count == 3:
            self.three()
        elif count == 4 and self.at() == "!":
            self.pos += 1
            self.three()
        elif count == 4 and self.at() == "(" and self.argv[3] == ")":
            self.pos += 1
            self.two()
        elif count >= 4:
            self.expr()

    def two(self) -> None:
        if self.at() != "!" and self.at() in UNARY:
            self.unary()

    def three(self) -> None:
        middle = self.at(1)
        if middle in BINARY:
            self.binary()
        elif middle not in ANDOR and self.at() == "!":
            self.pos += 1
            self.two()

    def expr(self) -> None:
        self.term()
        while self.at() in ANDOR:
            self.pos += 1
            self.term()

    def term(self) -> None:
        while self.at() == "!":
            self.pos += 1
        current = self.at()
        if current is None:
            raise _Stop
        if current == "(":
            self.pos += 1
            self.expr()
            if self.at() != ")":
                raise _Stop
            self.pos += 1
        elif self.pos + 3 <= len(self.argv) and self.at(1) in BINARY:
            self.binary()
        elif self.pos + 2 <= len(self.argv) and current in UNARY:
            self.unary()
        else:
            self.pos += 1

    def unary(self) -> None:
        operator = self.at()
        self.pos += 1
        if operator == "-t":  # an optional descriptor, never a file
            if (fd := self.at()) is not None and _NUMBER.fullmatch(fd):
                self.pos += 1
            return
        if self.at() is None:
            raise _Stop
        if operator in FILE_UNARY:
            self.files.append(self.pos)
        self.pos += 1

    def binary(self) -> None:
        if self.at(1) in FILE_BINARY:
            self.files += [self.pos, self.pos + 2]
        self.pos += 3


def test_files(texts: Sequence[str]) -> list[int]:
    """The indexes of the arguments of `test` (of `[` without its `]`) that bash's test
    builtin looks at as files, `texts` being the arguments after quote removal."""
    parse = _TestParse(texts)
    with suppress(_Stop):
        parse.posix()
    return sorted(set(parse.files))


class Role(Enum):
    """What one word of `[[ … ]]` is to bash."""

    OPERATOR = "operator"
    FILE = "file"
    NUMBER = "number"  # an arithmetic operand: bash evaluates it as an expression
    PATTERN = "pattern"  # right of = == !=
    REGEX = "regex"  # right of =~
    STRING = "string"


SEPARATORS = word_set("( ) && || < >")  # the tokens of `[[ … ]]` that are no words


@dataclass(frozen=True, slots=True)
class CondToken:
    """One token of `[[ … ]]`: its source text, and whether it is a word (else a separator)."""

    text: str
    word: bool


class _CondParse:
    """Bash's `[[ … ]]` grammar: or := and ['||' or]; and := term ['&&' and];
    term := '!' term | '(' or ')' | UNARY WORD | WORD BINARY WORD | WORD."""

    def __init__(self, tokens: Sequence[CondToken]) -> None:
        self.tokens = list(tokens)
        self.pos = 0
        self.roles: dict[int, Role] = {}

    def peek(self, offset: int = 0) -> CondToken | None:
        index = self.pos + offset
        return self.tokens[index] if index < len(self.tokens) else None

    def separator(self, text: str, offset: int = 0) -> bool:
        token = self.peek(offset)
        return token is not None and not token.word and token.text == text

    def word(self, role: Role) -> None:
        token = self.peek()
        if token is None or not token.word:
            raise Unproven("[[ … ]] that bash does not parse")
        self.roles[self.pos] = role
        self.pos += 1

    def disjunction(self) -> None:
        self.conjunction()
        while self.separator("||"):
            self.pos += 1
            self.conjunction()

    def conjunction(self) -> None:
        self.term()
        while self.separator("&&"):
            self.pos += 1
            self.term()

    def term(self) -> None:
        token = self.peek()
        if token is None:
            raise Unproven("[[ … ]] that bash does not parse")
        if self.separator("("):
            self.pos += 1
            self.disjunction()
            if not self.separator(")"):
                raise Unproven("[[ … ]] that bash does not parse")
            self.pos += 1
        elif token.word and token.text == "!":
            self.word(Role.OPERATOR)
            self.term()
        elif token.word and token.text in UNARY:
            if token.text in VARIABLE_TESTS:
                raise Unproven(f"[[ {token.text} ]] evaluates an array index as code")
            self.word(Role.OPERATOR)
            self.word(Role.FILE if token.text in FILE_UNARY else Role.STRING)
        elif token.word:
            self.binary_or_single()
        else:
            raise Unproven(f"unexpected '{token.text}' in [[ … ]]")

    def binary_or_single(self) -> None:
        left = self.pos
        self.pos += 1
        operator = self.peek()
        if operator is None or (not operator.word and operator.text in ("&&", "||", ")")):
            self.roles[left] = Role.STRING  # `[[ WORD ]]` is `[[ -n WORD ]]`
            return
        text = operator.text
        if operator.word and text not in BINARY and text != "=~":
            raise Unproven("[[ … ]] that bash does not parse")
        if not operator.word and text not in ("<", ">"):
            raise Unproven(f"unexpected '{text}' in [[ … ]]")
        if operator.word:
            self.roles[self.pos] = Role.OPERATOR
        self.pos += 1
        side = _binary_role(text)
        self.roles[left] = side if side in (Role.FILE, Role.NUMBER) else Role.STRING
        self.word(side)


def _binary_role(operator: str) -> Role:
    if operator in FILE_BINARY:
        return Role.FILE
    if operator in ARITH_BINARY:
        return Role.NUMBER
    if operator == "=~":
        return Role.REGEX
    return Role.PATTERN if operator in PATTERN_BINARY else Role.STRING


def cond_roles(tokens: Sequence[CondToken]) -> dict[int, Role]:
    """What each word of `[[ … ]]` (its tokens between `[[` and `]]`) is, by token index;
    Unproven when bash would not parse it (it then runs nothing, but neither is it proven)."""
    parse = _CondParse(tokens)
    parse.disjunction()
    if parse.peek() is not None:
        raise Unproven("[[ … ]] that bash does not parse")
    return parse.roles
