"""Speculation of any command: a shell command not proven read-only runs on a kernel overlay.

Where the probe found that a user-namespace overlayfs works and `sandbox.speculateCommands`
is on (the session's `JailLauncher` then carries `commands`), the gate no longer stops at
a shell command that may write: `run_on_overlay` runs it in the jail with the project
replaced by a kernel overlay whose upper layer is the speculation overlay's `upper/`
(sandbox.OverlayMount), so its writes, deletions and replaced directories land there and
nothing real changes; the project's secrets are stand-ins in that layer rather than masks
(sandbox/standins.py) and the directories the jail empties are shown from an outside view
whose writes are seen (sandbox/outside.py). A command whose words name a masked secret is a
boundary before it runs (overlay_reach.named_secret); one that read, wrote or removed a
secret's stand-in — by whatever name it computed —, wrote outside the project (but for
temporary files: new in /tmp, or in ~/.cache), or whose output shows a write refused as
read-only or a failure on a secret or a hidden path outside the project is one after it
(overlay_reach.refusal): its live run, unjailed, would not have done the same. Since what
such a command reads is unknown, the whole project is fingerprinted first, and its base
taken (`Overlay.record_base`, overlay/baseline.py: each entry's type, inode, size, times,
mode and listing; too many files: a boundary).
Afterwards a symlink it made, a protected path it changed — or one below a directory it
deleted, replaced or renamed away (`protected_changes`) —, a file with other hard links
that it changed, deleted or linked again (`hard_linked_away`: the overlay copies one name up
alone, so the others would show the old file), a setuid bit or file capability, a change
to the project directory's own mode or attrs (`Overlay.prepare_layer`),
or output that shows a network failure (no result built on a failed download is shown as
done), or an overlay that could not be mounted (a file system mounted inside the project:
what ran was the failed mount, `OverlayMount.mounted`) is a boundary and its layer is dropped; else the overlay takes the layer in
(`Overlay.absorb`: writes, whiteouts as deletions, opaque directories as replacements;
whatever it touched that the user changed since the base makes accept a conflict). Files
the project ignores (`.gitignore`, `__pycache__`, `.pytest_cache`, …) are taken in too, as
a real run leaves them, unless `sandbox.applyIgnored` is off: then they are left out and
the command's result names them as not applied. `outside_world` says which commands are
not worth running there at all (shellproof.reach). It runs the command with the proven
commands' sanitised environment (no secrets) but the user's whole PATH and toolchain
variables (`command_environ`), and the session's own timeout. Functions;
thread-safe as the overlay they write.
"""

from __future__ import annotations

import contextlib
import os
import stat as stat_module
import subprocess
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from qshell import shellproof
from qshell.errors import QshellError
from qshell.followup.overlay_reach import BLIND, SECRET_REASON, named_secret, refusal
from qshell.overlay import Overlay, OverlayEscape, ReadsUnrecorded
from qshell.permissions.confine import JailLauncher
from qshell.permissions.git_credentials import GIT_TIMEOUT_S
from qshell.permissions.policy import PROTECTED_REASON
from qshell.sandbox import SandboxUnavailable
from qshell.sandbox.outside import remove_tree
from qshell.sandbox.standins import plant
from qshell.tools.base import ErrorType, Tool, ToolContext, ToolResult
from qshell.tools.paths import PathResolver

NOT_APPLIED = "not applied: the project ignores them and sandbox.applyIgnored is off"
MAX_LISTED = 20  # paths named in that note; the rest counted
SCRATCH_DIR = "kernel"  # beside upper/: the kernel overlay's work directory and mount point
IGNORED_PARTS = frozenset(
    {"__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache", ".hypothesis", ".tox"}
)
TOOLCHAIN_ENV = frozenset(
    {"VIRTUAL_ENV", "CONDA_PREFIX", "CONDA_DEFAULT_ENV", "PYTHONPATH", "NODE_PATH", "GOPATH"}
)
UNMOUNTED = (
    "the project could not be mounted as a kernel overlay (a file system mounted inside it?)"
)
LINKED_REASON = "has other hard links, which a speculated change would not keep in step"


class RunRefused(QshellError):
    """The command's run cannot stand as a speculated result (`str()` says why)."""


def overlay_launcher(ctx: ToolContext) -> JailLauncher | None:
    """The session's jail when any command may be speculated in it, else None."""
    sandbox = ctx.sandbox
    if isinstance(sandbox, JailLauncher) and sandbox.commands is not None:
        return sandbox
    return None


