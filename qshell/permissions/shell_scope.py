"""The read scope of a proven shell command: the files it reads, computed as bash will.

`shellproof` proves from the text alone that a command only reads, and lists what it reads
as `Read`s. Whether those reads stay in scope depends on the filesystem and on bash's own
expansions, so this module asks the same bash that will run the command: a word with
braces, tildes or globs (`{~,}/.ssh/id_rsa`, `~-/x`, `.e*`, `config/*`) is expanded by
`bash -c 'printf "%s\0" WORD'` in the directory the command reads it from, with the
environment the command will run with — but only a word made of plain characters, quotes
and escapes, which nothing can make run code. Each resulting path, symlinks resolved, must
be inside the project root and no secret; a read marked recursive (grep -r, rg, find, du,
tree, ls -R) must not be able to reach a secret file or a symlink that leads out of the
root or to a secret anywhere below it. A file whose name is no secret's may still hold
one, or be a secret under another name (a hard link): without a jail, reading it asks too.
Where the command runs in the session's jail
(`Sandboxed`, permissions/confine.py's JailLauncher), what the jail masks is no concern: a
recursive read may reach it (`grep -rn main .` beside a `.env`; the jail shows the secret
as an unreadable file), and a git configuration the jail shows without its credentials may
be read by name too; a secret it does not mask — a symlink out of the root, a secret the
index does not know — still is. Anything it cannot decide (a path known only at run
time, an expansion that fails, a tree too large to walk) is a concern: the command asks.
(A `git` command's own checks are git_scope.py's.) It runs nothing but that `printf`, with
a short timeout. Thread-safe.
"""

from __future__ import annotations

import os
import re
import stat
import subprocess
from collections.abc import Iterator, Mapping
from pathlib import Path, PurePosixPath
from typing import Any, Protocol

from qshell import shellproof
from qshell.permissions.file_secrets import holds_secret
from qshell.shellproof import Read
from qshell.tools.paths import PathResolver

EXPANDS = frozenset("~{*?[")  # characters after which bash may read another path
# a word nothing can make run code: plain characters, backslash escapes, '…' and "…"
# without `$`, backquotes or escapes of them
_PLAIN = r"[A-Za-z0-9_./,:=@%^+~*?\[\]{}!#-]"
_SAFE_WORD = re.compile(rf"(?:{_PLAIN}|\\[^\n]|'[^']*'|\"(?:[^\"$`\\\n]|\\[^$`\n])*\")+")
EXPAND_TIMEOUT_S = 2.0
MAX_EXPANSIONS = 1_000  # more paths than this from one word: too many to check
MAX_WALK_ENTRIES = 50_000  # a recursive read of a larger tree asks instead
GIT_DIR_NAME = ".git"


class Sandboxed(Protocol):
    """The jail a proven command will run in, as the read-scope rules ask it."""

    def conceals(self, path: Path) -> bool:
        """Whether a command in it cannot read the secret at `path` (masked, or a copy)."""

    def redacts(self, path: Path) -> bool:
        """Whether it shows the file at `path` as a copy without its credentials."""


def read_concern(
    read: Read, paths: PathResolver, environ: Mapping[str, str], jail: Sandboxed | None = None
) -> str | None:
    """Why `read` leaves the read scope (or cannot be checked), or None when it stays in;
    `jail` is the sandbox the command will run in, if it runs in one."""
    base = _base(read, paths)
    if base is None:
        return f"{read.cwd} is only known when the command runs"
    targets = _targets(read, base, paths, environ)
    if isinstance(targets, str):
        return targets
    for target in targets:
        concern = _path_concern(target, paths, jail)
        if concern is None and read.recursive:
            concern = walk_concern(target, paths, jail)
        if concern:
            return concern
    return None


def _base(read: Read, paths: PathResolver) -> Path | None:
    """The directory a relative path of `read` is read from (a subshell's `cd` target);
    None for `~+`, `~-`, `~user` and the like, which only bash knows, and for a target
    with `..`: bash's `cd` takes `..` logically (`cd link/..` is where the link sits, not
    its target's parent) while opening a file takes it physically."""
    cwd = read.cwd
    if not cwd:
        return paths.root
    if cwd.startswith("~") and cwd != "~" and not cwd.startswith("~/"):
        return None
    if ".." in PurePosixPath(cwd).parts:
        return None
    return paths.resolve(cwd)


