"""The speculation tool gate: what a speculative turn may do before the user has agreed.

`SpeculativeRunner` is the ToolRunner a speculation passes to the one agent loop. Built on
the main policy's read-scope rules (`ctx.paths.read_concern` and `policy.shell_concern`,
the functions the main runner asks), it answers seed 000's table: read and search tools run
against the overlay view; `edit`/`write_file` run redirected into the overlay, but only in
`auto-edit`/`yolo` mode, else an `edit` boundary (so is one that would change a real file
with other hard links, overlay.HardLinked: the copy would leave the other names stale);
`shell` runs on the real tree when `policy.shell_concern` proves the command read-only and
in scope and the overlay holds no writes, with a sanitised environment and a short timeout;
a command proven read-only that reads out of scope (a secret, outside the root) is a
`read_scope` boundary; any other command, in every mode but `plan` and where the session's
sandbox can speculate commands (followup/overlay_run.py), runs in the jail on a kernel
overlay whose writes land in the speculation's overlay — unless it plainly needs the
network or a person — and `overlay_commands` lists those whose results stand (in `default`
mode the accept asks about them first: followup/consent.py); else it is a `bash` boundary;
`web_fetch` and anything else is a `denied_tool` boundary. A consequential suggestion's run
(`reads_only`: push, deploy, delete…, followup/consequence.py) stops at its first call that
is not a read: no edit redirected, no command on a kernel overlay. Before a shell command
runs, the files the proof says it reads are recorded with the overlay
(`shell_scope.command_reads`), so accept can tell they changed: a literal file by its
content, a directory by every file below it (whether or not the proof saw the command
recurse: what a command does with a directory it names is not always known), and a path
known only at run time (a glob, `$…`) by every file below its literal leading directories;
for a git command, also HEAD, the index and the refs (a commit meanwhile makes its answer
stale). A command reading too many files to record is a `bash` boundary. A boundary is
raised as `Boundary`, a control signal that ends the speculative turn; it is never a
QshellError. A plugin's tool is a `denied_tool` boundary unless it reads or searches and
declares the paths it reads (tools/registered.py). The gate plugins then have their say
through the consultation the main runner uses too (permissions/plugin_gate.py, with its
fixed limits): what they refuse is a `plugin` boundary. Unlike the main runner it never
asks. Thread-safe: decisions are pure, the overlay locks.
"""

from __future__ import annotations

import enum
import shutil
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from qshell.config import ApprovalMode
from qshell.errors import ControlSignal
from qshell.followup.overlay_run import RunRefused, outside_world, overlay_launcher, run_on_overlay
from qshell.overlay import HardLinked, Overlay, OverlayEscape, ReadsUnrecorded
from qshell.permissions.confine import JailLauncher
from qshell.permissions.git_scope import git_output, git_state
from qshell.permissions.plugin_gate import QSHELL, Builtin, consult, prove
from qshell.permissions.policy import (
    ALLOW,
    FREE_KINDS,
    PROTECTED_REASON,
    Decision,
    judged_shell,
    proven_context,
)
from qshell.permissions.shell_scope import command_reads, read_names
from qshell.plugins import GateDecision, Verdict
from qshell.tools.base import Access, ErrorType, Kind, Tool, ToolContext, ToolResult
from qshell.tools.registered import speculation_concern

# the delete and move tools stay boundaries; a command deletes through the kernel overlay
REDIRECT_KINDS = frozenset({Kind.EDIT})
REDIRECT_MODES = frozenset({ApprovalMode.AUTO_EDIT, ApprovalMode.YOLO})
# a command's changes stay in the overlay until accept, which asks first in default mode
COMMAND_MODES = frozenset({ApprovalMode.DEFAULT, *REDIRECT_MODES})
PRIVATE_INDEX_DIR = "git"  # beside upper/, never inside it; holds the private `index`


class BoundaryType(enum.StrEnum):
    EDIT = "edit"
    BASH = "bash"
    READ_SCOPE = "read_scope"
    DENIED_TOOL = "denied_tool"
    PLUGIN = "plugin"  # a gate plugin refused the call


@dataclass
class Boundary(ControlSignal):
    """The speculation reached a call it may not make on the user's behalf."""

    type: BoundaryType
    tool: str
    detail: str

    def __str__(self) -> str:
        return f"{self.type} boundary at {self.tool}: {self.detail}"


@dataclass(frozen=True, slots=True)
class SpeculatedCall:
    """A call the speculation ran: what accept asks the live rule about (consent.py)."""

    tool: Tool
    args: Any


