"""The gate plugins' say in a tool-call decision, and the fixed limits on what they say.

`consult` is the one function both runners ask — `policy.MainToolRunner.decide` and the
speculative gate's `SpeculativeRunner.decide` — once they have made qshell's own decision
(`Builtin`); `rule` is the same decision unrecorded, for `qshell check-shell`'s audit. It
shows the call to the `qshell_tool_gate` plugins (first answer wins, plugins/host.py), then
applies the fixed limits, which hold whatever a plugin says:
- a plugin may tighten anything: its `deny` is a denial and its `ask` a question even in
  yolo mode; in a speculation every answer but `allow` is a boundary, and in the main
  loop a `boundary` is a question;
- a plugin's `allow` only answers a question qshell would ask: qshell's own denials (a
  write outside the project, what plan mode forbids) stand, even against an `ask`; a protected path is never
  written without asking; a command runs without asking only as a proven read-only one
  runs — in the sandbox when there is one (`Ruling.confined`), never when the sandbox is
  required and missing;
- in a speculation an `allow` lifts only a `denied_tool` boundary of a tool that writes
  nothing (read, search, think, fetch): an edit never leaves the overlay, a command runs
  only proven read-only or on the kernel overlay in the jail, a protected path or a read
  out of scope stays a boundary.
A plugin that raises or answers nonsense fails closed (a deny, a boundary in
speculation), reported once by the host. A question nobody can answer (`unanswerable`,
print mode) is a denial, whose reason says what would let the call run (`cannot_ask`): the
approval mode that allows it, or, when no mode would (a plugin's question, a protected
path), an interactive session. Every decision is one local `permission` telemetry record, which
`qshell_event` plugins observe; its command line, paths and reason are kept in the file
only under `telemetry.logText`. Pure apart from that record; any thread.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from qshell import shellproof
from qshell.permissions.confine import JailLauncher
from qshell.permissions.shell_scope import command_reads
from qshell.plugins import GateCall, GateContext, GateDecision, PluginAnswer, Verdict
from qshell.plugins.host import GATE_HOOK
from qshell.telemetry import command_shape
from qshell.tools.base import Access, Kind, Tool, ToolContext

QSHELL = "qshell"  # who decided, when no plugin's answer was taken
LIFTABLE_BOUNDARY = "denied_tool"  # the one speculative boundary a plugin's allow may lift
NON_WRITING_KINDS = frozenset({Kind.READ, Kind.SEARCH, Kind.THINK, Kind.FETCH})
EDIT_KINDS = frozenset({Kind.EDIT, Kind.DELETE, Kind.MOVE})
STRICTNESS = {Verdict.ALLOW: 0, Verdict.ASK: 1, Verdict.DENY: 2}  # main-loop verdicts


@dataclass(frozen=True, slots=True)
class Builtin:
    """qshell's own decision on a call — allow, ask or deny in the main loop, allow or a
    boundary in speculation — and what the limits need to know of it."""

    decision: GateDecision
    always_asks: bool = False  # it writes a protected path
    boundary: str = ""  # speculation: the boundary's type (edit, bash, read_scope, …)


@dataclass(frozen=True, slots=True)
class Ruling:
    """The decision that stands. `decided_by` is the plugin whose answer it is, or
    `qshell`; `limited` names the fixed limit that overrode a plugin's allow; `confined`
    (main loop): a command a plugin allowed, which runs as a proven command does."""

    decision: GateDecision
    decided_by: str = QSHELL
    limited: str = ""
    confined: bool = False

    @property
    def verdict(self) -> Verdict:
        return self.decision.verdict


def consult(
    tool: Tool,
    args: Any,
    ctx: ToolContext,
    builtin: Builtin,
    *,
    accesses: Sequence[Access],
    mode: str,
    speculative: bool,
    unanswerable: bool = False,
) -> Ruling:
    """The decision on one call: qshell's own, the first plugin answer, the fixed limits;
    recorded (`permission`)."""
    call = gate_call(tool, args, accesses, ctx)
    context = GateContext(speculative, str(mode), ctx.root, builtin.decision)
    ruling = _ruling(tool, ctx, call, context, builtin, unanswerable)
    _record(ctx, call, context, ruling)
    return ruling


def rule(
    tool: Tool,
    args: Any,
    ctx: ToolContext,
    builtin: Builtin,
    *,
    accesses: Sequence[Access],
    mode: str,
    speculative: bool,
) -> Ruling:
    """`consult`'s decision, the plugins asked the same way, but not recorded: for an audit
    that runs nothing (`qshell check-shell`), so no decision was taken."""
    call = gate_call(tool, args, accesses, ctx)
    context = GateContext(speculative, str(mode), ctx.root, builtin.decision)
    return _ruling(tool, ctx, call, context, builtin, False)


def _ruling(
    tool: Tool,
    ctx: ToolContext,
    call: GateCall,
    context: GateContext,
    builtin: Builtin,
    unanswerable: bool,
) -> Ruling:
    answer = ctx.plugins.tool_gate(call, context)
    if context.speculative:
        ruling = _speculative(answer, builtin, tool.kind)
    else:
        ruling = _main(answer, builtin, tool.kind, ctx)
    if ruling.verdict is Verdict.ASK and unanswerable:
        hint = cannot_ask(ruling, builtin, context.approval_mode, tool.kind)
        denial = GateDecision.deny(f"{ruling.decision.reason}; {hint}")
        ruling = Ruling(denial, ruling.decided_by, ruling.limited)
    return ruling


CANNOT_ASK = "print mode cannot ask for approval"
INTERACTIVELY = "run it in an interactive qshell to answer the question"


def cannot_ask(ruling: Ruling, builtin: Builtin, mode: str, kind: Kind) -> str:
    """Why a question print mode would have to ask is a denial, and what would let the call
    run: a more permissive approval mode, or — where every mode asks — a session that can
    ask."""
    if ruling.decided_by != QSHELL:
        return (
            f"{CANNOT_ASK}, and the {ruling.decided_by} plugin asks in every mode: {INTERACTIVELY}"
        )
    if builtin.always_asks:
        return f"{CANNOT_ASK}, and a protected path is asked about in every mode: {INTERACTIVELY}"
    if mode == "yolo":  # nothing of qshell's asks in yolo mode; said rightly should it ever
        return f"{CANNOT_ASK}: {INTERACTIVELY}"
    if kind in EDIT_KINDS and mode == "default":
        return (
            f"{CANNOT_ASK}; rerun with --approval-mode auto-edit (edits) or -y/--yolo (everything)"
        )
    return f"{CANNOT_ASK}; rerun with -y/--yolo (everything)"


def gate_call(
    tool: Tool, args: Any, accesses: Sequence[Access], ctx: ToolContext | None = None
) -> GateCall:
    """The call as plugins see it. A shell command's `paths` are what the proof says it
    reads, symlinks resolved — a path bash expands at run time (`deploy/*`, `$HOME/x`) as
    its literal leading directory, every file below which it may read."""
    data = args.model_dump(mode="json") if isinstance(args, BaseModel) else {}
    command = data.get("command") if tool.kind is Kind.EXECUTE else None
    reads = [a.path for a in accesses if not a.write]
    asked = ctx is not None and ctx.plugins.implements(GATE_HOOK)  # else nobody looks
    if isinstance(command, str) and ctx is not None and asked:
        proof = prove(command, ctx)
        if proof.read_only:
            reads += command_reads(command, ctx.paths, proof=proof)
    return GateCall(
        tool=tool.name,
        kind=str(tool.kind),
        args=data,
        paths=tuple(dict.fromkeys(reads)),
        writes=tuple(a.path for a in accesses if a.write),
        command=command if isinstance(command, str) else "",
    )


def _main(answer: PluginAnswer | None, builtin: Builtin, kind: Kind, ctx: ToolContext) -> Ruling:
    if answer is None:
        return Ruling(builtin.decision)
    wanted = _reasoned(answer)
    verdict = Verdict.ASK if wanted.verdict is Verdict.BOUNDARY else wanted.verdict
    if STRICTNESS[verdict] >= STRICTNESS[builtin.decision.verdict]:  # it tightens
        return Ruling(GateDecision(verdict, wanted.reason), answer.plugin)
    limit = main_limit(builtin, kind, ctx)
    if limit:
        return Ruling(builtin.decision, limited=limit)
    return Ruling(wanted, answer.plugin, confined=kind is Kind.EXECUTE)


def main_limit(builtin: Builtin, kind: Kind, ctx: ToolContext) -> str:
    """Why a plugin may not loosen qshell's decision (main loop), or ""."""
    if builtin.decision.verdict is Verdict.DENY:
        return "a plugin cannot overturn qshell's own denial"
    if builtin.always_asks:
        return "a plugin cannot make a protected path writable without asking"
    if kind is Kind.EXECUTE and ctx.sandbox_missing:
        return "a plugin cannot let a command skip the sandbox, which is missing"
    return ""


