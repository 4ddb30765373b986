"""sed and awk rules of the shell read-only proof: scripts are parsed conservatively.

sed is read-only without -i and without the w/W/e commands or s///w/e flags; awk without
system(), getline from commands, output redirection or -i inplace. Anything the small
parsers here do not understand is unproven. Pure functions; any thread.
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

# ---------------------------------------------------------------- sed

SED_SPEC = Spec(
    short="nErszub",
    short_values="el",
    long=word_set(
        "quiet silent regexp-extended separate null-data zero-terminated "
        "unbuffered posix debug sandbox binary follow-symlinks help version"
    ),
    long_values=word_set("expression line-length"),
    deny={
        "-i": "sed -i edits files",
        "--in-place": "sed -i edits files",
        "-f": "sed -f runs a script file that is not shown",
        "--file": "sed -f runs a script file that is not shown",
    },
)
SED_PLAIN = frozenset("pPdDnNgGhHxz=F")
SED_FORBIDDEN = {
    "w": "sed w writes a file",
    "W": "sed W writes a file",
    "r": "sed r reads a file that is not shown",
    "R": "sed R reads a file that is not shown",
    "e": "sed e runs a command",
    "v": "sed v is not checked",
}


class _SedScript:
    """A conservative reader of one sed script: addresses plus print/delete/substitute/… only."""

    def __init__(self, script: str) -> None:
        self.s = script
        self.i = 0

    def _peek(self) -> str:
        return self.s[self.i] if self.i < len(self.s) else ""

    def _blank(self) -> None:
        while self._peek() in (" ", "\t"):
            self.i += 1

    def _until(self, delim: str) -> None:
        """Move past the next unescaped `delim` (a regex or replacement part)."""
        s = self.s
        while self.i < len(s):
            char = s[self.i]
            if char == "\\":
                self.i += 2
                continue
            self.i += 1
            if char == delim:
                return
            if char == "\n" and delim != "\n":
                raise Unproven("sed: newline inside a regular expression")
        raise Unproven("sed: unterminated regular expression")

    def _address(self) -> bool:
        char = self._peek()
        if char.isdigit():
            while self._peek().isdigit():
                self.i += 1
            if self._peek() == "~":
                self.i += 1
                while self._peek().isdigit():
                    self.i += 1
        elif char == "$":
            self.i += 1
        elif char in ("/", "\\"):
            if char == "\\":
                self.i += 1
                char = self._peek()
                if not char or char in "\n\\":
                    raise Unproven("sed: bad address delimiter")
            self.i += 1
            self._until(char)
            while self._peek() in ("I", "M"):
                self.i += 1
        elif char in ("+", "~"):
            self.i += 1
            if not self._peek().isdigit():
                raise Unproven("sed: bad address")
            while self._peek().isdigit():
                self.i += 1
        else:
            return False
        return True

    def _end(self) -> None:
        self._blank()
        if self._peek() not in ("", ";", "\n", "}", "#"):
            raise Unproven(f"sed: unexpected {self._peek()!r} after a command")

    def _substitute(self, command: str) -> None:
        delim = self._peek()
        if not delim or delim in "\n\\":
            raise Unproven(f"sed {command}: bad delimiter")
        self.i += 1
        self._until(delim)
        self._until(delim)
        if command == "y":
            return
        while self._peek() and self._peek() in "gpiImMew0123456789":
            flag = self._peek()
            if flag == "w":
                raise Unproven("sed s///w writes a file")
            if flag == "e":
                raise Unproven("sed s///e runs a command")
            self.i += 1

    def check(self) -> None:
        s = self.s
        depth = 0
        while True:
            while self._peek() in (" ", "\t", "\n", ";"):
                self.i += 1
            char = self._peek()
            if not char:
                break
            if char == "#":
                end = s.find("\n", self.i)
                self.i = len(s) if end < 0 else end
                continue
            if char == "}":
                depth -= 1
                if depth < 0:
                    raise Unproven("sed: unbalanced braces")
                self.i += 1
                continue
            if self._address():
                self._blank()
                if self._peek() == ",":
                    self.i += 1
                    self._blank()
                    if not self._address():
                        raise Unproven("sed: bad address range")
            self._blank()
            while self._peek() == "!":
                self.i += 1
                self._blank()
            command = self._peek()
            self.i += 1
            if command == "{":
                depth += 1
            elif command in SED_PLAIN:
                self._end()
            elif command and command in "qQlL":
                self._blank()
                while self._peek().isdigit():
                    self.i += 1
                self._end()
            elif command in ("s", "y"):
                self._substitute(command)
                self._end()
            elif command and command in "btT:":
                while self._peek() not in ("", ";", "\n"):
                    self.i += 1
            elif command and command in "aic":
                self._text()
            elif command in SED_FORBIDDEN:
                raise Unproven(SED_FORBIDDEN[command])
            else:
                raise Unproven(f"sed command {command!r} is not checked")
        if depth:
            raise Unproven("sed: unbalanced braces")

    def _text(self) -> None:
        """a/i/c text: to the end of the line, continued by a trailing backslash."""
        s = self.s
        while self.i < len(s):
            end = s.find("\n", self.i)
            if end < 0:
                self.i = len(s)
                return
            line = s[self.i : end]
            self.i = end + 1
            if (len(line) - len(line.rstrip("\\"))) % 2 == 0:
                return


def sed_rule(name: str, args: Sequence[Word]) -> Judged:
    parsed = parse(name, SED_SPEC, args)
    scripts = [v for k, v in parsed.flags if k in ("-e", "--expression") and v is not None]
    operands = parsed.operands
    if not scripts:
        if not operands:
            raise Unproven("sed without a script")
        scripts, operands = [operands[0]], operands[1:]
    for script in scripts:
        if not script.literal:
            raise Unproven("sed script computed at run time")
    _SedScript("\n".join(s.text for s in scripts)).check()
    reads: list[Read] = []
    collect(operands, reads)
    return Judged(name, tuple(reads))


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
AWK_WORDS = re.compile(r"(?<![A-Za-z_])(system|getline|close|ARGV|ARGC)(?![A-Za-z0-9_])")
AWK_WORD_REASONS = {
    "system": "awk system() runs a command",
    "getline": "awk getline reads other files or commands",
    "close": "awk close() is only needed for pipes and files",
    "ARGV": "awk ARGV changes which files are read",
    "ARGC": "awk ARGC changes which files are read",
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
