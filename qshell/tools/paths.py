"""PathResolver: the one place a tool argument becomes a real filesystem path.

It resolves against the project root (following symlinks), answers whether a path is
inside the root, and whether it looks like a secret (`.env*`, `*.pem`, `*.key`, SSH keys,
`~/.ssh`, `~/.aws`, `~/.config/gcloud`, plus patterns from settings). Policy builds the
read-scope rules on these answers; tools use them to refuse writes outside the root; the
speculation overlay will reuse the same resolver at redirect and apply time. Pure and
thread-safe: it only reads the filesystem to follow symlinks.
"""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Iterable
from pathlib import Path

SECRET_NAME_PATTERNS: tuple[str, ...] = (
    ".env",
    ".env.*",
    "*.pem",
    "*.key",
    "id_rsa*",
    "id_dsa*",
    "id_ecdsa*",
    "id_ed25519*",
    ".netrc",
    ".pgpass",
)
SECRET_HOME_DIRS: tuple[str, ...] = (".ssh", ".aws", ".config/gcloud", ".gnupg")


class PathResolver:
    """Resolves tool paths against `root` and classifies them."""

    def __init__(
        self,
        root: Path,
        *,
        home: Path | None = None,
        extra_secret_patterns: Iterable[str] = (),
    ) -> None:
        self.root = Path(root).resolve()
        self.home = (home or Path(os.path.expanduser("~"))).resolve()
        self.secret_patterns: tuple[str, ...] = SECRET_NAME_PATTERNS + tuple(extra_secret_patterns)
        self._secret_dirs = tuple(self.home / d for d in SECRET_HOME_DIRS)

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
        """True for secret-looking files, and anything inside a secret home directory."""
        if any(path == d or path.is_relative_to(d) for d in self._secret_dirs):
            return True
        name = path.name
        posix = path.as_posix()
        for pattern in self.secret_patterns:
            if "/" in pattern:
                if fnmatch.fnmatch(posix, pattern):
                    return True
            elif fnmatch.fnmatch(name, pattern):
                return True
        return False

    def read_concern(self, path: Path) -> str | None:
        """Why reading `path` needs approval, or None when it may be read freely."""
        if self.is_secret(path):
            return f"{path} looks like a secret"
        if not self.is_inside_root(path):
            return f"{path} is outside the project root {self.root}"
        return None
