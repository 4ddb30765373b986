"""The vocabulary of the shell read-only rules: decoded words, flag specs and their parser.

`Spec` describes a command's flags (harmless, taking a value, naming a file, writing or
executing, walking the tree, following symlinks) and what its operands are; `parse` splits
arguments by it and `judge_spec` turns the result into a `Judged` (what the command reads,
recursive where it walks) or raises `Unproven`. `Read` is the interface to the caller's
read-scope rules. Pure functions and immutable values; any thread.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

PATHS = "paths"  # every operand is a path
NONE = "none"  # operands are names, text or numbers
PATTERN = "pattern"  # the first operand is a pattern unless a pattern flag gave one


class ShellproofError(Exception):
    """Root of every exception the shellproof package raises, so a caller can catch one type."""


class Unproven(ShellproofError):
    """Something is not proven read-only; `reason` says what (first one found)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True, slots=True)
class Word:
    """One shell word after quote removal, with what bash may still do to it at run time."""

    text: str  # value after quote removal; run-time parts keep their source text
    raw: str  # source text
    literal: bool  # fully known before run time (no expansion, glob, brace or substitution)
    flaggable: bool  # could be, or expand into, an option
    splits: bool  # could expand into zero or several words
    prefix: str = ""  # literal text before the first run-time part (all of `text` if literal)

    @property
    def fixed_option(self) -> str:
        """`--name=` when the word is one option whose name is literal and only its value is
        computed at run time (`--author="$(…)"`), else empty."""
        if self.literal or self.splits:
            return ""
        match = LONG_OPTION_EQ.match(self.prefix)
        return match.group() if match else ""


LONG_OPTION_EQ = re.compile(r"--[A-Za-z0-9][A-Za-z0-9-]*=")


def literal_word(text: str) -> Word:
    return Word(text, text, True, text.startswith("-"), False, text)


@dataclass(frozen=True, slots=True)
class Read:
    """One path a proven command reads, for its caller's read-scope rules.

    `text` is the path after quote removal, or its source text when it is known only at
    run time; `raw` is the shell source bash expands (braces, tildes, globs) to find the
    files actually read; `recursive` says the command also reads everything below it;
    `cwd` is where a subshell's `cd` moved before it (relative paths are read from there).
    A read that is not `literal` comes from a word bash expands at run time: any word it
    expands to that starts with `-` would reach the command as an option, not a path, so the
    caller must refuse such an expansion (a glob matching a file named `-r` or
    `--files0-from=.env`).
    """

    text: str
    raw: str
    literal: bool
    recursive: bool = False
    cwd: str = ""


PROC_ENVIRON = re.compile(r"/proc/.*environ|/environ['\"]?$")


def refuse_environ(*texts: str) -> None:
    """A process environment (`/proc/*/environ`) is refused as far as the text shows it; the
    caller still resolves where a path leads."""
    for text in texts:
        if PROC_ENVIRON.search(text):
            raise Unproven(f"{text} is a process environment (secrets)")


def read_of(word: Word, *, recursive: bool = False) -> Read:
    """The read of a path operand."""
    refuse_environ(word.text, word.raw)
    return Read(word.text if word.literal else word.raw, word.raw, word.literal, recursive)


def literal_read(text: str, *, recursive: bool = False) -> Read:
    """A read of a known path that is no shell word of its own (a default `.`, the path in
    `rev:path`): its `raw` is quoted, so expanding it gives the path itself."""
    refuse_environ(text)
    return Read(text, shlex.quote(text), True, recursive)


def runtime_read(text: str) -> Read:
    """Files named only at run time (`$(<list)`, `$(</dev/stdin)`): never checkable."""
    return Read(text, text, False)


@dataclass(frozen=True, slots=True)
class Judged:
    """A command proven read-only: its label for the proof and what it may read."""

    label: str
    reads: tuple[Read, ...] = ()
    # objects named to git by id (`3f2a9c`, as written) or at run time (`*`: a computed
    # operand, `--stdin`, `cat-file --batch-all-objects`); permissions/git_scope.py checks
    # a branch, tag or the reflog reaches each
    objects: tuple[str, ...] = ()
    # what of git's history it prints: "" nothing, "messages" commit and tag messages,
    # "whole" files' patches or blobs whole (as the output scanner sees them), "lines" lines
    # picked out of them (`git grep`, `blame`, `log -L`, `-U0`); permissions/git_history.py
    # judges what the history holds
    history: str = ""

    @property
    def paths(self) -> tuple[str, ...]:
        """The literal paths it reads."""
        return tuple(r.text for r in self.reads if r.literal)

    @property
    def dynamic(self) -> tuple[str, ...]:
        """The source text of the paths known only at run time."""
        return tuple(r.text for r in self.reads if not r.literal)


