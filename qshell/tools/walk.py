"""Gitignore-aware directory walking and glob matching shared by glob, grep and ls.

It decides which files a tree-wide tool may see: `.git/` is always skipped, `.gitignore`
files at the project root and in every subdirectory apply to the paths below them (the
deepest rule that matches wins, as in git), and ignored directories are pruned. Every
listing, stat and `.gitignore` read goes through the FileView it is given (the tool's
`ctx.view`; the real disk by default), so a speculation's overlay sees its own files. The
one question asked of the disk directly is whether a directory entry is a symlink (a view
has no lstat, and overlays only add regular files), since directory symlinks are never
followed. It never writes and never decides secret or approval questions (callers ask the
PathResolver). Pure functions and immutable values: safe to use from any thread.
"""

from __future__ import annotations

import os
import re
import stat as stat_module
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pathspec

from qshell.tools.fileview import REAL_VIEW, Entry, FileView

GIT_DIR_NAME = ".git"
GITIGNORE_NAME = ".gitignore"
MAX_GITIGNORE_BYTES = 1_000_000
_BRACE_RE = re.compile(r"\{([^{}]*)\}")


@dataclass(frozen=True, slots=True)
class _IgnoreFile:
    """The rules of one .gitignore file and the directory its patterns are relative to."""

    base: Path
    spec: pathspec.GitIgnoreSpec


@dataclass(frozen=True, slots=True)
class IgnoreRules:
    """The .gitignore files that apply inside one directory, shallowest first."""

    files: tuple[_IgnoreFile, ...] = ()

    def is_ignored(self, path: Path, *, is_dir: bool) -> bool:
        """True when git would ignore `path` (always True for a `.git` directory)."""
        if path.name == GIT_DIR_NAME:
            return True
        for rule in reversed(self.files):
            try:
                rel = path.relative_to(rule.base).as_posix()
            except ValueError:
                continue
            if is_dir:
                rel += "/"
            decision = rule.spec.check_file(rel).include
            if decision is not None:
                return decision
        return False

    def descend(self, directory: Path, *, view: FileView = REAL_VIEW) -> IgnoreRules:
        """The rules inside `directory`: these plus its own .gitignore (read through
        `view`), if it has one."""
        own = _load_gitignore(directory, view)
        return self if own is None else IgnoreRules((*self.files, own))


def _load_gitignore(directory: Path, view: FileView) -> _IgnoreFile | None:
    path = directory / GITIGNORE_NAME
    try:
        info = view.stat(path)
        if not stat_module.S_ISREG(info.st_mode) or info.st_size > MAX_GITIGNORE_BYTES:
            return None
        lines = view.read_bytes(path).decode("utf-8", errors="replace").splitlines()
    except OSError:
        return None
    return _IgnoreFile(directory, pathspec.GitIgnoreSpec.from_lines(lines))


def rules_for(directory: Path, root: Path, *, view: FileView = REAL_VIEW) -> IgnoreRules:
    """The ignore rules in effect inside `directory`, as `view` shows the tree.

    When `directory` lies inside `root`, the .gitignore files of `root` and every directory
    between them count too; otherwise only `directory`'s own file does.
    """
    if directory == root or directory.is_relative_to(root):
        chain = [root, *(root / part for part in _prefixes(directory.relative_to(root)))]
    else:
        chain = [directory]
    rules = IgnoreRules()
    for step in chain:
        rules = rules.descend(step, view=view)
    return rules


def _prefixes(rel: Path) -> Iterator[Path]:
    parts = rel.parts
    for i in range(1, len(parts) + 1):
        yield Path(*parts[:i])


def list_dir(directory: Path, root: Path, *, view: FileView = REAL_VIEW) -> list[tuple[str, bool]]:
    """(name, is_dir) for each entry of `directory` that is not ignored, sorted by name.

    Symlinks to directories count as directories. Raises OSError if it cannot be listed.
    """
    rules = rules_for(directory, root, view=view)
    entries = [(e.name, e.is_dir) for e in view.scandir(directory)]
    kept = [(n, d) for n, d in entries if not rules.is_ignored(directory / n, is_dir=d)]
    return sorted(kept)


def walk_entries(start: Path, root: Path, *, view: FileView = REAL_VIEW) -> Iterator[Entry]:
    """The Entry (size and mtime included) of every non-ignored regular file under `start`,
    depth first, in name order.

    Unreadable directories are skipped silently. Directory symlinks are not followed.
    """
    stack: list[tuple[Path, IgnoreRules]] = [(start, rules_for(start, root, view=view))]
    while stack:
        directory, rules = stack.pop()
        try:
            entries = sorted(view.scandir(directory), key=lambda e: e.name)
        except OSError:
            continue
        subdirs: list[tuple[Path, IgnoreRules]] = []
        for entry in entries:
            if entry.is_dir:
                path = entry.path
                if not _is_symlink(path) and not rules.is_ignored(path, is_dir=True):
                    subdirs.append((path, rules.descend(path, view=view)))
            elif entry.is_file and not rules.is_ignored(entry.path, is_dir=False):
                yield entry
        stack.extend(reversed(subdirs))


def walk_files(start: Path, root: Path, *, view: FileView = REAL_VIEW) -> Iterator[Path]:
    """The path of every non-ignored regular file under `start` (see `walk_entries`)."""
    for entry in walk_entries(start, root, view=view):
        yield entry.path


def _is_symlink(path: Path) -> bool:
    """True when `path` is a symlink on disk (views add no symlinks of their own)."""
    return os.path.islink(path)


def expand_braces(pattern: str) -> list[str]:
    """`src/*.{ts,tsx}` → [`src/*.ts`, `src/*.tsx`]; nested groups expand innermost first."""
    match = _BRACE_RE.search(pattern)
    if match is None:
        return [pattern]
    head, tail = pattern[: match.start()], pattern[match.end() :]
    out: list[str] = []
    for option in match.group(1).split(","):
        out.extend(expand_braces(head + option + tail))
    return out


def glob_matcher(pattern: str) -> Callable[[str], bool]:
    """A predicate over `/`-separated relative paths for a glob pattern.

    Semantics follow gitignore globs (as `rg --glob` does): `*` stays within one path
    segment, `**` spans segments, a pattern without `/` matches a file name at any depth,
    a pattern with `/` is anchored at the search directory, `{a,b}` alternates.
    Raises ValueError for a pattern that cannot be parsed.
    """
    lines = [_as_gitignore_line(p) for p in expand_braces(pattern.strip())]
    try:
        spec = pathspec.GitIgnoreSpec.from_lines(lines)
    except ValueError as exc:
        raise ValueError(f"invalid glob {pattern!r}: {exc}") from exc
    return spec.match_file


def _as_gitignore_line(pattern: str) -> str:
    """Neutralise gitignore syntax that has no meaning in a search glob (`!`, `#`, `./`)."""
    pattern = pattern.lstrip("!")
    while pattern.startswith("./"):
        pattern = pattern[2:]
    return "\\" + pattern if pattern.startswith("#") else pattern