def outside_world(command: str) -> str | None:
    """Why `command` is not worth speculating ("needs the network: pip install"), or None."""
    found = shellproof.reach(command)
    return None if found is None else f"it needs the network or a person: {found}"


def run_on_overlay(
    tool: Tool,
    args: Any,
    ctx: ToolContext,
    overlay: Overlay,
    launcher: JailLauncher,
    *,
    proven: bool = False,
) -> ToolResult:
    """Run the shell call on a kernel overlay of the project and the speculation's changes,
    then take what it changed into `overlay`; RunRefused when its result cannot stand (the
    caller makes that a boundary; nothing of it is then taken in). A `proven` read-only
    command (here only to see the pending edits) runs as live, its secrets masked rather
    than stood in for: reading past them is what its live run does too."""
    try:
        launcher = launcher.pinned()  # one look at the secrets for the checks and the jail
        masked = launcher.masked()
    except SandboxUnavailable as exc:  # too many files to find the secrets in
        raise RunRefused(str(exc)) from None
    secret = (
        None if proven else named_secret(str(getattr(args, "command", "")), launcher.paths, masked)
    )
    if secret is not None:
        raise RunRefused(f"it names {secret}, {SECRET_REASON}")
    try:
        overlay.record_base(stop=lambda: ctx.cancel.cancelled)
    except ReadsUnrecorded as exc:
        raise RunRefused(str(exc)) from None
    limit = min(ctx.shell_timeout_s, ctx.shell_timeout_cap_s)
    scratch = overlay.directory / SCRATCH_DIR
    try:
        jailed = launcher.timed(limit).on_overlay((overlay.upper,), scratch)
        assert jailed.mount is not None
        remove_tree(jailed.mount.upper)  # a fresh layer for this command
        jailed.mount.prepare()
        overlay.prepare_layer(jailed.mount.upper)  # the project directory's mode and attrs
        hidden = () if proven else masked
        planted = plant(jailed.mount.upper, launcher.paths.root, hidden, jailed.mount.layers)
    except (SandboxUnavailable, OSError) as exc:
        raise RunRefused(str(exc)) from None
    if planted.planted and planted.blind:
        raise RunRefused(BLIND)
    jailed = jailed.hiding(planted.paths)
    mount = jailed.mount
    assert mount is not None
    environ = command_environ(ctx.environ)
    try:
        try:
            result = tool.run(args, replace(ctx, environ=environ, launcher=jailed))
        finally:
            mount.clean()
        if not _cancelled(result):
            if not mount.mounted():
                raise RunRefused(UNMOUNTED)  # what ran was the failed mount, not the command
            why = refusal(result.llm_content, mount, planted, launcher, () if proven else masked)
            if why is not None:
                raise RunRefused(why)
            try:
                planted.remove()  # what is left in the layer is what the command did
            except OSError as exc:
                raise RunRefused(str(exc)) from None
        skipped = _take_in(result, ctx, overlay, mount.upper, keep_ignored=_keeps_ignored(launcher))
    finally:
        with contextlib.suppress(SandboxUnavailable):
            remove_tree(mount.upper)
        with contextlib.suppress(SandboxUnavailable):
            mount.discard_outside()
    return not_applied(result, skipped) if skipped else result


def not_applied(result: ToolResult, skipped: list[str]) -> ToolResult:
    """`result` saying which of the command's changes will not be applied (what the model
    and the user read must not differ from what accept does)."""
    shown = ", ".join(skipped[:MAX_LISTED])
    if len(skipped) > MAX_LISTED:
        shown += f" and {len(skipped) - MAX_LISTED} more"
    note = f"\n[{NOT_APPLIED}: {shown}]"
    return replace(result, llm_content=result.llm_content + note, display=result.display + note)


def _keeps_ignored(launcher: JailLauncher) -> bool:
    return launcher.commands is not None and launcher.commands.apply_ignored


def _cancelled(result: ToolResult) -> bool:
    return result.error is not None and result.error.type is ErrorType.CANCELLED