def _speculative(answer: PluginAnswer | None, builtin: Builtin, kind: Kind) -> Ruling:
    if answer is None:
        return Ruling(builtin.decision)
    wanted = _reasoned(answer)
    if wanted.verdict is not Verdict.ALLOW:
        return Ruling(GateDecision.boundary(wanted.reason), answer.plugin)
    if builtin.decision.verdict is Verdict.ALLOW:
        return Ruling(wanted, answer.plugin)
    limit = speculative_limit(builtin, kind)
    if limit:
        return Ruling(builtin.decision, limited=limit)
    return Ruling(wanted, answer.plugin)


def speculative_limit(builtin: Builtin, kind: Kind) -> str:
    """Why a plugin may not lift a speculative boundary, or ""."""
    if kind in EDIT_KINDS:
        return "a plugin cannot make a speculative write escape the overlay"
    if kind is Kind.EXECUTE:
        return "a plugin cannot let a speculative command bypass the proof or the jail"
    if builtin.boundary != LIFTABLE_BOUNDARY or kind not in NON_WRITING_KINDS:
        return f"a plugin cannot lift a {builtin.boundary or 'speculation'} boundary"
    return ""


def _reasoned(answer: PluginAnswer) -> GateDecision:
    """The plugin's decision, with a reason the user can read."""
    decision = answer.decision
    if decision.reason or decision.verdict is Verdict.ALLOW:
        return decision
    return GateDecision(decision.verdict, f"the {answer.plugin} plugin says {decision.verdict}")


