"""PathResolver: the one place a tool argument becomes a real filesystem path.

It resolves against the project root (following symlinks), answers whether a path is
inside the root, and whether it looks like a secret: what qshell's one list of secret
names holds secret (qshell/secret_names.py: `.env` but not `.env.example`, keys and
key stores, `.netrc`, `.npmrc`, `pip.conf`, `.aws/credentials`, `.ssh/`, …, matched
case-insensitively, in the project as in the home), the home's credential directories as
a whole (`~/.docker`, browser profiles, …), process environments (`/proc/*/environ`), a git
config holding a credential, and the patterns of the `secretPatterns` setting. Policy
builds the read-scope rules on these answers; tree-wide tools (`grep`, `glob`) skip files
that are secret or lead out of the root once symlinks are resolved (`hidden`); the
speculation overlay reuses the same resolver at redirect and apply time. Pure and
thread-safe: it only reads the filesystem to follow symlinks (and a git config).
"""

from __future__ import annotations

import fnmatch
import os
import re
from collections.abc import Iterable
from pathlib import Path

import pathspec

from qshell.config import DEFAULT_PROTECTED_PATHS
from qshell.secret_names import HOME_DIRS, PROCESS_SECRETS, is_secret_name, name_globs

# a credential in git's configuration: a password or a token in a URL (`https://u:p@h`,
# `https://ghp_…@h`; not ssh's short `git@`), an `extraheader`, a password or token key —
# listed (`x.password=`) or in the file (`smtpPass = …`, `oauthtoken = …`; not `askpass`)
GIT_CREDENTIALS = re.compile(
    r"://[^/\s@:]+:[^/\s@]+@|://[^/\s@:]{20,}@|extraheader\s*=|\.(password|token)\s*="
    r"|(?:^|\n)[ \t]*[a-z0-9-]*(?<!ask)(?:pass(?:word|wd)?|token|secret)[ \t]*=[ \t]*[^\s;#]",
    re.IGNORECASE,
)
GIT_CONFIG_NAMES = frozenset({"config", "config.worktree"})
MAX_GIT_CONFIG_BYTES = 1 << 20


