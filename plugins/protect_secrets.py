"""protect_secrets: secret files are never touched, not even in yolo mode.

qshell already treats `.env`, keys and credential files as secrets: reading one asks
first — except in yolo mode. This plugin makes that absolute, for qshell's own secret names
(`.env`, `*.pem`, `id_rsa`, `~/.ssh`, …: its one list, tools/paths.py, read through
`qshell_secret`) and for your own globs: a call that would read or write such a file is
denied in every approval mode (and stops a speculation at a boundary), so its content never
reaches the model. It denies
- a file tool (`read_file`, `edit`, `write_file`, …) whose path is one;
- a shell command that names one in any word or piece of a word (`cat .env`,
  `--config=deploy/prod.vault`, `open('.env')`, `HEAD:.env`), in a glob or brace word that
  matches one here (`cat .e*`, `cat .en{v,x}`), or whose reads, as qshell's shell proof sees
  them (`call.paths`: symlinks resolved), are one (`cat notes.txt` linked to it);
- a shell command that searches recursively (`grep -r`, `rg`, `find`, `git grep`, …) in a
  project holding one — for qshell's names unless qshell itself runs the command without
  asking outside yolo mode: proven read-only, it runs in the jail with the secret masked;
- for your globs also a search or listing (`grep`, `glob`, `ls`) of a directory that holds
  a matching file, and a command naming such a directory (qshell's own searches and
  listings already skip its secret names; a listing shows a name, never a content).
A command the proof cannot read (an interpreter's `-c` program, a program that builds a
file name at run time) is matched by its words only — the sandbox's masks and qshell's
own secret rules are the next fence, and in yolo mode there is none.

Globs come from the settings, `plugins.options.protect_secrets.patterns` (shell-style,
matched case-insensitively against the project-relative path and against the file
name), added to `DEFAULT_PATTERNS`:

    {"plugins": {"options": {"protect_secrets": {"patterns": ["*.vault", "secrets/*"]}}}}
"""

from __future__ import annotations

import fnmatch
import functools
import glob
import itertools
import os
import re
import shlex
from collections.abc import Callable, Iterator
from pathlib import Path

from qshell.plugins import GateCall, GateContext, GateDecision, PluginConfig, Verdict, hookimpl
from qshell.tools.paths import PathResolver

DEFAULT_PATTERNS = ("*.vault", "*.secret", "credentials.json")
# commands that read a whole tree when given no path (or given one)
RECURSIVE_SEARCHERS = frozenset({"rg", "ag", "ack", "find", "tree", "fd", "du"})
GREPS = frozenset({"grep", "egrep", "fgrep"})
MAX_FILES = 50_000  # a bigger tree is refused unchecked rather than walked for ever
MAX_NAMES = 256  # what one glob or brace word may stand for before the rest is ignored
SKIPPED_DIRS = frozenset({".git", "node_modules", "__pycache__", ".venv"})
# where a path inside one shell word may start or end: `--x=.env`, `open('.env')`, `HEAD:.env`
_PIECE_BREAKS = re.compile(r"[\s'\"()=:,;<>|&`]+")
_BRACE = re.compile(r"\{([^{}]*,[^{}]*)\}")  # an innermost `{a,b}`
_GLOB = frozenset("*?[")

_patterns: list[str] = list(DEFAULT_PATTERNS)  # this load's globs (qshell_configure)

Match = Callable[[Path, Path], bool]  # (path, project root) -> is it protected


def qshell_secret(path: Path, root: Path) -> bool:
    """Whether qshell itself takes `path` for a secret: the names of its one list (`.env`,
    keys, credential files and directories, a process environment). The one line to change
    should that name move."""
    return _resolver(root).is_secret(path)


@functools.lru_cache(maxsize=8)
def _resolver(root: Path) -> PathResolver:
    return PathResolver(root)


@hookimpl
def qshell_configure(config: PluginConfig) -> None:
    extra = config.options.get("patterns", [])
    if not isinstance(extra, list) or not all(isinstance(p, str) for p in extra):
        raise ValueError("plugins.options.protect_secrets.patterns must be a list of globs")
    _patterns[:] = [*DEFAULT_PATTERNS, *extra]


@hookimpl
def qshell_tool_gate(call: GateCall, context: GateContext) -> GateDecision | None:
    found = _touched(call, context.project_root) or _touched_qshell(call, context)
    if found is None:
        return None
    return GateDecision.deny(f"protect_secrets: {found} is a protected secret")