def _record(ctx: ToolContext, call: GateCall, context: GateContext, ruling: Ruling) -> None:
    """The `permission` record: the command or paths and the reason (which may quote them)
    are texts, kept in the file only under `telemetry.logText`; without it the record
    keeps the command's program and word count, or how many paths the call names."""
    paths = (*call.writes, *call.paths)
    target = call.command or ", ".join(ctx.paths.relative(p) for p in paths)
    shape = command_shape(call.command) if call.command else {"path_count": len(paths)}
    ctx.plugins.record(
        "permission",
        texts={"target": target, "reason": ruling.decision.reason},
        tool=call.tool,
        kind=call.kind,
        **shape,
        speculative=context.speculative,
        mode=context.approval_mode,
        builtin=str(context.builtin.verdict),
        verdict=str(ruling.verdict),
        decided_by=ruling.decided_by,
        limited=ruling.limited or None,
    )


def prove(command: str, ctx: ToolContext) -> shellproof.Proof:
    """The shell proof of `command`, with the forms the gate plugins declare read-only —
    only where the sandbox runs proven commands: a plugin's declaration is not qshell's
    proof, and the jail (the project read-only, no network) is what makes a wrong one
    harmless."""
    extra = ctx.plugins.readonly_rule if isinstance(ctx.sandbox, JailLauncher) else None
    return shellproof.check(command, extra=extra)