@dataclass(frozen=True, slots=True)
class Spec:
    """Option grammar of one command (GNU style: options may follow operands)."""

    short: str | None = None  # value-less short flags allowed; None: any
    short_values: str = ""  # short flags taking a value (attached or next word)
    short_optional: str = ""  # short flags whose value can only be attached (-I[FMT])
    long: frozenset[str] | None = None  # long flags allowed (`--x` or `--x=v`); None: any
    long_values: frozenset[str] = frozenset()  # long flags taking a value (`--x=v` or `--x v`)
    deny: Mapping[str, str] = field(default_factory=dict)  # "-o" / "--output" -> reason
    path_values: frozenset[str] = frozenset()  # flags whose value is a path
    pattern_flags: frozenset[str] = frozenset()  # flags that supply the pattern
    indirect: frozenset[str] = frozenset()  # flags making it read files named inside a file
    operands: str = PATHS
    max_operands: int | None = None  # more operands would be written to
    digits: bool = False  # -NUM is an option (head -20)
    stop_at_operand: bool = False  # options end at the first operand (xargs)
    walks: bool = False  # reads the whole tree below each path operand (du, rg)
    recursive: frozenset[str] = frozenset()  # flags that make it walk the tree (ls -R)
    follows: frozenset[str] = frozenset()  # flags that follow symlinks in a walk: refused
    default: str = ""  # the path it reads when given none (ls lists `.`)

    @property
    def open(self) -> bool:
        """Every flag is harmless: run-time arguments cannot turn the command into a writer."""
        return (
            self.short is None and self.long is None and not self.deny and self.max_operands is None
        )

    @property
    def risky(self) -> bool:
        """Some flag reads a file, walks a tree or follows symlinks: a run-time word that could
        become a flag must at least be reported as a read (the caller refuses it as a flag)."""
        return bool(self.path_values or self.indirect or self.recursive or self.follows)


@dataclass(slots=True)
class Parsed:
    flags: list[tuple[str, Word | None]]
    operands: list[Word]
    options_end: int | None = None  # operands from this index on came after `--`

    def flag_names(self) -> list[str]:
        return [key for key, _ in self.flags]

    def values(self, names: frozenset[str]) -> list[Word]:
        """The values given to the flags in `names` (or their abbreviations)."""
        return [v for k, v in self.flags if v is not None and names_flag(k, names)]

    def has(self, names: frozenset[str]) -> bool:
        return any(names_flag(k, names) for k, _ in self.flags)

    def could_be_flag(self, index: int) -> bool:
        """Operand `index` is computed at run time and could still turn into an option."""
        word = self.operands[index]
        before_end = self.options_end is None or index < self.options_end
        return before_end and not word.literal and word.flaggable


def word_set(names: str) -> frozenset[str]:
    return frozenset(names.split())


def _value(name: str, spec: Spec, args: Sequence[Word], i: int, flag: str) -> Word:
    if i >= len(args):
        raise Unproven(f"{name} {flag} needs a value")
    value = args[i]
    if value.splits and value.flaggable and not spec.open:
        raise Unproven(f"{name}: value {value.raw!r} is computed at run time and could add options")
    return value


def _long(name: str, spec: Spec, text: str, args: Sequence[Word], i: int, out: Parsed) -> int:
    opt, eq, attached = text[2:].partition("=")
    key = "--" + opt
    if key in spec.deny:
        raise Unproven(spec.deny[key])
    known = opt in spec.long_values or (spec.long is not None and opt in spec.long)
    if not known:
        for denied, reason in spec.deny.items():
            if denied.startswith("--") and denied[2:].startswith(opt):
                raise Unproven(f"{reason} ({key} abbreviates {denied})")
        if spec.long is not None:  # exact names only: an abbreviation is not proven
            raise Unproven(f"unknown option {key} for {name}")
    if opt in spec.long_values and not eq:
        out.flags.append(("--" + opt, _value(name, spec, args, i, key)))
        return i + 1
    out.flags.append(("--" + opt, literal_word(attached) if eq else None))
    return i


