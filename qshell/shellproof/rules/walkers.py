"""Rules for commands that walk a directory tree: find, tree, grep -r and diff -r (the
table's walkers — du, rg, fd, ls -R — say so in their `Spec`).

Every path they start from is reported as a recursive read (the caller walks it for secrets
and symlinks leading out); walks that follow symbolic links are refused, and so is every
expression or option that writes or runs a program (find -exec/-delete/-fprint, tree -o/-R).
Pure functions; any thread.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace

from qshell.shellproof.rules.plain import SPECS
from qshell.shellproof.rules.spec import (
    Judged,
    Read,
    Unproven,
    Word,
    collect,
    judge_spec,
    literal_read,
    named_inside,
    parse,
    read_of,
    runtime_read,
    word_set,
)

# ---------------------------------------------------------------- find

FIND_DENY = {
    "-exec": "find -exec runs a command",
    "-execdir": "find -execdir runs a command",
    "-ok": "find -ok runs a command",
    "-okdir": "find -okdir runs a command",
    "-delete": "find -delete deletes files",
    "-fls": "find -fls writes a file",
    "-fprint": "find -fprint writes a file",
    "-fprint0": "find -fprint0 writes a file",
    "-fprintf": "find -fprintf writes a file",
    "-follow": "find -follow follows symbolic links while it walks the tree",
}
FIND_NULLARY = word_set(
    "-depth -d -mount -xdev -noleaf -ignore_readdir_race "
    "-noignore_readdir_race -daystart -warn -nowarn -empty "
    "-executable -readable -writable -false -true -nogroup -nouser -print "
    "-print0 -prune -quit -ls -not -a -and -o -or ! ( ) ,"
)
FIND_UNARY = word_set(
    "-maxdepth -mindepth -amin -anewer -atime -cmin -cnewer -ctime -fstype "
    "-gid -group -ilname -iname -inum -ipath -iregex -iwholename -links "
    "-lname -mmin -mtime -name -newer -path -perm -regex -samefile -size "
    "-type -uid -used -user -wholename -xtype -context -regextype -printf "
    "-files0-from"
)
FIND_PATH_VALUES = word_set("-anewer -cnewer -newer -samefile -files0-from")
FIND_NEWER_XY = re.compile(r"-newer[aBcm][aBcmt]")
FIND_SIGNED = re.compile(r"-\d")  # -mtime -7, -size -10k
FIND_SYMBOLIC_MODE = re.compile(r"-[ugoa]*[-+=][rwxXstugo]*(,[ugoa]*[-+=][rwxXstugo]*)*")


def find_rule(name: str, args: Sequence[Word]) -> Judged:
    reads: list[Read] = []
    i = 0
    while i < len(args) and args[i].literal and args[i].text in ("-H", "-L", "-P", "-D"):
        if args[i].text == "-L":
            raise Unproven("find -L follows symbolic links while it walks the tree")
        i += 2 if args[i].text == "-D" else 1
    starts = 0
    while i < len(args):
        word = args[i]
        if word.literal and (word.text.startswith("-") or word.text in ("(", "!", ")", ",")):
            break
        if word.flaggable:
            raise Unproven(f"find: starting point {word.raw!r} could be an option at run time")
        collect((word,), reads, recursive=True)
        starts += 1
        i += 1
    if not starts:
        reads.append(literal_read(".", recursive=True))
    while i < len(args):
        word = args[i]
        if not word.literal:
            raise Unproven(f"find: expression word {word.raw!r} is computed at run time")
        text = word.text
        if text in FIND_DENY:
            raise Unproven(FIND_DENY[text])
        if text in FIND_NULLARY:
            i += 1
            continue
        if text not in FIND_UNARY and not FIND_NEWER_XY.fullmatch(text):
            raise Unproven(f"unknown find expression {text}")
        if i + 1 >= len(args) or not args[i + 1].literal:
            raise Unproven(f"find {text} needs a literal value")
        value = args[i + 1].text
        value_word = args[i + 1]
        mode = text == "-perm" and FIND_SYMBOLIC_MODE.fullmatch(value)
        if value.startswith("-") and not FIND_SIGNED.match(value) and not mode:
            raise Unproven(f"find {text} {value}: the value looks like an option")
        if text in FIND_PATH_VALUES or (FIND_NEWER_XY.fullmatch(text) and text[-1] != "t"):
            reads.append(read_of(value_word))
        if text == "-files0-from":
            reads.append(runtime_read(named_inside(value)))
        i += 2
    return Judged("find", tuple(reads))


# ---------------------------------------------------------------- tree

# tree reads options anywhere before `--`; in a cluster every letter that takes a value takes
# the next unused word, in order (`tree -Lo 1 out` writes `out`), and so does a long option
# given without `=`. -L may carry its level as attached digits (tree 2.1.1 and later).
TREE_FLAGS = frozenset("NqQdshugfFapiCnxASDtcrvUXJ")
TREE_VALUES = frozenset("PITHL")
TREE_DENY = {
    "l": "tree -l follows symbolic links while it walks the tree",
    "o": "tree -o writes a file",
    "R": "tree -R writes 00Tree.html files",
}
TREE_LONG = word_set(
    "inodes device noreport nolinks dirsfirst filesfirst si du prune ignore-case matchdirs "
    "metafirst gitignore info fflinks hyperlink condense acl selinux opt-toggle version help"
)
TREE_LONG_VALUES = word_set("filelimit charset timefmt sort scheme authority compress")
TREE_PATH_VALUES = word_set("gitfile infofile hintro houtro")
TREE_FROM_FILE = word_set("--fromfile --fromtabfile")


def _tree_value(args: Sequence[Word], n: int, option: str) -> Word:
    if n >= len(args):
        raise Unproven(f"tree {option} needs a value")
    if args[n].splits:
        raise Unproven(f"tree: value {args[n].raw!r} may expand to several words")
    return args[n]


def _tree_cluster(text: str, args: Sequence[Word], n: int) -> int:
    """Check one cluster of short options; returns the index of the next unused word."""
    j = 1
    while j < len(text):
        char = text[j]
        if char in TREE_DENY:
            raise Unproven(TREE_DENY[char])
        if char == "L" and text[j + 1 : j + 2].isdigit():
            while text[j + 1 : j + 2].isdigit():
                j += 1
        elif char in TREE_VALUES:
            _tree_value(args, n, "-" + char)
            n += 1
        elif char not in TREE_FLAGS:
            raise Unproven(f"unknown option -{char} for tree")
        j += 1
    return n


def _tree_long(text: str, args: Sequence[Word], n: int, reads: list[Read]) -> int:
    opt, eq, attached = text[2:].partition("=")
    if not eq and (opt in TREE_LONG or text in TREE_FROM_FILE):
        return n
    if opt not in TREE_LONG_VALUES and opt not in TREE_PATH_VALUES:
        raise Unproven(f"unknown option {text} for tree")
    value = None
    if not eq:
        value = _tree_value(args, n, text)
        n += 1
    if opt in TREE_PATH_VALUES:
        reads.append(read_of(value) if value is not None else literal_read(attached))
    return n


def tree_rule(name: str, args: Sequence[Word]) -> Judged:
    reads: list[Read] = []
    dirs: list[Word] = []
    from_file = False
    options = True
    n = 0
    while n < len(args):
        word = args[n]
        n += 1
        text = word.text
        if not word.literal:
            if options and word.flaggable:
                raise Unproven(f"tree: {word.raw!r} could be an option at run time")
            dirs.append(word)
        elif not (options and text.startswith("-") and len(text) > 1):
            dirs.append(word)
        elif text == "--":
            options = False
        elif text.startswith("--"):
            n = _tree_long(text, args, n, reads)
            from_file |= text in TREE_FROM_FILE
        else:
            n = _tree_cluster(text, args, n)
    collect(dirs, reads, recursive=not from_file)
    if not dirs:
        reads.append(literal_read(".", recursive=not from_file))
    return Judged(name, tuple(reads))


# ---------------------------------------------------------------- grep -r, diff -r

GREP_DIRECTORIES = word_set("-d --directories")


def grep_rule(name: str, args: Sequence[Word]) -> Judged:
    """grep; `-d recurse` (any abbreviation argmatch accepts) walks like -r."""
    spec = SPECS["grep"]
    for value in parse(name, spec, args).values(GREP_DIRECTORIES):
        if not value.literal:
            raise Unproven("grep -d action computed at run time")
        if len(value.text) >= 3 and "recurse".startswith(value.text):
            spec = replace(spec, walks=True)
    return judge_spec(name, spec, args)


def diff_rule(name: str, args: Sequence[Word]) -> Judged:
    """diff; a recursive diff follows symlinks unless told --no-dereference."""
    spec = SPECS["diff"]
    parsed = parse(name, spec, args)
    if parsed.has(spec.recursive) and "--no-dereference" not in parsed.flag_names():
        raise Unproven("diff -r follows symbolic links while it walks (add --no-dereference)")
    return judge_spec(name, spec, args)
