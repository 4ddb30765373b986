"""Binds: what of the emptied directories a jailed command still needs, given back read-only.

The jail (qshell/sandbox/jail.py) empties `/tmp`, the home and every top-level directory
that is not the system's, so a program installed there would vanish. `binds_for(paths,
environ)` decides once per session what comes back: for each `PATH` entry (and qshell's own
interpreter prefixes) that lies in an emptied directory, the entry itself at its resolved
path and, when the entry is a symlink, at the path PATH names too; the environment it
belongs to when it is one (a virtual or conda environment, whole); a toolchain manager's
whole tree for its shims (`~/.pyenv`, `~/.nvm`, …); what a PATH entry in a home needs
beside it (`~/.local/lib` for `pip --user`, `~/.rustup` for `~/.cargo/bin`); and the
environment or package each program there links into (pipx, `uv tool`, Linuxbrew). Also
the repository directory a worktree's or submodule's `.git` file points to, so git works
in the jail. Never a home or an emptied directory itself, never a secret; credential
directories and git configs with a credential inside what comes back are masked, and
`scanned` lists what the jail walks for secret names (sandbox/masks.py): every directory
given back and every environment on `PATH` the system directories show (a venv in
`/opt`), so a `pip.conf` or a `credentials.toml` there is masked too. Reads the file
system and runs `git rev-parse` once; any thread.
"""

from __future__ import annotations

import os
import pwd
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from qshell.permissions.git_scope import git_output
from qshell.sandbox import SANDBOX_TMP, private_dirs
from qshell.secret_names import HOME_DIRS
from qshell.tools.paths import GIT_CONFIG_NAMES, PathResolver

# toolchain managers under a home whose PATH entries (shims, proxies) need their whole tree
WHOLE_TOOLCHAINS = frozenset(
    {".pyenv", ".rbenv", ".nodenv", ".nvm", ".asdf", ".volta", ".bun", ".deno", ".sdkman"}
    | {".goenv", ".rustup", ".linuxbrew"}
)
# what else of the home a PATH entry in one of its directories needs (never the rest of
# ~/.cargo, which keeps the registry token, nor of ~/.local, which keeps histories)
COMPANIONS: dict[str, tuple[str, ...]] = {".cargo": (".rustup",), ".local": (".local/lib",)}
MAX_LINKS = 2_000  # programs looked at in one PATH entry for where they link to
ENV_DEPTH = 6  # how far above a linked program its environment may be


@dataclass(frozen=True, slots=True)
class Binds:
    """What a session's jail gives back, and what inside that it masks again."""

    same: tuple[Path, ...] = ()  # bound at their own path
    aliases: tuple[tuple[Path, Path], ...] = ()  # (resolved source, the path PATH names)
    masks: tuple[Path, ...] = ()
    scanned: tuple[Path, ...] = ()  # walked for secrets: `same`, aliases' paths, environments


def binds_for(paths: PathResolver, environ: Mapping[str, str]) -> Binds:
    homes = homes_of(paths)
    emptied = [Path(SANDBOX_TMP), *private_dirs()]
    hidden = [*emptied, *homes]

    def is_hidden(path: Path) -> bool:
        return any(path.is_relative_to(d) for d in hidden)

    same: list[Path] = []
    aliases: list[tuple[Path, Path]] = []
    environments: list[Path] = []  # those on PATH that the system's directories show

    def keep(path: Path) -> None:
        too_wide = path == Path("/") or path in homes or path in emptied
        if not too_wide and not paths.is_secret(path) and path not in same:
            same.append(path)

    entries = [Path(p) for p in environ.get("PATH", "").split(":") if p.startswith("/")]
    for entry in [*entries, Path(sys.prefix), Path(sys.base_prefix)]:
        path = Path(os.path.realpath(entry))
        if is_hidden(path):
            for kept in _kept(path, homes):
                keep(kept)
            for target in _link_targets(path, is_hidden):
                keep(target)
        elif (environment := _environment(path, depth=1)) is not None:
            environments.append(environment)
        named = entry != path and ".." not in entry.parts and is_hidden(entry)
        shown = not is_hidden(path) or any(path.is_relative_to(b) for b in same)
        if named and shown and not paths.is_secret(entry):
            aliases.append((path, entry))  # a symlink on PATH (~/.nix-profile/bin): there too
    for git_dir in _git_dirs(paths, environ):
        if is_hidden(git_dir) and not git_dir.is_relative_to(paths.root):
            keep(git_dir)
    scanned = [*same, *(named for _, named in aliases), *environments]
    masks = _masks(paths, homes, same)
    return Binds(tuple(same), tuple(aliases), masks, tuple(dict.fromkeys(scanned)))


