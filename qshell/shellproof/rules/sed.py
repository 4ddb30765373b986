"""sed rules of the shell read-only proof: scripts are parsed conservatively.

sed is read-only without -i and without the w/W/e commands or s///w/e flags; the files its
r/R commands read are reported. Labels are modelled as GNU sed ends them (at a blank or
`;`, where another command may start) and proven only where every sed agrees. Anything
the small parser here does not understand is unproven. Pure functions; any thread.
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
    literal_read,
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
    "e": "sed e runs a command",
    "v": "sed v is not checked",
}
# GNU sed ends a label at a blank or `;` and reads the next command right after it
# (`:a w f` defines `a`, then writes f); other seds read it to the end of the line. Only a
# label that every sed ends at the same place is proven.
SED_LABEL = re.compile(r"[ \t]*([A-Za-z0-9_.]*)[ \t]*(?=$|[;\n}])")


class _SedScript:
    """A conservative reader of one sed script: addresses plus print/delete/substitute/… only."""

    def __init__(self, script: str) -> None:
        self.s = script
        self.i = 0
        self.files: list[str] = []  # read by r and R

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
                self._label(command)
            elif command and command in "rR":
                self._filename(command)
            elif command and command in "aic":
                self._text()
            elif command in SED_FORBIDDEN:
                raise Unproven(SED_FORBIDDEN[command])
            else:
                raise Unproven(f"sed command {command!r} is not checked")
        if depth:
            raise Unproven("sed: unbalanced braces")

    def _label(self, command: str) -> None:
        found = SED_LABEL.match(self.s, self.i)
        if found is None:
            raise Unproven(f"sed {command}: a label that seds end at different places")
        if command == ":" and not found.group(1):
            raise Unproven("sed : without a label")
        self.i = found.end()

    def _filename(self, command: str) -> None:
        """r/R FILE: the file name is the rest of the line, blanks before it skipped."""
        self._blank()
        end = self.s.find("\n", self.i)
        end = len(self.s) if end < 0 else end
        name = self.s[self.i : end]
        if not name:
            raise Unproven(f"sed {command} without a file name")
        self.files.append(name)
        self.i = end

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
    parser = _SedScript("\n".join(s.text for s in scripts))
    parser.check()
    reads: list[Read] = [literal_read(n) for n in parser.files if n != "/dev/stdin"]
    collect(operands, reads)
    return Judged(name, tuple(reads))
