"""Confinement: the sandbox a shell command qshell runs on its own is started in.

`confinement(mode, paths, environ, cache_dir, settings=…)` decides, once per session, from the
`sandbox.enabled` setting and the machine's probe (qshell/sandbox), which `JailLauncher`
the proven commands of the main loop and of speculation get (policy.proven_context puts
it in their ToolContext), or why there is none. `JailLauncher` wraps each command in a
`Jail` for the project root: the secrets it masks are the read-scope rule's
(`PathResolver.is_secret` over qshell/secret_names.py, kept current by a `SecretIndex`),
in the project and in every directory it gives back of the emptied ones — but a git
configuration holding a credential is shown as a copy without it
(permissions/git_credentials.py), so git works there and nothing prints the credential;
`conceals` and `redacts` tell the read-scope rules which secrets a jailed command cannot
read, so a recursive read or a git command that would reach one runs without asking only
where it runs jailed. What of the emptied directories it gives back is permissions/binds.py's
(the programs on `PATH` with their environments, qshell's own interpreter, a worktree's
repository; never a secret); the processes of each command are capped by a pids cgroup
where one can be made (sandbox/pids.py: the rlimit does not bind root), and
`with_writable` adds files a speculation lets the command write (its private git index),
and `on_overlay` runs the command on a kernel overlay of the project instead (a speculated
command that writes: `OverlayMount`, where the probe found that works and
`sandbox.speculateCommands` is on — `commands`), the directories the jail empties shown
from an outside view whose skeleton `wrap` makes for each command (sandbox/outside.py), and
with `hiding` the project's secrets left to stand-ins in the command's upper layer
(sandbox/standins.py) instead of masks; `pinned` keeps one look at the secret indexes for
one command, so its checks, stand-ins and masks see the same secrets and each tree is
statted once (a look stats every directory of it).
Thread-safe: a launcher is immutable but for its index, which locks.
"""

from __future__ import annotations

import contextlib
import math
import shutil
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from qshell.config import SandboxMode, SandboxSettings
from qshell.permissions.binds import binds_for
from qshell.permissions.file_secrets import Copies, holds_secret
from qshell.permissions.git_credentials import RedactedConfigs
from qshell.sandbox import (
    Jail,
    OverlayMount,
    Probe,
    ResourceLimits,
    SandboxUnavailable,
    SecretIndex,
    filter_file,
    probe,
    sysview,
)
from qshell.sandbox.jail import system_secrets
from qshell.sandbox.masks import BOUND, Walk
from qshell.sandbox.outside import layout
from qshell.sandbox.pids import PidsCap, open_cap
from qshell.tools.paths import GIT_CONFIG_NAMES, PathResolver

CPU_MARGIN_S = 5  # CPU seconds beyond the command's wall-clock limit


