"""The jq rule of the shell read-only proof: jq's own option grammar and a scan of its program.

jq reads options anywhere before `--`; a short cluster is any set of its one-letter flags
(`-nr`), `-L` takes a directory attached or as the next word, and the long options take
exact names, some with one or two following words (`--arg NAME VALUE`, `--rawfile NAME
FILE`). The first other word is the program, the rest are input files. The files named by
`--rawfile`, `--slurpfile`, `--argfile` and `-L` are reported as reads; a program from a
file (-f) or one that loads modules (`import`, `include`) is unproven, since its text is
not shown. Pure functions; any thread.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from qshell.shellproof.rules.spec import (
    Judged,
    Read,
    Unproven,
    Word,
    collect,
    literal_read,
    read_of,
    word_set,
)

JQ_FLAGS = frozenset("nrjascCMSeRhV")
JQ_LONG = word_set(
    "null-input raw-input slurp compact-output raw-output join-output ascii-output "
    "sort-keys color-output monochrome-output exit-status tab seq stream stream-errors "
    "unbuffered args jsonargs help version raw-output0 nul-output"
)
JQ_LONG_VALUES = {"indent": 1, "arg": 2, "argjson": 2, "slurpfile": 2, "rawfile": 2, "argfile": 2}
JQ_FILE_VALUES = word_set("slurpfile rawfile argfile")  # the second value is a file
JQ_DENY = {
    "from-file": "jq -f runs a program file that is not shown",
    "run-tests": "jq --run-tests runs programs from a file",
}
# words of a jq program that read files which are not shown (modules)
JQ_PROGRAM = re.compile(r"(?<![A-Za-z0-9_$])(import|include|modulemeta|get_search_list)\b")


# `env` and `$ENV` are the process environment; `.env` and `$env` are a field and a variable
JQ_ENVIRONMENT = re.compile(r"\$__prog_env|\$ENV\b|(?<![A-Za-z0-9_$.])(?<![^.]\.)env\b|\.\.env\b")


def jq_program_reason(program: str) -> str | None:
    """Why the jq program is not proven read-only, or None."""
    if JQ_ENVIRONMENT.search(program):
        return "jq env and $ENV hold the process environment (secrets)"
    found = JQ_PROGRAM.search(program)
    if found:
        return f"jq {found.group(1)} loads modules from files that are not shown"
    return None


def _values(args: Sequence[Word], i: int, count: int, option: str) -> list[Word]:
    values = list(args[i : i + count])
    if len(values) < count:
        raise Unproven(f"jq {option} needs {count} values")
    for value in values:
        if value.splits:
            raise Unproven(f"jq: value {value.raw!r} may expand to several words")
    return values


def _option(args: Sequence[Word], i: int, reads: list[Read]) -> int:
    """Check the option at `args[i]`; returns the index of the next word."""
    text = args[i].text
    if text.startswith("--"):
        name = text[2:]
        if name in JQ_DENY:
            raise Unproven(JQ_DENY[name])
        if name in JQ_LONG:
            return i + 1
        if name == "library-path":
            reads.append(read_of(_values(args, i + 1, 1, text)[0]))
            return i + 2
        count = JQ_LONG_VALUES.get(name)
        if count is None:
            raise Unproven(f"unknown option {text} for jq")
        values = _values(args, i + 1, count, text)
        if name in JQ_FILE_VALUES:
            reads.append(read_of(values[1]))
        return i + 1 + count
    if text[1] == "L":  # -Ldir or -L dir; never inside a cluster
        if len(text) > 2:
            reads.append(literal_read(text[2:]))
            return i + 1
        reads.append(read_of(_values(args, i + 1, 1, "-L")[0]))
        return i + 2
    for char in text[1:]:
        if char == "f":
            raise Unproven(JQ_DENY["from-file"])
        if char not in JQ_FLAGS:
            raise Unproven(f"unknown option -{char} for jq")
    return i + 1


def jq_rule(name: str, args: Sequence[Word]) -> Judged:
    reads: list[Read] = []
    positional: list[Word] = []
    i, ended = 0, False
    while i < len(args):
        word = args[i]
        if ended or not word.literal or not word.text.startswith("-") or len(word.text) < 2:
            if not (ended or word.literal or positional) and word.flaggable:
                raise Unproven(f"jq: {word.raw!r} could be an option at run time")
            positional.append(word)
            i += 1
        elif word.text == "--":
            ended = True
            i += 1
        else:
            i = _option(args, i, reads)
    if not positional:
        raise Unproven("jq without a program")
    program, files = positional[0], positional[1:]
    if not program.literal:
        raise Unproven("jq program computed at run time")
    reason = jq_program_reason(program.text)
    if reason:
        raise Unproven(reason)
    collect(files, reads)
    return Judged(name, tuple(reads))