def _touched(call: GateCall, root: Path) -> str | None:
    """The file matching your globs the call would read or write, or None."""
    for path in (*call.paths, *call.writes):
        if matches(path, root):
            return _shown(path, root)
        if call.kind in ("search", "execute") or call.tool == "ls":  # a directory it walks
            held = secret_below(path, root)
            if held:
                return held
    if call.command:
        return _in_command(call.command, root)
    return None


def _touched_qshell(call: GateCall, context: GateContext) -> str | None:
    """The file qshell takes for a secret that the call would read or write, or None. A
    recursive search is let through when qshell runs it confined: allowed by qshell itself
    in a speculation, or as a proven command outside yolo mode (the jail masks it)."""
    root = context.project_root
    for path in (*call.paths, *call.writes):
        if qshell_secret(path, root):
            return _shown(path, root)
    if not call.command:
        return None
    words = _words(call.command)
    for path in _named(words, root):
        if qshell_secret(path, root):
            return _shown(path, root)
    allowed = context.builtin.verdict is Verdict.ALLOW
    confined = allowed and (context.speculative or context.approval_mode != "yolo")
    if _recursive(words) and not confined:
        return secret_below(root, root, qshell_secret)
    return None


def _in_command(command: str, root: Path) -> str | None:
    words = _words(command)
    for path in _named(words, root):
        if matches(path, root):
            return _shown(path, root)
        if path.is_dir():
            held = secret_below(path, root)
            if held:
                return held
    return secret_below(root, root) if _recursive(words) else None


def _named(words: list[str], root: Path) -> Iterator[Path]:
    """Every path the words may name: each word and each piece of it, and what a glob or
    brace piece stands for in the project."""
    for word in words:
        for piece in {word, *_PIECE_BREAKS.split(word)}:
            if not piece:
                continue
            for name in _braces(piece):
                path = Path(name).expanduser()
                yield path if path.is_absolute() else root / path
                if _GLOB & set(name):
                    found = glob.glob(name, root_dir=root, include_hidden=True)
                    yield from (root / hit for hit in itertools.islice(found, MAX_NAMES))


def _braces(text: str) -> list[str]:
    """`text` with its `{a,b}` alternatives expanded (innermost first), at most MAX_NAMES."""
    match = _BRACE.search(text)
    if match is None:
        return [text]
    head, tail = text[: match.start()], text[match.end() :]
    out: list[str] = []
    for option in match.group(1).split(","):
        out += _braces(head + option + tail)
    return out[:MAX_NAMES]


def _recursive(words: list[str]) -> bool:
    """Whether the command line searches a tree it may not name (`grep -r x`, `rg x`)."""
    names = [Path(word).name for word in words]
    if RECURSIVE_SEARCHERS & set(names):
        return True
    flags = [w for w in words if w.startswith("-")]
    deep = any(f in ("--recursive", "--dereference-recursive") for f in flags) or any(
        not f.startswith("--") and ("r" in f or "R" in f) for f in flags
    )
    if GREPS & set(names) and deep:
        return True
    if "ls" in names and any(not f.startswith("--") and "R" in f for f in flags):
        return True
    return any(a == "git" and b == "grep" for a, b in itertools.pairwise(names))


def _words(command: str) -> list[str]:
    try:
        return shlex.split(command, comments=True)
    except ValueError:  # unbalanced quotes: the plain words still count
        return command.split()


def matches(path: Path, root: Path) -> bool:
    """Whether `path` matches a protected glob, by relative path or by name."""
    try:
        relative = path.relative_to(root).as_posix()
    except ValueError:
        relative = path.as_posix()
    candidates = (relative.lower(), path.name.lower())
    return any(fnmatch.fnmatch(c, p.lower()) for c in candidates for p in _patterns)


def secret_below(directory: Path, root: Path, match: Match | None = None) -> str | None:
    """A protected file under `directory` (a directory inside the project), or None:
    one matching your globs, or what `match` says is protected."""
    match = match or matches
    if not directory.is_dir():
        return None
    seen = 0
    for base, dirs, files in os.walk(directory):
        dirs[:] = [d for d in dirs if d not in SKIPPED_DIRS]
        for name in files:
            seen += 1
            path = Path(base) / name
            if match(path, root):
                return _shown(path, root)
        if seen > MAX_FILES:
            return f"{_shown(directory, root)} (too many files to check)"
    return None


def _shown(path: Path, root: Path) -> str:
    try:
        return path.relative_to(root).as_posix() or "."
    except ValueError:
        return str(path)