@dataclass(frozen=True)
class JailLauncher:
    """Starts commands in a Jail for `paths.root` (the shell tool's `ctx.launcher`)."""

    found: Probe
    paths: PathResolver
    index: SecretIndex
    home_binds: tuple[Path, ...]
    home_masks: tuple[Path, ...] = ()  # credential directories inside those
    alias_binds: tuple[tuple[Path, Path], ...] = ()  # (resolved, the path PATH names)
    writable: tuple[Path, ...] = ()
    seccomp: Path | None = None
    limits: ResourceLimits = field(default_factory=ResourceLimits)
    commands: SandboxSettings | None = None  # set when any command may be speculated
    mount: OverlayMount | None = None  # the project is this kernel overlay's merged view
    bound: tuple[SecretIndex, ...] = ()  # the secrets of each directory given back
    pids: PidsCap | None = None  # where each command's process cap is made
    configs: RedactedConfigs = field(default_factory=RedactedConfigs)
    contents: Copies = field(default_factory=Copies)  # of files that hold a secret
    copies: bool = True  # show those as copies; False: as they are (`showing_files`)
    # what the secret indexes said for one command (`pinned`): its masks and its copies
    looked: Looked | None = None

    def wrap(
        self, argv: Sequence[str], environ: Mapping[str, str]
    ) -> tuple[list[str], dict[str, str]]:
        assert self.found.bwrap is not None
        try:
            group = None if self.pids is None else self.pids.group(self.limits.processes)
        except OSError as exc:
            raise SandboxUnavailable(f"the command's process cap could not be set: {exc}") from exc
        mount = self.mount
        standins = frozenset() if mount is None else mount.standins
        masked: list[Path] = []
        replaced: list[tuple[Path, Path]] = []
        looked = self._look()  # once: each look stats every directory of each tree
        by_content = looked.by_content
        shown = frozenset() if self.copies else by_content
        for path in looked.masked:
            if path in standins or path in shown:
                continue  # a stand-in in the command's own layer (standins.py), or as it is
            copy = self._copy(path, by_content)
            if copy is None:
                masked.append(path)
            else:
                replaced.append((copy, path))
        jail = Jail(
            self.found.bwrap,
            self.paths.root,
            home=self.paths.home,
            masked=tuple(masked),
            replaced=tuple(replaced),
            home_binds=self.home_binds,
            alias_binds=self.alias_binds,
            limits=self.limits,
            prlimit=self.found.prlimit,
            writable_files=self.writable,
            seccomp=self.seccomp,
            writable=None if mount is None else mount.merged,
            pids_join=group,
            outside=None if mount is None else mount.outside_merged,
            setup=None if mount is None else mount.setup(),
        )
        if mount is not None and mount.etc_merged is not None:
            jail = replace(
                jail,
                etc_view=mount.etc_merged,
                etc_hidden=frozenset(mount.etc_secrets),
                etc_mounts=mount.etc_mounts,
            )
        made = jail.bwrap_args()
        if mount is not None and mount.outside is not None:
            mount.furnish(layout(made, mount.outside / "merged"))
        return jail.argv(argv, made), jail.environ(environ)

    def masked(self) -> tuple[Path, ...]:
        """Every path the jail hides behind a mask: the project's secrets, the credential
        directories and secrets of what is bound back, the system's readable secrets."""
        return (*self._masked(), *system_secrets())

    def _masked(self) -> tuple[Path, ...]:
        return self._look().masked

    def _look(self) -> Looked:
        """What the secret indexes say now, or what they said for this command (`pinned`)."""
        if self.looked is not None:
            return self.looked
        paths, by_content = self.index.snapshot()
        bound = [path for index in self.bound for path in index.paths()]
        return Looked((*paths, *self.home_masks, *bound), by_content)

    def pinned(self) -> JailLauncher:
        """This launcher with what the secret indexes say now kept for one command: its
        checks, stand-ins and masks then see the same secrets, from one look at each tree
        (a look stats every directory of it). SandboxUnavailable when the project is too
        large to mask."""
        return replace(self, looked=self._look())

    def conceals(self, path: Path) -> bool:
        """Whether a command in this jail cannot read the secret at `path` (absolute, no
        symlink in it): it, or a directory above it, is masked or shown as a copy without
        its credentials. False when the project is too large to mask (nothing runs then)."""
        try:
            masked = self._masked()
        except SandboxUnavailable:
            return False
        return any(path == m or path.is_relative_to(m) for m in masked)

    def redacts(self, path: Path) -> bool:
        """Whether this jail shows the file at `path` as a copy with every credential
        replaced by a marker (a git configuration, a file holding a secret): git reads it,
        and so may any command."""
        try:
            masked = self._masked()
        except SandboxUnavailable:
            return False
        return path in masked and self._copy(path, self._look().by_content) is not None

    def _copy(self, path: Path, by_content: frozenset[Path]) -> Path | None:
        """The copy this jail shows in place of the secret at `path`, if it shows one: a
        git configuration without its credentials, a project file that holds a secret
        (one of `by_content`, the index's) with each one a marker
        (permissions/file_secrets.py); None: it is masked."""
        if _content_decides(path):
            return self.configs.copy_of(path)
        if path in by_content:
            return self.contents.copy_of(path)
        return None

    def on_overlay(self, layers: tuple[Path, ...], scratch: Path) -> JailLauncher:
        """This launcher, running the command on a kernel overlay of the project under
        `layers` (top first), its changes going to `scratch/upper` (the kernel's work
        directory and the mount point beside it); SandboxUnavailable when commands cannot
        be speculated here."""
        unshare, mount = self.found.unshare, shutil.which("mount")
        if self.commands is None or unshare is None or mount is None:
            raise SandboxUnavailable("commands are not speculated here")
        parts = (scratch / "upper", scratch / "work", scratch / "merged")
        outside = scratch / "outside"
        where = OverlayMount(
            unshare, mount, self.paths.root, *parts, layers, outside, by_table=self.found.by_table
        )
        if self.found.etc_view:  # /etc from a view that hides its secrets (sysview.py)
            mounts = sysview.submounts()
            hidden = sysview.hideable(system_secrets(), mounts)
            where = replace(where, etc_layer=scratch / "etc", etc_secrets=hidden, etc_mounts=mounts)
        return replace(self, mount=where)

    def hiding(self, standins: frozenset[Path]) -> JailLauncher:
        """This launcher on its overlay, binding no mask over the secrets in `standins`:
        the command's upper layer holds a stand-in for each (sandbox/standins.py)."""
        assert self.mount is not None
        return replace(self, mount=replace(self.mount, standins=standins))

    def showing_files(self) -> JailLauncher:
        """This launcher, showing the files that hold a secret as they are, not as copies
        without it: for a line of git commands, which would take a copy for a change (a
        tracked file as `M` in `git status`) and whose output reaches the scanner whole
        (permissions/policy.py)."""
        return replace(self, copies=False)

    def with_writable(self, *paths: Path) -> JailLauncher:
        """This launcher, letting the command write `paths` too (files outside the root)."""
        return replace(self, writable=(*self.writable, *paths))

    def timed(self, timeout_s: float) -> JailLauncher:
        """This launcher with a CPU limit that fits a command of `timeout_s` seconds."""
        cpu = math.ceil(timeout_s) + CPU_MARGIN_S
        return replace(self, limits=replace(self.limits, cpu_s=cpu))


