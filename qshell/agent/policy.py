"""Permission decisions for the main loop: the approval matrix and the read-scope rules.

`decide()` maps (approval mode, tool kind, the paths a call touches) to ALLOW, ASK or
DENY with a reason. The read-scope rules live here: a path outside the project root or
a secret-looking one needs approval (`ctx.paths.read_concern`), and `shell_concern()`
says whether a shell command is proven read-only (qshell.shellproof) and reads only in
scope. The speculation gate (followup/gate.py) asks these same functions, so both paths
share one rule. `MainToolRunner` is the ToolRunner of normal turns and `--print`: it
applies `decide()`, runs a proven read-only shell command without asking in default and
auto-edit modes, and remembers "always allow" answers for the session; then the gate
plugins have their say within the fixed limits (agent/plugin_gate.py, asked by the
speculative gate too) and ASK becomes DENY when nobody can be asked; before an edit-kind
call runs it hands each path the call writes to the session's Checkpoints (for /undo).
The proof asks the plugins too (`prove`: `qshell_shell_readonly`). Pure decisions; the
runner's memory is guarded by a lock.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol

from qshell import shellproof
from qshell.agent.checkpoints import Checkpoints
from qshell.agent.confine import JailLauncher
from qshell.agent.git_scope import git_concern
from qshell.agent.plugin_gate import Builtin, consult, prove
from qshell.agent.shell_scope import read_concern
from qshell.config import ApprovalMode
from qshell.plugins import GateDecision
from qshell.plugins import Verdict as Verdict  # the one decision vocabulary, re-exported
from qshell.tools.base import Access, Kind, Tool, ToolContext, ToolResult

EDIT_KINDS = frozenset({Kind.EDIT, Kind.DELETE, Kind.MOVE})
FREE_KINDS = frozenset({Kind.READ, Kind.SEARCH, Kind.THINK})
PROTECTED_REASON = "configures qshell, git or another tool (protectedPaths): writing it always asks"
NON_INTERACTIVE_HINT = (
    "print mode cannot ask for approval; rerun with --approval-mode auto-edit "
    "(edits) or -y/--yolo (everything)"
)


@dataclass(frozen=True, slots=True)
class Decision:
    verdict: Verdict
    reason: str = ""
    always_asks: bool = False  # an "always allow" answer does not cover it (protected paths)


ALLOW = Decision(Verdict.ALLOW)


def decide(
    mode: ApprovalMode, kind: Kind, accesses: Sequence[Access], ctx: ToolContext
) -> Decision:
    """The approval matrix (mode × kind), then the read-scope rules on the touched paths."""
    for access in accesses:
        if access.write and not ctx.paths.is_inside_root(access.path):
            return Decision(Verdict.DENY, f"{access.path} is outside the project root")
    by_kind = _by_kind(mode, kind)
    if by_kind.verdict is Verdict.DENY or mode is ApprovalMode.YOLO:
        return by_kind
    for access in accesses:
        if access.write and ctx.paths.is_protected(access.path):
            rel = ctx.paths.relative(access.path)
            return Decision(Verdict.ASK, f"{rel} {PROTECTED_REASON}", always_asks=True)
        concern = None if access.write else ctx.paths.read_concern(access.path)
        if concern:
            return Decision(Verdict.ASK, concern)
    return by_kind


def _by_kind(mode: ApprovalMode, kind: Kind) -> Decision:
    if mode is ApprovalMode.YOLO or kind in FREE_KINDS:
        return ALLOW
    if kind in EDIT_KINDS:
        if mode is ApprovalMode.PLAN:
            return Decision(Verdict.DENY, "plan mode allows no changes to files")
        if mode is ApprovalMode.AUTO_EDIT:
            return ALLOW
        return Decision(Verdict.ASK, "edits need approval in default mode")
    if kind is Kind.EXECUTE:
        if mode is ApprovalMode.PLAN:
            return Decision(Verdict.DENY, "plan mode runs no shell commands")
        return Decision(Verdict.ASK, "shell commands need approval")
    if kind is Kind.FETCH:
        return Decision(Verdict.ASK, "fetching a URL needs approval")
    return Decision(Verdict.ASK, f"tools of kind '{kind}' need approval")


def shell_concern(command: str, ctx: ToolContext) -> str | None:
    """None when `command` is proven read-only (qshell.shellproof) and every file it reads,
    as bash will expand and walk it, is inside the project root and no secret (the main
    policy's read-scope rules, agent/shell_scope.py); otherwise the reason it is not."""
    return judged_shell(command, ctx)[1]


def judged_shell(command: str, ctx: ToolContext) -> tuple[shellproof.Verdict | None, str | None]:
    """The proof of `command` (None when the required sandbox is missing, so nothing is
    proven) and `shell_concern`'s answer, from one proof."""
    if ctx.sandbox_missing:
        return None, ctx.sandbox_missing
    verdict = prove(command, ctx)
    if not verdict.read_only:
        return verdict, verdict.reason
    environ = shellproof.sanitized_env(ctx.environ, root=str(ctx.root))
    for read in verdict.reads:
        concern = read_concern(read, ctx.paths, environ)
        if concern:
            return verdict, concern
    git = [c.partition(" ")[2] for c in verdict.commands if c == "git" or c.startswith("git ")]
    if git:
        return verdict, git_concern(ctx.root, ctx.paths, environ, git)
    return verdict, None


def proven_context(ctx: ToolContext) -> ToolContext:
    """How a shell command that runs because it was proven read-only runs (main loop and
    speculation alike): in the session's sandbox when there is one (agent/confine.py: the
    project read-only, its secrets masked, no network — a wrong proof is then harmless),
    with the sanitised environment (no pager, hardened git, no API keys or other secrets),
    and at most `shellproof.SHELL_TIMEOUT_S` whatever the call asks for."""
    limit = min(ctx.shell_timeout_s, shellproof.SHELL_TIMEOUT_S)
    sandbox = ctx.sandbox
    if isinstance(sandbox, JailLauncher):
        sandbox = sandbox.timed(limit)
    return replace(
        ctx,
        environ=shellproof.sanitized_env(ctx.environ, root=str(ctx.root)),
        shell_timeout_s=limit,
        shell_timeout_cap_s=limit,
        launcher=sandbox,
    )


class ToolRunner(Protocol):
    """How the loop asks whether and how to run a tool call."""

    def decide(self, tool: Tool, args: Any, ctx: ToolContext) -> Decision:
        """ALLOW, ASK (the loop asks the user) or DENY, with a reason."""

    def allow_always(self, tool: Tool) -> None:
        """Remember the user's "always" answer for this tool for the rest of the session."""

    def execute(self, tool: Tool, args: Any, ctx: ToolContext) -> ToolResult:
        """Run an allowed call."""


SHELL_TOOL = "shell"  # the tool whose commands a speculation may run on a kernel overlay


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
        checkpoints: Checkpoints | None = None,
    ) -> None:
        self.mode = mode
        self.interactive = interactive
        self.checkpoints = checkpoints
        self._always: set[str] = set()
        self._proven: set[str] = set()  # shell commands allowed because they were proven
        self._lock = threading.Lock()

    def decide(self, tool: Tool, args: Any, ctx: ToolContext) -> Decision:
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
            unanswerable="" if self.interactive else NON_INTERACTIVE_HINT,
        )
        command = getattr(args, "command", None)
        if ruling.confined and isinstance(command, str):  # it runs as a proven command runs
            with self._lock:
                self._proven.add(command)
        return Decision(ruling.verdict, ruling.decision.reason, always_asks=own.always_asks)

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

    def asks_about_commands(self) -> bool:
        """Whether a shell command not proven read-only would be asked about now: in default
        and plan mode, unless the user allowed shell commands for the session."""
        if self.mode not in (ApprovalMode.DEFAULT, ApprovalMode.PLAN):
            return False
        with self._lock:
            return SHELL_TOOL not in self._always

    def execute(self, tool: Tool, args: Any, ctx: ToolContext) -> ToolResult:
        if self.checkpoints is not None and tool.kind in EDIT_KINDS:
            for access in tool.accesses(args, ctx):
                if access.write:
                    self.checkpoints.save(access.path)
        if tool.kind is Kind.EXECUTE:
            with self._lock:
                proven = getattr(args, "command", None) in self._proven
            if proven:  # it runs without asking, so it runs as speculation runs it
                ctx = proven_context(ctx)
        return tool.run(args, ctx)
