"""Rules for small commands whose flags need more than a table: xargs, printf, env, command,
date and test/[.

Each returns what the command reads or raises `Unproven` (xargs with a command that is not
itself proven, printf -v, date -s, test -v, …). Pure functions; any thread.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from qshell.shellproof.rules.conditions import ANDOR, BINARY, VARIABLE_TESTS, test_files
from qshell.shellproof.rules.plain import SPECS
from qshell.shellproof.rules.spec import (
    NONE,
    STDIN_NAMES,
    TRUSTED_DIRS,
    Judged,
    Rule,
    Spec,
    Unproven,
    Word,
    judge_spec,
    named_inside,
    parse,
    read_of,
    runtime_read,
    word_set,
)
from qshell.shellproof.rules.walkers import diff_rule, grep_rule

# ---------------------------------------------------------------- small custom rules

XARGS_SPEC = Spec(
    short="0rtx",
    short_values="dnLsPEa",
    long=word_set("null no-run-if-empty verbose exit help version"),
    long_values=word_set("delimiter max-args max-lines max-chars max-procs eof arg-file"),
    deny={
        "-I": "xargs -I substitutes input into the command",
        "-i": "xargs -i substitutes input into the command",
        "--replace": "xargs --replace substitutes input into the command",
        "-p": "xargs -p is interactive",
        "--interactive": "xargs --interactive is interactive",
        "-o": "xargs -o opens the terminal",
        "--open-tty": "xargs --open-tty opens the terminal",
        "--process-slot-var": "xargs --process-slot-var is not checked",
    },
    path_values=word_set("-a --arg-file"),
    operands=NONE,
    stop_at_operand=True,
)


XARGS_RULES: dict[str, Rule] = dict.fromkeys(("grep", "egrep", "fgrep"), grep_rule)
XARGS_RULES["diff"] = diff_rule


def xargs_rule(name: str, args: Sequence[Word]) -> Judged:
    parsed = parse(name, XARGS_SPEC, args)
    target = parsed.operands
    if not target:
        return Judged("xargs echo")
    head = target[0]
    command = head.text.rsplit("/", 1)[-1] if head.literal else ""
    if not head.literal or ("/" in head.text and head.text.rsplit("/", 1)[0] not in TRUSTED_DIRS):
        raise Unproven(f"xargs runs {head.raw!r}, which is not a known command")
    spec = SPECS.get(command)
    if spec is None or not spec.open or command == "yes":
        raise Unproven(
            f"xargs runs '{command}', whose options are not all read-only (input becomes arguments)"
        )
    rule = XARGS_RULES.get(command)
    judged = rule(command, target[1:]) if rule else judge_spec(command, spec, target[1:])
    lists = [v.raw for k, v in parsed.flags if k in ("-a", "--arg-file") and v is not None]
    inputs = tuple(runtime_read(named_inside(path)) for path in lists)
    return Judged(f"xargs {command}", (*judged.reads, *(inputs or (runtime_read(STDIN_NAMES),))))


def printf_rule(name: str, args: Sequence[Word]) -> Judged:
    rest = list(args)
    if rest and rest[0].literal and rest[0].text == "--":
        rest = rest[1:]
    if rest:
        first = rest[0]
        if first.literal and first.text.startswith("-") and first.text != "-":
            raise Unproven(
                "printf -v assigns a variable"
                if first.text.startswith("-v")
                else f"unknown option {first.text} for printf"
            )
        if first.flaggable and not first.literal:
            raise Unproven("printf format computed at run time could be an option")
    return Judged(name)


def env_rule(name: str, args: Sequence[Word]) -> Judged:
    if all(w.literal and w.text in ("-0", "--null") for w in args):
        raise Unproven("env prints the process environment (secrets)")
    raise Unproven("env with arguments runs a command or changes the environment")


PRINTENV_SPEC = Spec(short="0", long=word_set("null help version"), operands=NONE)
VARIABLE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def printenv_rule(name: str, args: Sequence[Word]) -> Judged:
    """printenv NAME… prints those variables, as `echo "$NAME"` would; without a name it
    prints the whole process environment."""
    operands = parse(name, PRINTENV_SPEC, args).operands
    if not operands:
        raise Unproven("printenv without a name prints the process environment (secrets)")
    for word in operands:
        if not word.literal or not VARIABLE_NAME.fullmatch(word.text):
            raise Unproven(f"printenv {word.raw!r} is not a literal variable name")
    return Judged(name)


def command_rule(name: str, args: Sequence[Word]) -> Judged:
    lookup = False
    for word in args:
        if not (word.literal and word.text.startswith("-")):
            break
        if word.text == "--":
            break
        if any(char not in "vVp" for char in word.text[1:]):
            raise Unproven(f"unknown option {word.text} for command")
        lookup |= "v" in word.text or "V" in word.text
    if not lookup:
        raise Unproven("command runs its arguments (only command -v/-V looks up)")
    return Judged("command -v")


DATE_SPEC = Spec(
    short="uR",
    short_values="dfr",
    short_optional="I",
    long=word_set(
        "utc universal rfc-email rfc-2822 debug help version iso-8601 rfc-3339 resolution"
    ),
    long_values=word_set("date file reference"),
    deny={"-s": "date -s sets the clock", "--set": "date --set sets the clock"},
    path_values=word_set("-f --file -r --reference"),
    operands=NONE,
    max_operands=1,
)


def date_rule(name: str, args: Sequence[Word]) -> Judged:
    judged = judge_spec(name, DATE_SPEC, args)
    for word in parse(name, DATE_SPEC, args).operands:
        if not word.text.startswith("+"):
            raise Unproven("date with an operand other than +FORMAT sets the clock")
    return judged


TEST_BINARY = BINARY | ANDOR  # operators whose place does not depend on the words around them


def check_test(name: str, args: Sequence[Word]) -> Judged:
    """`test`/`[` arguments: no -v/-R (they evaluate array indexes as code) and, with run-time
    words, only the argument counts whose meaning does not depend on the words' values. Each
    word bash's test looks at as a file (conditions.py) is a read, literal or not."""
    words = list(args)
    if name == "[":
        if not words or not words[-1].literal or words[-1].text != "]":
            raise Unproven("[ without a closing ]")
        words.pop()
    for word in words:
        if word.literal and word.text in VARIABLE_TESTS:
            raise Unproven(f"test {word.text} evaluates an array index as code")
        if word.splits:
            raise Unproven(f"test argument {word.raw!r} may expand to several words")
    dynamic = {i for i, word in enumerate(words) if not word.literal}
    if dynamic:
        count = len(words)
        fixed = (
            count == 1
            or (count == 2 and 0 not in dynamic)
            or (
                count == 3
                and 1 not in dynamic
                and (words[1].text in TEST_BINARY or (0 not in dynamic and words[0].text == "!"))
            )
        )
        if not fixed:
            raise Unproven("test with run-time words where an operator could be")
    files = test_files([word.text for word in words])
    return Judged("test", tuple(read_of(words[i]) for i in files))


WHO_SPEC = Spec(max_operands=2)


def who_rule(name: str, args: Sequence[Word]) -> Judged:
    """who FILE reads FILE instead of utmp; with two operands (`who am i`) it reads none."""
    operands = parse(name, WHO_SPEC, args).operands
    judged = judge_spec(name, WHO_SPEC, args)
    return judged if len(operands) < 2 else Judged(name)


STRINGS_SPEC = Spec(short_values="nteT")


def strings_rule(name: str, args: Sequence[Word]) -> Judged:
    """strings reads the options written in `@FILE` (binutils response files), so a word
    that starts with `@` (or could, at run time) is refused: its file is not shown."""
    for word in args:
        if word.text.startswith("@") or (not word.literal and not word.prefix):
            raise Unproven(f"strings reads the options inside the file {word.raw!r}")
    return judge_spec(name, STRINGS_SPEC, args)
