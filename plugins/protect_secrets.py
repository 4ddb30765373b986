"""protect_secrets: files matching your secret globs are never touched, not even in yolo mode.

qshell already treats `.env`, keys and credential files as secrets (its one list,
`qshell.secret_names`: `.env`, `*.pem`, `.aws/credentials`, `pip.conf`, `.ssh/`, …):
reading one asks first — except in yolo mode. This plugin makes that list absolute, with
your own globs added: a call that reads or writes a file the list or a glob names is
denied in every approval mode (and stops a speculation at a boundary), so its content
never reaches the model. It denies
- a file tool (`read_file`, `edit`, `write_file`, …) whose path matches;
- a search or listing (`grep`, `glob`, `ls`) of a directory that holds a matching file,
  since it would read or show it;
- a shell command that names a matching file in any word (`cat deploy/prod.vault`,
  `--config=prod.vault`), names a directory holding one, or searches recursively
  (`grep -r`, `rg`, `find`, `git grep`, …) in a project that holds one; and one whose
  reads, as qshell's shell proof sees them (`call.paths`: symlinks resolved, a glob or
  brace word as its literal leading directory), reach one (`cat deploy/*`, a link).
A command the proof cannot read (an interpreter's `-c` program, a program that builds a
file name at run time) is matched by its words only — the sandbox's masks and qshell's
own secret rules are the next fence.

Globs come from the settings, `plugins.options.protect_secrets.patterns` (shell-style,
matched case-insensitively against the project-relative path and against the file
name), added to `DEFAULT_PATTERNS` and to qshell's own list:

    {"plugins": {"options": {"protect_secrets": {"patterns": ["*.vault", "secrets/*"]}}}}
"""

from __future__ import annotations

import fnmatch
import itertools
import os
import shlex
from pathlib import Path

from qshell.plugins import GateCall, GateContext, GateDecision, PluginConfig, hookimpl
from qshell.secret_names import is_secret_name

DEFAULT_PATTERNS = ("*.vault", "*.secret")  # beyond qshell's own list
# commands that read a whole tree when given no path (or given one)
RECURSIVE_SEARCHERS = frozenset({"rg", "ag", "ack", "find", "tree", "fd", "du"})
GREPS = frozenset({"grep", "egrep", "fgrep"})
MAX_FILES = 50_000  # a bigger tree is refused unchecked rather than walked for ever
SKIPPED_DIRS = frozenset({".git", "node_modules", "__pycache__", ".venv"})

_patterns: list[str] = list(DEFAULT_PATTERNS)  # this load's globs (qshell_configure)


@hookimpl
def qshell_configure(config: PluginConfig) -> None:
    extra = config.options.get("patterns", [])
    if not isinstance(extra, list) or not all(isinstance(p, str) for p in extra):
        raise ValueError("plugins.options.protect_secrets.patterns must be a list of globs")
    _patterns[:] = [*DEFAULT_PATTERNS, *extra]


@hookimpl
def qshell_tool_gate(call: GateCall, context: GateContext) -> GateDecision | None:
    found = _touched(call, context.project_root)
    if found is None:
        return None
    return GateDecision.deny(f"protect_secrets: {found} is a protected secret")


def _touched(call: GateCall, root: Path) -> str | None:
    """The secret the call would read or write, or None."""
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


def _in_command(command: str, root: Path) -> str | None:
    words = _words(command)
    for word in words:
        for piece in (word, word.partition("=")[2]):
            if not piece:
                continue
            path = Path(piece).expanduser()
            path = path if path.is_absolute() else root / path
            if matches(path, root):
                return _shown(path, root)
            if path.is_dir():
                held = secret_below(path, root)
                if held:
                    return held
    return secret_below(root, root) if _recursive(words) else None


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
    """Whether `path` is a secret of qshell's list or matches a protected glob, by
    relative path or by name."""
    try:
        relative = path.relative_to(root).as_posix()
    except ValueError:
        relative = path.as_posix()
    if is_secret_name(relative):
        return True
    candidates = (relative.lower(), path.name.lower())
    return any(fnmatch.fnmatch(c, p.lower()) for c in candidates for p in _patterns)


def secret_below(directory: Path, root: Path) -> str | None:
    """A protected file under `directory` (a directory inside the project), or None."""
    if not directory.is_dir():
        return None
    seen = 0
    for base, dirs, files in os.walk(directory):
        dirs[:] = [d for d in dirs if d not in SKIPPED_DIRS]
        for name in files:
            seen += 1
            path = Path(base) / name
            if matches(path, root):
                return _shown(path, root)
        if seen > MAX_FILES:
            return f"{_shown(directory, root)} (too many files to check)"
    return None


def _shown(path: Path, root: Path) -> str:
    try:
        return path.relative_to(root).as_posix() or "."
    except ValueError:
        return str(path)