@dataclass(frozen=True, slots=True)
class Looked:
    """What the secret indexes said at one look: every path the jail masks but the
    system's (the project's secrets, the credential directories and secrets of what is
    bound back), and which of the project's are secret for what they hold."""

    masked: tuple[Path, ...]
    by_content: frozenset[Path]


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
    walk = Walk(recheck=_content_decides, content=holds_secret)
    index = SecretIndex(paths.root, paths.is_secret, walk)
    # the first walk reads every file of the project: started now, it is done (or under
    # way, the first command waiting on its lock) by the time a command needs it
    threading.Thread(target=_warm, args=(index,), name="qshell-secret-index", daemon=True).start()
    given = binds_for(paths, environ)
    walk = replace(BOUND, recheck=_content_decides)
    bound = tuple(SecretIndex(path, paths.is_secret, walk) for path in given.scanned)
    speculates = settings is not None and settings.speculate_commands and found.overlay
    commands = settings if speculates else None
    seccomp = filter_file(cache_dir) if found.seccomp else None
    launcher = JailLauncher(
        found,
        paths,
        index,
        given.same,
        given.masks,
        alias_binds=given.aliases,
        seccomp=seccomp,
        commands=commands,
        bound=bound,
        pids=open_cap(),
        limits=ResourceLimits(processes=(settings or SandboxSettings()).max_processes),
    )
    return Confinement(launcher, "", "", found.mode)


def _warm(index: SecretIndex) -> None:
    with contextlib.suppress(SandboxUnavailable):
        index.paths()


def _content_decides(path: Path) -> bool:
    """A file whose secrecy depends on what it holds (a git config with a credential)."""
    return path.name.lower() in GIT_CONFIG_NAMES and ".git" in path.parts
