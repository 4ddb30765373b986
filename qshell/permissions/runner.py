"""The runner of normal turns and `--print`: the loop's ToolRunner, driven by the approval mode.

`MainToolRunner` applies `policy.decide()`, runs a proven read-only shell command without
asking in default and auto-edit modes, and remembers "always allow" answers for the
session; then the gate plugins have their say within the fixed limits
(permissions/plugin_gate.py, asked by the speculative gate too) and ASK becomes DENY when
nobody can be asked; before an edit-kind call runs it hands each path the call writes to
the session's checkpoints (for /undo). `ToolRunner` is the protocol the loop asks, which
the speculation gate (followup/gate.py) implements too. `would_ask` is the same decision
asked without running anything or remembering it: an accepted speculation asks it of each
call its work stands on (followup/consent.py). The runner's memory is guarded by a lock.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, Protocol

from qshell.config import ApprovalMode
from qshell.permissions.plugin_gate import Builtin, consult, prove
from qshell.permissions.policy import (
    ALLOW,
    EDIT_KINDS,
    Decision,
    Verdict,
    decide,
    proven_context,
    shell_concern,
)
from qshell.plugins import GateDecision
from qshell.tools.base import Access, Kind, Tool, ToolContext, ToolResult


class SavesFiles(Protocol):
    """Where an edit's files are saved before it runs (agent/checkpoints.py, for /undo)."""

    def save(self, path: Path) -> None: ...


class ToolRunner(Protocol):
    """How the loop asks whether and how to run a tool call."""

    def decide(self, tool: Tool, args: Any, ctx: ToolContext) -> Decision:
        """ALLOW, ASK (the loop asks the user) or DENY, with a reason."""

    def allow_always(self, tool: Tool) -> None:
        """Remember the user's "always" answer for this tool for the rest of the session."""

    def execute(self, tool: Tool, args: Any, ctx: ToolContext) -> ToolResult:
        """Run an allowed call."""


class MainToolRunner:
    """The runner of normal turns and print mode, driven by the session's approval mode.

    `mode` may be set at any time (the /approval-mode command does); the next decision uses
    it. With `checkpoints`, every edit/delete/move call saves the files it writes first.
    """

    def __init__(
        self,
        mode: ApprovalMode,
        *,
        interactive: bool,
        checkpoints: SavesFiles | None = None,
    ) -> None:
        self.mode = mode
        self.interactive = interactive
        self.checkpoints = checkpoints
        self._always: set[str] = set()
        self._proven: set[str] = set()  # shell commands allowed because they were proven
        self._lock = threading.Lock()

    def decide(self, tool: Tool, args: Any, ctx: ToolContext) -> Decision:
        decision, confined = self._ruling(tool, args, ctx)
        command = getattr(args, "command", None)
        if confined and isinstance(command, str):  # it runs as a proven command runs
            with self._lock:
                self._proven.add(command)
        return decision

    def would_ask(self, tool: Tool, args: Any, ctx: ToolContext) -> Decision | None:
        """What this call, made live now, would not be let through with (the ASK or DENY
        `decide` would give), or None when it would run without a question. It remembers
        nothing: an accepted speculation asks it of each call its work stands on
        (followup/consent.py), so accept asks exactly where a live turn would have."""
        decision, _ = self._ruling(tool, args, ctx)
        return None if decision.verdict is Verdict.ALLOW else decision

    def would_ask_writing(self, kind: Kind, path: Path, ctx: ToolContext) -> Decision | None:
        """`would_ask` for a call of `kind` that writes (or deletes) `path` alone."""
        decision = decide(self.mode, kind, [Access(path, write=True)], ctx)
        return None if decision.verdict is Verdict.ALLOW else decision

    def _ruling(self, tool: Tool, args: Any, ctx: ToolContext) -> tuple[Decision, bool]:
        """The decision on a live call, and whether it runs confined as a proven one."""
        accesses = tool.accesses(args, ctx)
        own = self._own_decision(tool, args, ctx, accesses)
        ruling = consult(
            tool,
            args,
            ctx,
            Builtin(GateDecision(own.verdict, own.reason), always_asks=own.always_asks),
            accesses=accesses,
            mode=self.mode,
            speculative=False,
            unanswerable=not self.interactive,
        )
        decision = Decision(ruling.verdict, ruling.decision.reason, always_asks=own.always_asks)
        return decision, ruling.confined

    def _own_decision(
        self, tool: Tool, args: Any, ctx: ToolContext, accesses: Sequence[Access]
    ) -> Decision:
        """qshell's decision before the plugins: the matrix, "always", the proof."""
        decision = decide(self.mode, tool.kind, accesses, ctx)
        if decision.verdict is not Verdict.ASK:
            return decision
        with self._lock:
            if tool.name in self._always and not decision.always_asks:
                return ALLOW
        if self._proven_read_only(tool, args, ctx):
            with self._lock:
                self._proven.add(args.command)
            return ALLOW
        if tool.kind is Kind.EXECUTE and ctx.sandbox_missing:
            decision = replace(decision, reason=f"{decision.reason} ({ctx.sandbox_missing})")
        return decision

    def _proven_read_only(self, tool: Tool, args: Any, ctx: ToolContext) -> bool:
        """Shell commands proven read-only within the root run without asking (default and
        auto-edit modes), as Claude Code does; everything else still asks."""
        if tool.kind is not Kind.EXECUTE:
            return False
        if self.mode not in (ApprovalMode.DEFAULT, ApprovalMode.AUTO_EDIT):
            return False
        command = getattr(args, "command", None)
        return isinstance(command, str) and shell_concern(command, ctx) is None

    def allow_always(self, tool: Tool) -> None:
        with self._lock:
            self._always.add(tool.name)

    def execute(self, tool: Tool, args: Any, ctx: ToolContext) -> ToolResult:
        if self.checkpoints is not None and tool.kind in EDIT_KINDS:
            for access in tool.accesses(args, ctx):
                if access.write:
                    self.checkpoints.save(access.path)
        if tool.kind is Kind.EXECUTE:
            with self._lock:
                proven = getattr(args, "command", None) in self._proven
            if proven:  # it runs without asking, so it runs as speculation runs it
                ctx = proven_context(ctx, prove(str(args.command), ctx))
        return tool.run(args, ctx)