def homes_of(paths: PathResolver) -> list[Path]:
    """The user's home as `$HOME` says and as the password database does (they differ when
    HOME is pointed elsewhere, as tests and CI do)."""
    homes = [paths.home]
    try:
        listed = Path(pwd.getpwuid(os.getuid()).pw_dir)
    except KeyError:  # a uid with no entry (some containers)
        return homes
    return homes if listed in homes or listed == Path("/") else [*homes, listed]


def _kept(path: Path, homes: list[Path]) -> list[Path]:
    """The directories to bind back for the resolved PATH entry (or prefix) `path`."""
    environment = _environment(path, depth=1)
    if environment is not None:  # a virtual or conda environment, or its bin/
        return [environment]
    people = Path("/home")
    if path.is_relative_to(people) and len(path.relative_to(people).parts) > 1:
        homes = [*homes, people / path.relative_to(people).parts[0]]
    for home in homes:
        if path.is_relative_to(home) and path != home:
            top = home / path.relative_to(home).parts[0]
            if top.name in WHOLE_TOOLCHAINS:  # its shims and proxies call into the whole tree
                return [top]
            extra = [home / c for c in COMPANIONS.get(top.name, ()) if (home / c).is_dir()]
            return [path, *extra]
    return [path]


def _environment(path: Path, *, depth: int) -> Path | None:
    """The virtual or conda environment `path` is in, looking at most `depth` levels up."""
    for parent in [path, *path.parents][: depth + 1]:
        if (parent / "pyvenv.cfg").is_file() or (parent / "conda-meta").is_dir():
            return parent
    return None


def _link_targets(directory: Path, is_hidden: Callable[[Path], bool]) -> list[Path]:
    """For each program in `directory` that is a symlink into a hidden place, what to give
    back for it: the environment it is in, else the package prefix of its `bin/`, else its
    own directory (pipx and `uv tool` link into their environments, Linuxbrew into its
    Cellar)."""
    try:
        children = sorted(directory.iterdir())[:MAX_LINKS]
    except OSError:
        return []
    found: list[Path] = []
    for child in children:
        if not child.is_symlink():
            continue
        target = Path(os.path.realpath(child))
        if target.is_relative_to(directory) or not is_hidden(target):
            continue
        home = _environment(target.parent, depth=ENV_DEPTH)
        if home is None:
            home = target.parent.parent if target.parent.name == "bin" else target.parent
        if home not in found:
            found.append(home)
    return found


def _git_dirs(paths: PathResolver, environ: Mapping[str, str]) -> list[Path]:
    """The repository directories of the project's git (a worktree's own and the common
    one, a submodule's), which may lie outside it."""
    args = ["rev-parse", "--path-format=absolute", "--git-dir", "--git-common-dir"]
    found = git_output(args, paths.root, environ)
    if not found:
        return []
    return list(dict.fromkeys(Path(line) for line in found.splitlines() if line.startswith("/")))


def _masks(paths: PathResolver, homes: list[Path], binds: list[Path]) -> tuple[Path, ...]:
    """Credential directories of a home, and git configs with a credential, that lie
    inside what is given back."""
    candidates = [home / name for home in homes for name in HOME_DIRS]
    candidates += [b / name for b in binds for name in GIT_CONFIG_NAMES]
    inside = [c for c in candidates if any(c.is_relative_to(b) for b in binds)]
    return tuple(c for c in inside if c.name not in GIT_CONFIG_NAMES or paths.is_secret(c))
