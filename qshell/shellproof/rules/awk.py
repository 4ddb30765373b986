"""awk rules of the shell read-only proof: programs are scanned conservatively.

awk is read-only without system(), getline from commands, output redirection or -i inplace.
Anything the small tokenizer here does not understand is unproven. Pure functions; any thread.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from qshell.shellproof.rules.spec import (
    Judged,
    Read,
    Spec,
    Unproven,
    Word,
    collect,
    parse,
    word_set,
)

# ---------------------------------------------------------------- awk

AWK_SPEC = Spec(
    short="bcNPrsSMOtV",
    short_values="Fv",
    long=word_set(
        "posix traditional sandbox characters-as-bytes use-lc-numeric "
        "re-interval no-optimize optimize bignum help version copyright"
    ),
    long_values=word_set("field-separator assign"),
    deny={
        "-f": "awk -f runs a program file that is not shown",
        "--file": "awk -f runs a program file that is not shown",
        "-i": "awk -i loads a library (-i inplace edits files)",
        "--include": "awk -i loads a library",
        "-l": "awk -l loads a shared library",
        "--load": "awk -l loads a shared library",
        "-o": "awk -o writes a file",
        "--pretty-print": "awk --pretty-print writes a file",
        "-p": "awk -p writes a profile file",
        "--profile": "awk --profile writes a file",
        "-d": "awk -d writes a file",
        "--dump-variables": "awk --dump-variables writes a file",
        "-D": "awk -D starts a debugger",
        "--debug": "awk --debug starts a debugger",
        "-E": "awk -E runs a program file",
        "--exec": "awk --exec runs a program file",
        "-W": "awk -W options are not checked",
        "-e": "awk -e programs are not checked",
        "--source": "awk --source programs are not checked",
    },
)
# awk lexes `$5system(…)` as `$5` then `system(…)`: only a letter or `_` can glue on in front
AWK_WORDS = re.compile(r"(?<![A-Za-z_])(system|getline|close|ARGV|ARGC|ENVIRON)(?![A-Za-z0-9_])")
AWK_WORD_REASONS = {
    "system": "awk system() runs a command",
    "getline": "awk getline reads other files or commands",
    "close": "awk close() is only needed for pipes and files",
    "ARGV": "awk ARGV changes which files are read",
    "ARGC": "awk ARGC changes which files are read",
    "ENVIRON": "awk ENVIRON holds the process environment (secrets)",
}
AWK_TWO = frozenset(
    (
        "||",
        "&&",
        ">=",
        "<=",
        "==",
        "!=",
        "++",
        "--",
        "+=",
        "-=",
        "*=",
        "/=",
        "%=",
        "^=",
        ">>",
        "|&",
        "**",
    )
)
AWK_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")


def _awk_regex_end(prog: str, i: int) -> int:
    """Index of the `/` closing the regex that opens at `i`; raises where awks could disagree."""
    j = i + 1
    bracket = -1
    while j < len(prog):
        char = prog[j]
        if char == "\\":
            j += 2
            continue
        if char in ';{}"\n':
            raise Unproven("awk: a regular expression that could hide code")
        if bracket >= 0:
            if char == "]" and j > bracket + 1 and not (j == bracket + 2 and prog[j - 1] == "^"):
                bracket = -1
            elif char == "/":
                raise Unproven("awk: '/' inside a bracket expression")
        elif char == "[":
            bracket = j
        elif char == "/":
            return j
        j += 1
    raise Unproven("awk: unterminated regular expression")


AWK_CONDITION_WORDS = word_set("if while for switch")  # `if (…) /re/`: a statement follows
AWK_OPERAND_BEFORE = word_set("print printf in return case do else")  # a regex may follow these


def awk_program_reason(prog: str) -> str | None:
    """Why the awk program is not proven read-only, or None: no commands, pipes or writes.

    A small tokenizer (`_AwkScan`): strings and regexes are skipped, `print … >`/`>>` at the
    print's own parenthesis depth is a redirection, any `|` runs a command. awk tells a regex
    from a division by grammar, so a `/` right after a condition's `)` starts a regex, and a
    comment after a division on the same line is refused (a regex read as division could
    hide code)."""
    found = AWK_WORDS.search(prog)
    if found:
        return AWK_WORD_REASONS[found.group(1)]
    try:
        return _AwkScan(prog).reason()
    except Unproven as exc:
        return exc.reason


class _AwkScan:
    """The tokenizer state of `awk_program_reason`; each step consumes one token."""

    def __init__(self, prog: str) -> None:
        self.prog = prog
        self.i = 0
        self.operand = False  # the last token ends an operand, so '/' divides
        self.parens: list[bool] = []  # open ( and [: True for an if/while/for condition
        self.condition_next = False
        self.printing = -1  # paren depth of the current print statement, -1 outside one
        self.divided = False  # a '/' was read as division on this line

    def reason(self) -> str | None:
        while self.i < len(self.prog):
            why = self._step(self.prog[self.i])
            if why is not None:
                return why
        return None

    def _step(self, char: str) -> str | None:
        prog, i = self.prog, self.i
        if char in " \t" or (char == "\\" and prog.startswith("\n", i + 1)):
            self.i += 2 if char == "\\" else 1
            return None
        if char == "#":
            if self.divided:
                return "awk: a comment after a division is ambiguous"
            end = prog.find("\n", i)
            self.i = len(prog) if end < 0 else end
            return None
        if char == '"':
            return self._string()
        if char == "/" and not self.operand:
            self.i = _awk_regex_end(prog, i) + 1
            self.operand, self.condition_next = True, False
            return None
        if char.isdigit() or char == ".":
            while self.i < len(prog) and (prog[self.i].isdigit() or prog[self.i] == "."):
                self.i += 1
            self.operand, self.condition_next = True, False
            return None
        if char.isalpha() or char == "_":
            self._word()
            return None
        return self._operator(char)

    def _string(self) -> str | None:
        prog, n = self.prog, len(self.prog)
        self.i += 1
        while self.i < n and prog[self.i] != '"':
            if prog[self.i] == "\n":
                return "awk: unterminated string"
            self.i += 2 if prog[self.i] == "\\" else 1
        if self.i >= n:
            return "awk: unterminated string"
        self.i += 1
        self.operand, self.condition_next = True, False
        return None

    def _word(self) -> None:
        prog, j = self.prog, self.i
        while j < len(prog) and (prog[j].isalnum() or prog[j] == "_"):
            j += 1
        word = prog[self.i : j]
        self.i = j
        if word in ("print", "printf"):
            self.printing = len(self.parens)
        self.operand = word not in AWK_OPERAND_BEFORE
        self.condition_next = word in AWK_CONDITION_WORDS

    def _operator(self, char: str) -> str | None:
        two = self.prog[self.i : self.i + 2]
        in_print = self.printing == len(self.parens)
        if two in AWK_TWO:
            if two == "|&":
                return "awk |& runs a coprocess"
            if two == ">>" and in_print:
                return "awk print >> writes a file"
            self.divided |= two == "/="
            self.i += 2
            self.operand, self.condition_next = two in ("++", "--"), False
            return None
        if char == "|":
            return "awk | runs a command"
        if char == "@":
            return "gawk @ directives load code"
        if char == ">" and in_print:
            return "awk print > writes a file"
        self.operand = False
        if char in "([":
            self.parens.append(self.condition_next and char == "(")
        elif char in ")]":
            if not self.parens:
                return "awk: unbalanced parentheses"
            self.operand = not self.parens.pop()  # after a condition, a statement (/re/?)
        elif char in "{};\n":
            self.printing = -1
            self.divided = self.divided and char != "\n"
        elif char == "/":
            self.divided = True
        self.condition_next = False
        self.i += 1
        return None


def awk_rule(name: str, args: Sequence[Word]) -> Judged:
    parsed = parse(name, AWK_SPEC, args)
    if not parsed.operands:
        raise Unproven("awk without a program")
    program, operands = parsed.operands[0], parsed.operands[1:]
    if not program.literal:
        raise Unproven("awk program computed at run time")
    reason = awk_program_reason(program.text)
    if reason:
        raise Unproven(reason)
    reads: list[Read] = []
    for word in operands:
        if word.literal and AWK_ASSIGNMENT.match(word.text):
            continue
        if word.text.startswith("/inet"):
            raise Unproven("gawk /inet files open network connections")
        collect((word,), reads)
    return Judged(name, tuple(reads))
