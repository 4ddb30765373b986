"""Confinement: the sandbox a shell command qshell runs on its own is started in.

`confinement(mode, paths, environ, cache_dir, settings=…)` decides, once per session, from the
`sandbox.enabled` setting and the machine's probe (qshell/sandbox), which `JailLauncher`
the proven commands of the main loop and of speculation get (policy.proven_context puts
it in their ToolContext), or why there is none. `JailLauncher` wraps each command in a
`Jail` for the project root: the secrets it masks are the read-scope rule's
(`PathResolver.is_secret`, kept current by a `SecretIndex`), the home directories it
keeps are those on `PATH` and qshell's own interpreter prefix (never a secret one), and
`with_writable` adds files a speculation lets the command write (its private git index),
and `on_overlay` runs the command on a kernel overlay of the project instead (a speculated
command that writes: `OverlayMount`, where the probe found that works and
`sandbox.speculateCommands` is on — `commands`).
Thread-safe: a launcher is immutable but for its index, which locks.
"""

from __future__ import annotations

import math
import os
import pwd
import shutil
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from qshell.config import SandboxMode, SandboxSettings
from qshell.sandbox import (
    SANDBOX_TMP,
    Jail,
    Limits,
    OverlayMount,
    Probe,
    SandboxUnavailable,
    SecretIndex,
    filter_file,
    private_dirs,
    probe,
)
from qshell.tools.paths import GIT_CONFIG_NAMES, SECRET_HOME_DIRS, PathResolver

# toolchain managers under a home whose PATH entries (shims, proxies) need their whole tree
WHOLE_TOOLCHAINS = frozenset(
    {".pyenv", ".rbenv", ".nodenv", ".nvm", ".asdf", ".volta", ".bun", ".deno", ".sdkman"}
    | {".goenv", ".rustup"}
)
# what else of the home a PATH entry there needs (~/.cargo/bin's rustup proxies, but never
# the rest of ~/.cargo, which keeps the registry token)
COMPANIONS: dict[str, tuple[str, ...]] = {".cargo": (".rustup",)}
CPU_MARGIN_S = 5  # CPU seconds beyond the command's wall-clock limit


@dataclass(frozen=True)
class JailLauncher:
    """Starts commands in a Jail for `paths.root` (the shell tool's `ctx.launcher`)."""

    found: Probe
    paths: PathResolver
    index: SecretIndex
    home_binds: tuple[Path, ...]
    home_masks: tuple[Path, ...] = ()  # credential directories inside those
    writable: tuple[Path, ...] = ()
    seccomp: Path | None = None
    limits: Limits = field(default_factory=Limits)
    commands: SandboxSettings | None = None  # set when any command may be speculated
    mount: OverlayMount | None = None  # the project is this kernel overlay's merged view

    def wrap(
        self, argv: Sequence[str], environ: Mapping[str, str]
    ) -> tuple[list[str], dict[str, str]]:
        assert self.found.bwrap is not None
        jail = Jail(
            self.found.bwrap,
            self.paths.root,
            home=self.paths.home,
            masked=(*self.index.paths(), *self.home_masks),
            home_binds=self.home_binds,
            limits=self.limits,
            prlimit=self.found.prlimit,
            writable_files=self.writable,
            seccomp=self.seccomp,
            writable=None if self.mount is None else self.mount.merged,
        )
        inner = jail.argv(argv)
        return (inner if self.mount is None else self.mount.argv(inner)), jail.environ(environ)

    def on_overlay(self, layers: tuple[Path, ...], scratch: Path) -> JailLauncher:
        """This launcher, running the command on a kernel overlay of the project under
        `layers` (top first), its changes going to `scratch/upper` (the kernel's work
        directory and the mount point beside it); SandboxUnavailable when commands cannot
        be speculated here."""
        unshare, mount = self.found.unshare, shutil.which("mount")
        if self.commands is None or unshare is None or mount is None:
            raise SandboxUnavailable("commands are not speculated here")
        parts = (scratch / "upper", scratch / "work", scratch / "merged")
        where = OverlayMount(unshare, mount, self.paths.root, *parts, layers=layers)
        return replace(self, mount=where)

    def with_writable(self, *paths: Path) -> JailLauncher:
        """This launcher, letting the command write `paths` too (files outside the root)."""
        return replace(self, writable=(*self.writable, *paths))

    def timed(self, timeout_s: float) -> JailLauncher:
        """This launcher with a CPU limit that fits a command of `timeout_s` seconds."""
        cpu = math.ceil(timeout_s) + CPU_MARGIN_S
        return replace(self, limits=replace(self.limits, cpu_s=cpu))


