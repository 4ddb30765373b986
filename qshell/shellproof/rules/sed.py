"""sed rules of the shell read-only proof: scripts are parsed conservatively.

sed is read-only without -i and without the w/W/e commands or s///w/e flags. Anything the
small parser here does not understand is unproven. Pure functions; any thread.
"""

from __future__ import annotations

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
