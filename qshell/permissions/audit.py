"""The runners' decision on one shell command, taken without running it: `qshell check-shell`.

`audit_shell` asks what a session asks of a `shell` call: qshell's own answer
(policy.shell_concern: the proof and its read scope; unproven, a command asks live and is
a `bash` boundary in speculation), then the gate plugins and the fixed limits on them
(plugin_gate.rule: `consult`'s decision, not recorded, since nothing runs), live in
default and in auto-edit mode and speculatively in both. The live answer that stands is the
strictest of the two modes (a plugin that asks in one of them asks); the speculative one
says whether a speculation would run the command too. It never writes a telemetry record and
never runs the command (only bash's expansion of its words, permissions/shell_scope.py).
Any thread: the plugins' gate hooks are called as a runner calls them.
"""

from __future__ import annotations

from dataclasses import dataclass

from qshell.config import ApprovalMode
from qshell.permissions.plugin_gate import QSHELL, STRICTNESS, Builtin, Ruling, rule
from qshell.permissions.policy import shell_concern
from qshell.plugins import GateDecision, Verdict
from qshell.tools.base import ToolContext
from qshell.tools.shell import ShellArgs, ShellTool

LIVE_MODES = (ApprovalMode.DEFAULT, ApprovalMode.AUTO_EDIT)  # where a proven command runs
BASH_BOUNDARY = "bash"  # the speculative boundary of a command that is not proven


@dataclass(frozen=True, slots=True)
class ShellAudit:
    """What a session would do with one command: live (`ruling`) and in a speculation."""

    command: str
    ruling: Ruling
    speculation: Ruling

    @property
    def auto_run(self) -> bool:
        return self.ruling.verdict is Verdict.ALLOW

    @property
    def speculates(self) -> bool:
        return self.speculation.verdict is Verdict.ALLOW

    def line(self) -> str:
        """One line of text: runs without asking, asks or refused, why and who said so."""
        ruling = self.ruling
        if ruling.verdict is Verdict.ALLOW:
            notes = []
            if ruling.confined:  # qshell would have asked
                plugin = ruling.decided_by
                notes.append(f"the {plugin} plugin allows it; it runs as a proven command runs")
            if not self.speculates:
                notes.append(f"a speculation stops there: {_why(self.speculation)}")
            shown = f"runs without asking: {self.command}"
            return f"{shown}  ({'; '.join(notes)})" if notes else shown
        label = "asks" if ruling.verdict is Verdict.ASK else "refused"
        return f"{label}: {self.command}  ({_why(ruling)})"

    def record(self) -> dict[str, object]:
        """The JSON object of `--json`."""
        return {
            "command": self.command,
            "auto_run": self.auto_run,
            "verdict": str(self.ruling.verdict),
            "reason": self.ruling.decision.reason,
            "decided_by": self.ruling.decided_by,
            "speculates": self.speculates,
        }


def _why(ruling: Ruling) -> str:
    """A ruling's reason, with the plugin it is from or the limit that overrode one."""
    reason = ruling.decision.reason or str(ruling.verdict)
    if ruling.decided_by != QSHELL:
        return f"{reason}; decided by the {ruling.decided_by} plugin"
    if ruling.limited:
        return f"{reason}; {ruling.limited}"
    return reason


def audit_shell(command: str, ctx: ToolContext) -> ShellAudit:
    """What a session in `ctx`'s project, with its plugins, would do with `command`."""
    tool = ShellTool()
    args = ShellArgs(command=command)
    accesses = tool.accesses(args, ctx)
    concern = shell_concern(command, ctx)
    live = Builtin(GateDecision.allow() if concern is None else GateDecision.ask(concern))
    speculative = Builtin(
        GateDecision.allow() if concern is None else GateDecision.boundary(concern),
        boundary="" if concern is None else BASH_BOUNDARY,
    )

    def ruled(builtin: Builtin, mode: ApprovalMode, in_speculation: bool) -> Ruling:
        return rule(
            tool, args, ctx, builtin, accesses=accesses, mode=mode, speculative=in_speculation
        )

    lives = [ruled(live, mode, False) for mode in LIVE_MODES]
    speculations = [ruled(speculative, mode, True) for mode in LIVE_MODES]
    strictest = max(lives, key=lambda r: STRICTNESS[r.verdict])
    stopped = next((r for r in speculations if r.verdict is not Verdict.ALLOW), speculations[0])
    return ShellAudit(command, strictest, stopped)