@dataclass(frozen=True, slots=True)
class Confinement:
    """What a session's proven commands run in: a launcher, or why there is none."""

    launcher: JailLauncher | None
    missing: str  # set when `sandbox.enabled: on` and there is no launcher
    note: str  # said once at start-up when `auto` finds no sandbox ("" otherwise)
    mode: str  # for /stats and `qshell doctor`


def confinement(
    mode: SandboxMode,
    paths: PathResolver,
    environ: Mapping[str, str],
    cache_dir: Path | None,
    *,
    settings: SandboxSettings | None = None,
) -> Confinement:
    """The Confinement of a session in `paths.root` with `sandbox.enabled: mode` (and the
    other `sandbox` settings: whether speculation runs any command)."""
    if mode is SandboxMode.OFF:
        return Confinement(None, "", "", "off (sandbox.enabled: off)")
    found = probe(cache_dir)
    if not found.jail:
        if mode is SandboxMode.ON:
            missing = f"the sandbox is required (sandbox.enabled: on) but {found.reason}"
            return Confinement(None, missing, "", f"unavailable: {found.reason}")
        note = f"no sandbox here, shell commands are checked by the proof alone: {found.reason}"
        return Confinement(None, "", note, f"off: {found.reason}")
    index = SecretIndex(paths.root, paths.is_secret, recheck=_content_decides)
    binds = _home_binds(paths, environ)
    masks = tuple(
        d
        for d in (home / name for home in _homes(paths) for name in SECRET_HOME_DIRS)
        if any(d.is_relative_to(b) for b in binds)
    )
    speculates = settings is not None and settings.speculate_commands and found.overlay
    commands = settings if speculates else None
    seccomp = filter_file(cache_dir) if found.seccomp else None
    launcher = JailLauncher(found, paths, index, binds, masks, seccomp=seccomp, commands=commands)
    return Confinement(launcher, "", "", found.mode)


def _content_decides(path: Path) -> bool:
    """A file whose secrecy depends on what it holds (a git config with a credential)."""
    return path.name.lower() in GIT_CONFIG_NAMES and ".git" in path.parts


def _homes(paths: PathResolver) -> list[Path]:
    """The user's home as `$HOME` says and as the password database does (they differ when
    HOME is pointed elsewhere, as tests and CI do)."""
    homes = [paths.home]
    try:
        listed = Path(pwd.getpwuid(os.getuid()).pw_dir)
    except KeyError:  # a uid with no entry (some containers)
        return homes
    return homes if listed in homes or listed == Path("/") else [*homes, listed]


def _home_binds(paths: PathResolver, environ: Mapping[str, str]) -> tuple[Path, ...]:
    """What a command needs to find its programs that the jail's emptied directories would
    hide, read-only: each `PATH` entry (resolved) under a home, /tmp or another emptied
    directory — the entry itself, or the toolchain or environment it belongs to (`~/.pyenv`
    for its shims, a virtual environment for its `bin`) — and qshell's own interpreter
    prefixes. Never a home or an emptied directory itself, never a secret."""
    homes = _homes(paths)
    emptied = [Path(SANDBOX_TMP), *private_dirs()]
    wanted = [Path(p) for p in environ.get("PATH", "").split(":") if p.startswith("/")]
    wanted += [Path(sys.prefix), Path(sys.base_prefix)]
    binds: list[Path] = []
    for entry in wanted:
        path = Path(os.path.realpath(entry))
        if not any(path.is_relative_to(d) for d in emptied):
            continue  # the jail shows it as it is
        for keep in _kept(path, homes):
            too_wide = keep == Path("/") or keep in homes or keep in emptied
            secret = paths.is_secret(keep) or paths.is_secret(path)
            if not too_wide and not secret and keep not in binds:
                binds.append(keep)
    return tuple(binds)


def _kept(path: Path, homes: list[Path]) -> list[Path]:
    """The directories to bind back for the resolved PATH entry (or prefix) `path`."""
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
    for parent in (path, path.parent):  # a virtual or conda environment, or its bin/
        if (parent / "pyvenv.cfg").is_file() or (parent / "conda-meta").is_dir():
            return [parent]
    return [path]