def _targets(
    read: Read, base: Path, paths: PathResolver, environ: Mapping[str, str]
) -> list[Path] | str:
    """The paths `read` names once bash has expanded it, or why they cannot be known."""
    if read.literal and not EXPANDS.intersection(read.raw):
        return [_absolute(read.text, base)]
    if not _SAFE_WORD.fullmatch(read.raw) or read.raw.startswith("#"):
        return f"{read.text} is only known when the command runs"
    expanded = expand_word(read.raw, base, environ)
    if expanded is None:
        return f"{read.text} could not be expanded to check what it reads"
    if len(expanded) > MAX_EXPANSIONS:
        return f"{read.text} names too many files to check"
    if not read.literal and any(text.startswith("-") for text in expanded):
        # a planted file named `-r` or `--files0-from=.env` turns the glob into an option
        return f"{read.text} expands to a name the command would take as an option"
    return [_absolute(text, base) for text in expanded if text and text != "-"]


def _absolute(text: str, base: Path) -> Path:
    path = Path(text)
    return path if path.is_absolute() else base / path


def expand_word(raw: str, cwd: Path, environ: Mapping[str, str]) -> list[str] | None:
    """What bash makes of one safe word (brace, tilde and pathname expansion, quote
    removal) in `cwd` with `environ`; None when bash fails or takes too long."""
    if not cwd.is_dir():
        return [raw] if not EXPANDS.intersection(raw) else None
    script = f'printf "%s\\0" {raw}'
    argv = ["bash", "--noprofile", "--norc", "-c", script]
    done = run_quietly(argv, cwd, {**environ, "PWD": str(cwd)}, EXPAND_TIMEOUT_S)
    if done is None or done.returncode != 0:
        return None
    out = done.stdout.decode("utf-8", "surrogateescape")
    return out.split("\0")[:-1]


