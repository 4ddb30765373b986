"""Permission decisions: the approval matrix and the read-scope rules.

`decide()` maps (approval mode, tool kind, the paths a call touches) to ALLOW, ASK or
DENY with a reason. The read-scope rules live here: a path outside the project root or
a secret-looking one needs approval (`ctx.paths.read_concern`), and `shell_concern()`
says whether a shell command is proven read-only (qshell.shellproof) and reads only in
scope (permissions/shell_scope.py, permissions/git_scope.py). The runner of normal turns
(permissions/runner.py) and the speculation gate (followup/gate.py) ask these same
functions, so both paths share one rule; `proven_context` is how a proven command runs
in either. The proof asks the plugins too (`prove`: `qshell_shell_readonly`). Pure
decisions, safe from any thread.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from qshell import shellproof
from qshell.config import ApprovalMode
from qshell.permissions.confine import JailLauncher
from qshell.permissions.git_scope import git_concern
from qshell.permissions.plugin_gate import prove
from qshell.permissions.shell_scope import read_concern
from qshell.plugins import Verdict as Verdict  # the one decision vocabulary, re-exported
from qshell.tools.base import Access, Kind, ToolContext

EDIT_KINDS = frozenset({Kind.EDIT, Kind.DELETE, Kind.MOVE})
FREE_KINDS = frozenset({Kind.READ, Kind.SEARCH, Kind.THINK})
PROTECTED_REASON = "configures qshell, git or another tool (protectedPaths): writing it always asks"


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
    policy's read-scope rules, permissions/shell_scope.py) — or a secret the session's jail,
    which a proven command runs in, keeps from it; otherwise the reason it is not."""
    return judged_shell(command, ctx)[1]


def judged_shell(command: str, ctx: ToolContext) -> tuple[shellproof.Proof | None, str | None]:
    """The proof of `command` (None when the required sandbox is missing, so nothing is
    proven) and `shell_concern`'s answer, from one proof."""
    if ctx.sandbox_missing:
        return None, ctx.sandbox_missing
    proof = prove(command, ctx)
    if not proof.read_only:
        return proof, proof.reason
    environ = shellproof.sanitized_env(ctx.environ, root=str(ctx.root))
    jail = ctx.sandbox if isinstance(ctx.sandbox, JailLauncher) else None  # proven_context's
    for read in proof.reads:
        concern = read_concern(read, ctx.paths, environ, jail)
        if concern:
            return proof, concern
    git = [c.partition(" ")[2] for c in proof.commands if _is_git(c)]
    if git:
        concern = git_concern(
            ctx.root, ctx.paths, environ, git, jail, proof.objects, reshaped=_reshaped(proof)
        )
        return proof, concern
    return proof, None


def _is_git(label: str) -> bool:
    return label == "git" or label.startswith("git ")


def _reshaped(proof: shellproof.Proof) -> str:
    """What of git's history may reach the output in a shape the output scanner cannot
    judge: "files" for lines picked out of its files, or their patches passed on to any
    other command (even `head -c 49` cuts a token short of its shape); "messages" for
    commit and tag messages passed on so; "" for nothing."""
    if proof.history == "lines":
        return "files"
    if all(_is_git(c) for c in proof.commands):
        return ""
    return {"whole": "files", "messages": "messages"}.get(proof.history, "")


def _git_sees_files(proof: shellproof.Proof | None) -> bool:
    """A line of git commands only, none picking lines out of what it prints: git reads the
    work tree as it is (the jail's copies of files that hold a secret would read to git as
    changes no one made), and what it prints reaches the output scanner whole."""
    if proof is None or not proof.commands or proof.history == "lines":
        return False
    return all(_is_git(c) for c in proof.commands)


def proven_context(ctx: ToolContext, proof: shellproof.Proof | None = None) -> ToolContext:
    """How a shell command that runs because it was proven read-only runs (main loop and
    speculation alike): in the session's sandbox when there is one (permissions/confine.py: the
    project read-only, its secrets masked, no network — a wrong proof is then harmless),
    with the sanitised environment (no pager, hardened git, no API keys or other secrets),
    and at most `shellproof.SHELL_TIMEOUT_S` whatever the call asks for. `proof` is the
    command's: a line of git commands sees the files that hold a secret as they are."""
    limit = min(ctx.shell_timeout_s, shellproof.SHELL_TIMEOUT_S)
    sandbox = ctx.sandbox
    if isinstance(sandbox, JailLauncher):
        sandbox = sandbox.timed(limit)
        if _git_sees_files(proof):
            sandbox = sandbox.showing_files()
    return replace(
        ctx,
        environ=shellproof.sanitized_env(ctx.environ, root=str(ctx.root)),
        shell_timeout_s=limit,
        shell_timeout_cap_s=limit,
        launcher=sandbox,
    )