class SpeculativeRunner:
    """The ToolRunner of a speculative turn: allow through the overlay, or raise Boundary."""

    def __init__(self, overlay: Overlay, mode: ApprovalMode, *, reads_only: bool = False) -> None:
        """`reads_only` (a consequential suggestion's run): every call that is not a read,
        a search or a command proven read-only is a boundary — no edit is redirected and
        no command runs on a kernel overlay."""
        self.overlay = overlay
        self.mode = mode
        self.reads_only = reads_only
        self.overlay_commands: list[str] = []  # commands whose overlay results stand, in order
        self.overlay_started = 0  # commands started on the kernel overlay (taken in or not)
        self.started: list[SpeculatedCall] = []  # every call it started, in order
        self.kept: list[SpeculatedCall] = []  # those whose results stand (not cancelled)
        # the calls decided for the overlay: their args, and whether proven read-only
        self._on_overlay: dict[int, tuple[Any, bool]] = {}
        self._lock = threading.Lock()

    def decide(self, tool: Tool, args: Any, ctx: ToolContext) -> Decision:
        accesses = tool.accesses(args, ctx)
        own: Boundary | None = None
        try:
            self._own_decision(tool, args, ctx, accesses)
            builtin = Builtin(GateDecision.allow())
        except Boundary as boundary:
            own = boundary
            builtin = Builtin(GateDecision.boundary(boundary.detail), boundary=str(boundary.type))
        ruling = consult(
            tool, args, ctx, builtin, accesses=accesses, mode=self.mode, speculative=True
        )
        if ruling.verdict is Verdict.ALLOW:
            return ALLOW
        with self._lock:  # it will not run on the kernel overlay after all
            self._on_overlay.pop(id(args), None)
        if own is not None and ruling.decided_by == QSHELL:
            raise own
        raise Boundary(BoundaryType.PLUGIN, tool.name, ruling.decision.reason)

    def _own_decision(
        self, tool: Tool, args: Any, ctx: ToolContext, accesses: Sequence[Access]
    ) -> Decision:
        """Seed 000's table: ALLOW, or raise the Boundary the call reaches."""
        concern = speculation_concern(tool, accesses)
        if concern:
            raise Boundary(BoundaryType.DENIED_TOOL, tool.name, concern)
        if tool.kind in FREE_KINDS:
            for access in accesses:
                concern = ctx.paths.read_concern(access.path)
                if concern:
                    raise Boundary(BoundaryType.READ_SCOPE, tool.name, concern)
            return ALLOW
        if tool.kind in REDIRECT_KINDS:
            if self.mode not in REDIRECT_MODES or self.reads_only:
                raise Boundary(BoundaryType.EDIT, tool.name, _describe(tool, args))
            for access in accesses:
                if not ctx.paths.is_inside_root(access.path):
                    raise Boundary(
                        BoundaryType.EDIT, tool.name, f"{access.path} is outside the root"
                    )
                if ctx.paths.is_protected(access.path):
                    rel = ctx.paths.relative(access.path)
                    raise Boundary(BoundaryType.EDIT, tool.name, f"{rel} {PROTECTED_REASON}")
            return ALLOW
        if tool.kind is Kind.EXECUTE:
            return self._shell(tool, args, ctx)
        raise Boundary(
            BoundaryType.DENIED_TOOL, tool.name, f"{tool.kind} tools never run speculatively"
        )

    def _shell(self, tool: Tool, args: Any, ctx: ToolContext) -> Decision:
        command = str(getattr(args, "command", ""))
        if self.mode is ApprovalMode.PLAN:  # a live plan turn runs none: continue live
            raise Boundary(BoundaryType.BASH, tool.name, f"{command} (plan mode runs no commands)")
        proof, concern = judged_shell(command, ctx)
        if concern is None and not self.overlay.has_writes:
            return ALLOW  # proven read-only: it runs on the real tree, read-only
        if self.reads_only:
            why = concern or "the shell would not see pending edits"
            raise Boundary(BoundaryType.BASH, tool.name, f"{command} ({why}; consequential)")
        if overlay_launcher(ctx) is None:
            why = concern or "the shell would not see pending edits"
            raise Boundary(BoundaryType.BASH, tool.name, f"{command} ({why})")
        if concern is not None and proof is not None and proof.read_only:
            # it reads what the main loop would ask about (a secret, a file outside the
            # project): that is the user's to give, and a masked run would answer otherwise
            raise Boundary(BoundaryType.READ_SCOPE, tool.name, f"{command} ({concern})")
        proven = concern is None  # read-only: it runs jailed as live, its secrets masked
        concern = concern or "the shell would not see pending edits"
        if self.mode not in COMMAND_MODES:  # plan mode changes nothing
            raise Boundary(BoundaryType.BASH, tool.name, f"{command} ({concern})")
        outside = outside_world(command)
        if outside is not None:
            raise Boundary(BoundaryType.BASH, tool.name, f"{command} ({outside})")
        with self._lock:
            self._on_overlay[id(args)] = (args, proven)
        return ALLOW

    def _private_index(self, ctx: ToolContext) -> ToolContext:
        """Git refreshes the index even for `git diff` (whatever GIT_OPTIONAL_LOCKS says):
        a speculative git command works on a copy of it in the overlay's own directory, so
        the real `.git/index` is neither rewritten nor locked before accept."""
        args = ["rev-parse", "--path-format=absolute", "--git-path", "index"]
        found = git_output(args, ctx.root, ctx.environ)
        index = Path(found.strip()) if found else None
        if index is None or not index.is_file():
            return ctx  # no repository or no index yet: nothing git could rewrite
        private = self.overlay.directory / PRIVATE_INDEX_DIR
        private.mkdir(exist_ok=True)
        copy = private / "index"
        shutil.copyfile(index, copy)
        launcher = ctx.launcher
        if isinstance(launcher, JailLauncher):  # git writes the index and its lock there
            launcher = launcher.with_writable(private)
        return replace(ctx, environ={**ctx.environ, "GIT_INDEX_FILE": str(copy)}, launcher=launcher)

    def _record_git(self, ctx: ToolContext) -> None:
        """Fingerprint what a git command's answer rests on beyond the work tree (HEAD, the
        index, the refs: git_scope.git_state), so a commit meanwhile makes it stale."""
        for path in git_state(ctx.root, ctx.environ):
            self.overlay.record_path(path, stop=lambda: ctx.cancel.cancelled)

    def allow_always(self, tool: Tool) -> None:
        """Speculation never asks, so there is nothing to remember."""

    def execute(self, tool: Tool, args: Any, ctx: ToolContext) -> ToolResult:
        call = SpeculatedCall(tool, args)
        with self._lock:
            self.started.append(call)
        # on the user's spare CPU only: its commands yield to everything else (tools/shell.py)
        result = self._execute(tool, args, replace(ctx, background=True))
        if result.error is None or result.error.type is not ErrorType.CANCELLED:
            with self._lock:  # a cancelled call left nothing: it is answered live
                self.kept.append(call)
        return result

    def _execute(self, tool: Tool, args: Any, ctx: ToolContext) -> ToolResult:
        with self._lock:
            queued = self._on_overlay.pop(id(args), None)
        if queued is not None and queued[0] is args:
            return self._on_kernel_overlay(tool, args, ctx, proven=queued[1])
        if tool.kind is Kind.EXECUTE:
            command = str(getattr(args, "command", ""))
            proof = prove(command, ctx)
            try:
                for path in command_reads(command, ctx.paths, proof=proof):
                    self.overlay.record_path(path, stop=lambda: ctx.cancel.cancelled)
                for path in read_names(command, ctx.paths, proof=proof):
                    self.overlay.record_links(path)  # a link re-pointed: another file read
                if _runs_git(proof.commands):
                    self._record_git(ctx)
            except ReadsUnrecorded as exc:
                raise Boundary(BoundaryType.BASH, tool.name, f"{command} ({exc})") from None
            if ctx.cancel.cancelled:
                return ToolResult.fail(ErrorType.CANCELLED, "cancelled before the command started")
            ctx = proven_context(ctx, proof)
            if _runs_git(proof.commands):
                ctx = self._private_index(ctx)
        else:
            ctx = replace(ctx, view=self.overlay.view)
        try:
            return tool.run(args, ctx)
        except (OverlayEscape, HardLinked) as exc:  # a path the overlay cannot write as asked
            raise Boundary(BoundaryType.EDIT, tool.name, str(exc)) from None

    def _on_kernel_overlay(
        self, tool: Tool, args: Any, ctx: ToolContext, *, proven: bool
    ) -> ToolResult:
        """Run a command that may write on a kernel overlay (followup/overlay_run.py); a
        `proven` read-only one (on the overlay only to see pending edits) with the masks a
        live run has."""
        command = str(getattr(args, "command", ""))
        launcher = overlay_launcher(ctx)
        if launcher is None:
            raise Boundary(BoundaryType.BASH, tool.name, f"{command} (no overlay sandbox)")
        with self._lock:
            self.overlay_started += 1
        try:
            if _runs_git(prove(command, ctx).commands):
                self._record_git(ctx)
            result = run_on_overlay(tool, args, ctx, self.overlay, launcher, proven=proven)
        except (RunRefused, ReadsUnrecorded) as exc:
            raise Boundary(BoundaryType.BASH, tool.name, f"{command} ({exc})") from None
        if result.error is None or result.error.type is not ErrorType.CANCELLED:
            with self._lock:  # a cancelled one left nothing: its call is answered live
                self.overlay_commands.append(command)
        return result


def _runs_git(commands: Iterable[str]) -> bool:
    return any(c == "git" or c.startswith("git ") for c in commands)


def _describe(tool: Tool, args: Any) -> str:
    path = getattr(args, "path", None)
    return f"would change {path}" if path else "would change files"