def _short(name: str, spec: Spec, text: str, args: Sequence[Word], i: int, out: Parsed) -> int:
    body = text[1:]
    if spec.digits and body.isdigit():
        out.flags.append((text, None))
        return i
    for j, char in enumerate(body):
        key = "-" + char
        if key in spec.deny:
            raise Unproven(spec.deny[key])
        rest = body[j + 1 :]
        if char in spec.short_values:
            if rest:
                out.flags.append((key, literal_word(rest)))
                return i
            out.flags.append((key, _value(name, spec, args, i, key)))
            return i + 1
        if char in spec.short_optional:
            out.flags.append((key, literal_word(rest) if rest else None))
            return i
        if spec.short is not None and char not in spec.short:
            raise Unproven(f"unknown option {key} for {name}")
        out.flags.append((key, None))
    return i


def parse(name: str, spec: Spec, args: Sequence[Word]) -> Parsed:
    """Split `args` into flags and operands by `spec`, raising on anything not allowed."""
    out = Parsed([], [])
    i, ended, is_open = 0, False, spec.open
    while i < len(args):
        word = args[i]
        i += 1
        if ended or (spec.stop_at_operand and out.operands):
            out.operands.append(word)
            continue
        if not word.literal:
            if word.fixed_option and not is_open:
                i = _long(name, spec, word.fixed_option, args, i, out)
                out.flags[-1] = (out.flags[-1][0], word)
                continue
            if word.flaggable and not is_open:
                raise Unproven(
                    f"{name}: argument {word.raw!r} is computed at run time and could be an option"
                )
            out.operands.append(word)
            continue
        text = word.text
        if text == "--":
            ended = True
            out.options_end = len(out.operands)
        elif len(text) < 2 or text[0] != "-":
            out.operands.append(word)
        elif text.startswith("--"):
            i = _long(name, spec, text, args, i, out)
        else:
            i = _short(name, spec, text, args, i, out)
    return out


def collect(words: Sequence[Word], reads: list[Read], *, recursive: bool = False) -> None:
    """The reads of path operands (`-` is standard input, not a path)."""
    for word in words:
        if not word.literal or (word.text and word.text != "-"):
            reads.append(read_of(word, recursive=recursive))


STDIN_NAMES = "$(</dev/stdin)"  # run-time paths: the file names arriving on stdin


def named_inside(path: str) -> str:
    """Run-time paths: the file names written inside `path`, as shell source text."""
    return f"$(<{path})"


def names_flag(key: str, names: frozenset[str]) -> bool:
    """`key` is one of `names`, or a GNU abbreviation of one of its long options (`--f` may
    be the only long option starting with f)."""
    return key in names or (
        key.startswith("--") and len(key) > 2 and any(n.startswith(key) for n in names)
    )


def judge_spec(name: str, spec: Spec, args: Sequence[Word]) -> Judged:
    parsed = parse(name, spec, args)
    operands = parsed.operands
    if spec.max_operands is not None:
        if len(operands) > spec.max_operands:
            extra = operands[spec.max_operands].raw
            raise Unproven(f"{name}: operand {extra!r} would be written to or changed")
        for word in operands:
            if word.splits:
                raise Unproven(f"{name}: {word.raw!r} may expand to several operands")
    reads: list[Read] = []
    collect(parsed.values(spec.path_values), reads)
    for key, value in parsed.flags:
        if names_flag(key, spec.indirect):  # the files it reads are named inside another file
            lists = [value] if value is not None else parsed.operands
            reads.extend(runtime_read(named_inside(w.raw if w.literal else "…")) for w in lists)
            if not lists:
                reads.append(runtime_read(STDIN_NAMES))
    first = 0
    if spec.operands == PATTERN and not parsed.has(spec.pattern_flags):
        first = 1
    if spec.operands == NONE:
        first = len(operands)
    first = min(first, len(operands))
    if spec.risky:
        for i in range(first):
            if parsed.could_be_flag(i):
                raise Unproven(
                    f"{name}: {operands[i].raw!r} could be an option at run time (one that "
                    "reads a file or walks a tree); give a pattern with -e"
                )
    walking = spec.walks or parsed.has(spec.recursive)
    if walking and parsed.has(spec.follows):
        raise Unproven(f"{name} follows symbolic links while it walks the tree")
    collect(operands[first:], reads, recursive=walking)
    if walking and not operands[first:]:
        reads.append(literal_read(".", recursive=True))
    elif spec.default and not operands[first:]:
        reads.append(literal_read(spec.default))
    return Judged(name, tuple(reads))


Rule = Callable[[str, Sequence[Word]], Judged]


def spec_rule(spec: Spec) -> Rule:
    return lambda name, args: judge_spec(name, spec, args)


# command names qualified with these directories are the system's own
TRUSTED_DIRS = word_set("/bin /usr/bin /usr/local/bin /sbin /usr/sbin")