def _take_in(
    result: ToolResult, ctx: ToolContext, overlay: Overlay, layer: Path, *, keep_ignored: bool
) -> list[str]:
    """Bring what a command left in its `layer` into the overlay, or say why it cannot stand;
    the changes left out (sorted), under ignored paths when not `keep_ignored`. A cancelled
    command's partial changes are dropped: its call is answered again live."""
    if _cancelled(result):
        return []
    try:
        changed = overlay.changes_in(layer)
        protected = protected_changes(ctx.paths, changed)
        if protected:
            raise RunRefused(f"{', '.join(protected)} {PROTECTED_REASON}")
        linked = hard_linked_away(ctx.root, overlay.upper, changed)
        if linked:
            raise RunRefused(f"{', '.join(linked)} {LINKED_REASON}")
        unwanted = set()
        if changed and not keep_ignored:
            environ = shellproof.sanitized_env(ctx.environ, root=str(ctx.root))
            unwanted = ignored(ctx.root, environ, changed)
        overlay.absorb(layer, unwanted)
    except (OverlayEscape, ReadsUnrecorded, OSError) as exc:
        raise RunRefused(str(exc)) from None
    return sorted(unwanted)


def protected_changes(paths: PathResolver, changed: list[str]) -> list[str]:
    """The protected paths (sorted) that the layer's `changed` paths write, delete or
    replace: a deleted or replaced directory takes every protected path below it in the
    real tree with it, nested ones included (`PathResolver.protected_within`)."""
    found: set[str] = set()
    for rel in changed:
        found.update(paths.protected_within(paths.root / rel.rstrip("/")))
    return sorted(found)


def hard_linked_away(root: Path, upper: Path, changed: list[str]) -> list[str]:
    """The files with other hard links (sorted) that a command's layer's `changed` paths
    write, delete or replace — or that lie below a directory it replaced or retouched —, in the
    real tree or among the speculation's own files (in `upper`, a link an earlier call
    made), so that such a command is asked live. A kernel overlay copies one name of a file
    up alone, as a new inode, whatever the command does to it:

    - an edit, chmod or touch of one name leaves every other name showing the old file to
      the rest of the command and to later calls (a tool's read, a command's `cp`), where a
      live run changes them all. Names outside the project are no safer: the jail shows the
      system's directories and the PATH directories of the home (sandbox/jail.py), and
      where a file's other names are cannot be known without a walk of the disk;
    - a deletion or rename (a copy and a whiteout) would break the link a real `mv` keeps;
    - a new link to such a file (`ln`, which copies the file up) is joined as one new inode
      at apply, which cannot take the other names in.

    A link the command makes to a file with no other names is kept: the apply joins the
    names as one inode (overlay/plan.py)."""
    found: list[str] = []
    for rel in changed:
        name = rel.rstrip("/")
        found += _linked_files(root, name) + _linked_files(upper, name)
    return sorted(set(found))


def _linked_files(root: Path, rel: str) -> list[str]:
    """The regular files at or below `rel` in the real tree with more than one hard link
    (never following a symlink)."""
    found, stack = [], [root / rel]
    while stack:
        path = stack.pop()
        try:
            info = os.lstat(path)
        except OSError:
            continue
        if stat_module.S_ISREG(info.st_mode) and info.st_nlink > 1:
            found.append(path.relative_to(root).as_posix())
        elif stat_module.S_ISDIR(info.st_mode):
            with contextlib.suppress(OSError):
                stack.extend(path.iterdir())
    return found


def command_environ(environ: Mapping[str, str]) -> dict[str, str]:
    """The environment a speculated command runs in: the proven commands' sanitised one (no
    secrets, git hardened), but with the user's whole PATH — a project's own `.venv/bin` or
    `node_modules/.bin` included, since inside the sandbox any command may run anyway — and
    the variables that select a toolchain (`TOOLCHAIN_ENV`)."""
    env = shellproof.sanitized_env(environ)
    path = [entry for entry in environ.get("PATH", "").split(os.pathsep) if os.path.isabs(entry)]
    if path:
        env["PATH"] = os.pathsep.join(path)
    env.update({key: value for key, value in environ.items() if key in TOOLCHAIN_ENV})
    return env


def ignored(root: Path, environ: Mapping[str, str], rels: list[str]) -> set[str]:
    """The paths among `rels` the project ignores: build caches by name, and what git's
    ignore rules match (`git check-ignore`; none outside a repository)."""
    found = {r for r in rels if IGNORED_PARTS.intersection(r.split("/"))}
    rest = [r for r in rels if r not in found]
    if not rest:
        return found
    try:
        done = subprocess.run(
            ["git", "check-ignore", "--stdin", "-z"],
            cwd=root,
            env=dict(environ),
            input=b"\0".join(os.fsencode(r) for r in rest) + b"\0",
            capture_output=True,
            timeout=GIT_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return found  # no git: only the caches by name
    if done.returncode == 0:
        found.update(os.fsdecode(p) for p in done.stdout.split(b"\0") if p)
    return found