def run_quietly(
    argv: list[str],
    cwd: Path,
    environ: Mapping[str, str],
    timeout_s: float,
    *,
    given: bytes | None = None,
) -> subprocess.CompletedProcess[bytes] | None:
    """Run a helper command the checks rely on (bash's expansion, `git config`…): no stdin
    but `given`, output captured, at most `timeout_s`; None when it cannot start or takes
    too long."""
    stdin: dict[str, Any] = {"stdin": subprocess.DEVNULL} if given is None else {"input": given}
    try:
        return subprocess.run(
            argv,
            cwd=cwd,
            env=dict(environ),
            capture_output=True,
            timeout=timeout_s,
            check=False,
            **stdin,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None


def _path_concern(path: Path, paths: PathResolver, jail: Sandboxed | None) -> str | None:
    """Why reading `path` (and what it resolves to) is out of scope, or None."""
    try:
        resolved = paths.resolve(path)
    except (OSError, RuntimeError):
        return f"{path} cannot be resolved (a symlink loop?)"
    if jail is not None and paths.is_inside_root(resolved) and jail.redacts(resolved):
        return None  # `cat .git/config`: the jail shows it without its credentials
    if paths.is_secret(path):
        return f"{paths.relative(path)} looks like a secret"
    if _in_object_store(resolved):
        return f"{paths.relative(resolved)} is git's object store: the history, read with git"
    return paths.read_concern(resolved) or _unjailed_concern(resolved, paths, jail)


def _in_object_store(path: Path) -> bool:
    """Inside a `.git/objects` directory: the history compressed, whose secrets only git's
    own commands are checked for (git_history.py)."""
    parts = path.parts
    return any(
        parts[i] == GIT_DIR_NAME and parts[i + 1] == "objects" for i in range(len(parts) - 1)
    )


def _unjailed_concern(path: Path, paths: PathResolver, jail: Sandboxed | None) -> str | None:
    """Why a command that runs without a jail may not read the regular file `path`, though
    its name is no secret's: it holds a secret (permissions/file_secrets.py), or it has
    other names, which may be a secret's (`ln .env notes.txt`). The jail shows the first as
    a copy without it and masks the second by every name (sandbox/masks.py)."""
    if jail is not None:
        return None
    try:
        info = path.lstat()
    except OSError:
        return None  # nothing there to read
    if not stat.S_ISREG(info.st_mode):
        return None
    if info.st_nlink > 1:
        return f"{paths.relative(path)} has other hard links, which may be a secret's"
    if holds_secret(path, info):
        return f"{paths.relative(path)} holds a secret"
    return None


def walk_concern(start: Path, paths: PathResolver, jail: Sandboxed | None = None) -> str | None:
    """Why a recursive read of `start` could reach a secret or leave the root, or None.

    Every entry below it is looked at — hidden and ignored ones too, since not every tool
    honours .gitignore — except inside `.git`; symlinks are not followed but each one must
    lead to a non-secret inside the root, or (with `jail`) to one the jail conceals; a
    secret entry must be one the jail conceals.
    """
    try:
        resolved = paths.resolve(start)
    except (OSError, RuntimeError):
        return f"{start} cannot be resolved (a symlink loop?)"
    if not resolved.is_dir():
        return None
    for count, entry in enumerate(_entries(resolved), 1):
        if count > MAX_WALK_ENTRIES:
            return f"the tree below {paths.relative(resolved)} is too large to check"
        if paths.hidden(entry) and not _concealed(entry, paths, jail):
            return f"a recursive read of {paths.relative(resolved)} would reach {paths.relative(entry)}"
        concern = _unjailed_concern(entry, paths, jail)
        if concern:
            return f"a recursive read of {paths.relative(resolved)}: {concern}"
    return None


def _concealed(entry: Path, paths: PathResolver, jail: Sandboxed | None) -> bool:
    """Whether `jail` keeps the secret `entry` (a file or a symlink below the root) from a
    command in it: the file itself, or what the symlink leads to inside the root, is masked."""
    if jail is None:
        return False
    if not entry.is_symlink():
        return jail.conceals(entry)
    try:
        target = entry.resolve(strict=True)
    except (OSError, RuntimeError):  # a loop, or a link to nothing: the tool may say so
        return False
    return paths.is_inside_root(target) and jail.conceals(target)


def _entries(top: Path) -> Iterator[Path]:
    """Every entry below `top`, without following symlinks or entering `.git` — whose
    configuration files, the one place there a credential sits, are looked at instead."""
    for directory, subdirs, files in os.walk(top, followlinks=False):
        here = Path(directory)
        for name in subdirs:
            yield here / name
        for name in files:
            yield here / name
        if GIT_DIR_NAME in subdirs:
            git_dir = here / GIT_DIR_NAME
            yield from (git_dir / "config", git_dir / "config.worktree")
            yield from git_dir.glob("modules/*/config")
        subdirs[:] = [d for d in subdirs if d != GIT_DIR_NAME]


# a path component with any of these is only known when bash expands it
_EXPANDED = re.compile(r"[*?\[\]{}$`~\\'\"]")


def command_reads(
    command: str, paths: PathResolver, *, proof: shellproof.Proof | None = None
) -> list[Path]:
    """Each path the proof (`proof`, else one made here) says `command` reads: a literal one as
    named, one known only at run time as its literal leading directories (whose every file
    it may read), and the whole project for git, which reads the work tree without naming
    it (`git diff`)."""
    proof = proof or shellproof.check(command)
    found: list[Path] = []
    if any(c == "git" or c.startswith("git ") for c in proof.commands):
        found.append(paths.root)
    found += [paths.resolve(text or None) for text in _read_texts(proof)]
    return list(dict.fromkeys(found))


def read_names(command: str, paths: PathResolver, *, proof: shellproof.Proof) -> list[Path]:
    """The paths `command_reads` finds, as named — absolute but with no symlink resolved —
    so the links a read goes through can be noted too."""
    found = []
    for text in _read_texts(proof):
        if text == "~" or text.startswith("~/"):
            text = str(paths.home) + text[1:]
        found.append(Path(os.path.normpath(paths.root / text)) if text else paths.root)
    return list(dict.fromkeys(found))


def _read_texts(proof: shellproof.Proof) -> list[str]:
    """Each read of the proof as bash would name it from the project root ("" for the root)."""
    texts = []
    for read in proof.reads:
        text = read.text if read.literal else _literal_prefix(read.text)
        if read.cwd and not text.startswith(("/", "~")):
            text = f"{read.cwd}/{text}" if text else read.cwd
        texts.append(text)
    return texts


def _literal_prefix(text: str) -> str:
    """The leading components of a shell path that bash does not expand."""
    kept: list[str] = []
    for part in text.split("/"):
        if _EXPANDED.search(part):
            break
        kept.append(part)
    if kept == [""] and text.startswith("/"):
        return "/"
    return "/".join(kept)