class PathResolver:
    """Resolves tool paths against `root` and classifies them."""

    def __init__(
        self,
        root: Path,
        *,
        home: Path | None = None,
        extra_secret_patterns: Iterable[str] = (),
        protected_patterns: Iterable[str] = DEFAULT_PROTECTED_PATHS,
    ) -> None:
        self.root = Path(root).resolve()
        self.protected_patterns = tuple(protected_patterns)
        self._protected = pathspec.GitIgnoreSpec.from_lines(self.protected_patterns)
        self.home = (home or Path(os.path.expanduser("~"))).resolve()
        extra = tuple(extra_secret_patterns)
        # what a search tool may exclude by name before this resolver's own check
        self.secret_patterns: tuple[str, ...] = name_globs() + extra
        self._secret_dirs = frozenset(str(self.home / d) for d in HOME_DIRS)
        self._inside_secret_dirs = tuple(d + "/" for d in self._secret_dirs)
        # one regex per kind of pattern: the check runs for every file a tree walk meets
        self._secret_name = _any_of([p.lower() for p in extra if "/" not in p])
        by_path = [p.lower() for p in extra if "/" in p]
        self._secret_path = _any_of(by_path) if by_path else None
        self._secret_system = _any_of(list(PROCESS_SECRETS))

    def resolve(self, path: str | os.PathLike[str] | None) -> Path:
        """The absolute, symlink-resolved path for a tool argument (None = the root).

        Through a symlink loop it never raises: where `Path.resolve` gives up, it returns
        the path up to the looping link (resolved) and the rest without `.` or `..` — a
        path every open refuses with ELOOP, so the tool reports an error.
        """
        if path is None or str(path) == "":
            return self.root
        text = str(path)
        if text == "~" or text.startswith("~/"):
            text = str(self.home) + text[1:]
        raw = Path(os.path.expanduser(text))
        if not raw.is_absolute():
            raw = self.root / raw
        try:
            return raw.resolve()
        except (RuntimeError, OSError):  # a symlink loop: RuntimeError before 3.13, then OSError
            pass
        current = Path(raw.anchor)
        parts = raw.parts[1:]
        for index, part in enumerate(parts):
            step = Path(os.path.realpath(current / part))
            if os.path.islink(step):  # realpath leaves only a looping symlink unresolved
                return step.joinpath(*(p for p in parts[index + 1 :] if p not in (".", "..")))
            current = step
        return current

    def is_inside_root(self, path: Path) -> bool:
        return path == self.root or path.is_relative_to(self.root)

    def relative(self, path: Path) -> str:
        """A short display form: root-relative when inside, absolute otherwise."""
        if self.is_inside_root(path):
            rel = path.relative_to(self.root).as_posix()
            return rel or "."
        return str(path)

    def is_secret(self, path: Path) -> bool:
        """True for what qshell's one list holds secret by name or place (secret_names.py),
        anything inside a secret home directory, a process's environment, a git config
        holding a credential, and what the settings' `secretPatterns` name. Names are
        compared without regard to case."""
        posix = path.as_posix()
        if posix in self._secret_dirs or posix.startswith(self._inside_secret_dirs):
            return True
        if self._secret_system.match(posix) or is_secret_name(posix):
            return True
        name = path.name.lower()
        if name in GIT_CONFIG_NAMES and ".git" in path.parts and _holds_credentials(path):
            return True
        if self._secret_name.match(name):
            return True
        if self._secret_path is None:
            return False
        # a `secretPatterns` glob with a slash: against the project-relative path, or the
        # absolute one outside the project
        inside = self.is_inside_root(path) and path != self.root
        shown = path.relative_to(self.root).as_posix() if inside else posix
        return bool(self._secret_path.match(shown.lower()))

    def hidden(self, path: Path) -> bool:
        """True when a tree-wide tool must skip `path`: it, or the file it leads to once
        symlinks are resolved, is a secret, or it is inside the root and leads out of it."""
        if self.is_secret(path):
            return True
        try:
            resolved = path.resolve(strict=False)
        except (OSError, RuntimeError):  # a symlink loop: nothing to read there
            return True
        leaves = self.is_inside_root(path) and not self.is_inside_root(resolved)
        return leaves or self.is_secret(resolved)

    def is_protected(self, path: Path) -> bool:
        """True for a path inside the root that configures qshell, git or another tool
        (`protectedPaths`): writing it always asks and never happens speculatively."""
        if not self.is_inside_root(path) or path == self.root:
            return False
        rel = path.relative_to(self.root).as_posix()
        return bool(self._protected.match_file(rel)) or bool(self._protected.match_file(rel + "/"))

    def protected_within(self, path: Path) -> list[str]:
        """The root-relative paths at or below `path` (inside the root) that are protected,
        sorted: what deleting, replacing or renaming `path` would take away. The real tree is
        walked without following symlinks; a directory that matches stands for itself and
        is not walked further. Unreadable directories count as protected (when unsure,
        refuse)."""
        if not self.is_inside_root(path) or path == self.root:
            return []
        found: list[str] = []
        stack = [path]
        while stack:
            current = stack.pop()
            if self.is_protected(current):
                found.append(current.relative_to(self.root).as_posix())
                continue
            if not current.is_dir() or current.is_symlink():
                continue
            try:
                with os.scandir(current) as entries:
                    stack.extend(Path(entry.path) for entry in entries)
            except OSError:
                found.append(current.relative_to(self.root).as_posix())
        return sorted(found)

    def read_concern(self, path: Path) -> str | None:
        """Why reading `path` needs approval, or None when it may be read freely."""
        if self.is_secret(path):
            return f"{path} looks like a secret"
        if not self.is_inside_root(path):
            return f"{path} is outside the project root {self.root}"
        return None


def _any_of(patterns: list[str]) -> re.Pattern[str]:
    """One regex matching what any of the glob `patterns` matches (case as given)."""
    if not patterns:
        return re.compile(r"(?!)")
    return re.compile("|".join(f"(?:{fnmatch.translate(p)})" for p in patterns))


def _holds_credentials(path: Path) -> bool:
    """True when the git configuration file at `path` holds a credential (it is then as
    secret as `.git-credentials`); a file that cannot be read holds none to leak."""
    try:
        with path.open("rb") as source:
            text = source.read(MAX_GIT_CONFIG_BYTES).decode("utf-8", "replace")
    except OSError:
        return False
    return GIT_CREDENTIALS.search(text) is not None
