"""A file change worked out before it is made: the steps edit and write_file share.

Both tools first plan a call (the file's text before and after, read through `ctx.view`,
or the failure the call meets) and then either carry the plan out or show it. This module
owns those two steps: `write` puts the planned bytes through `ctx.view`, notes them in
`ctx.reads` (the model may go on editing what it wrote) and reports the plan's result;
`preview` gives the diff the result would show, or the failure on one line, writing
nothing; `restored` puts the secrets back that the model saw as redaction markers, where
the file holds them (qshell/redaction `Vault.restore`), or refuses the call, so neither
tool writes a marker where the file held a secret. `PlannedWriteTool` is what both tools
are built on: the file they touch, `run`, `unready` and `preview`, each from the tool's
own `plan`. What a tool plans, and how its
result reads, stays with the tool. Stateless: safe from any thread.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from pathlib import Path
from typing import Generic, Protocol, TypeVar

from qshell.tools import files
from qshell.tools.base import Access, ErrorType, ToolContext, ToolResult


class Planned(Protocol):
    """A tool's plan for one file: where, how results name it, what to write, what to say."""

    @property
    def path(self) -> Path: ...

    @property
    def shown(self) -> str: ...

    def data(self) -> bytes:
        """The file's new content as written."""

    def result(self) -> ToolResult:
        """What the tool reports once the data is written (and a preview shows before)."""


def write(plan: Planned | ToolResult, ctx: ToolContext) -> ToolResult:
    """Carry out `plan`, or return the failure it already is."""
    if isinstance(plan, ToolResult):
        return plan
    data = plan.data()
    try:
        ctx.view.write_bytes(plan.path, data)
    except OSError as exc:
        return files.os_error(exc, plan.shown)
    files.note_written(plan.path, data, ctx)
    return plan.result()


def restored(text: str, *, held: str, shown: str, ctx: ToolContext) -> str | ToolResult:
    """`text` (what the model wants written into `shown`, whose current text is `held`)
    with each redaction marker replaced by its secret, or the failure to report when a
    marker cannot be put back there."""
    done = ctx.secrets.restore(text, held=held)
    if done.refused:
        return ToolResult.fail(ErrorType.REDACTION_MARKER, done.problem(shown))
    return done.text


def preview(plan: Planned | ToolResult) -> str:
    """The diff `write` would report for `plan`, or its failure on one line."""
    if isinstance(plan, ToolResult):
        return " ".join(plan.display.split())
    return plan.result().display


class PathArgs(Protocol):
    """The arguments of a tool that writes one file: at least the path it writes."""

    path: str


ArgsT = TypeVar("ArgsT", bound=PathArgs)


class PlannedWriteTool(ABC, Generic[ArgsT]):
    """A tool that changes one file by a plan: it says how it plans (`plan`); running it,
    asking whether it is ready and previewing it all follow from that plan."""

    def accesses(self, args: ArgsT, ctx: ToolContext) -> list[Access]:
        return [Access(ctx.paths.resolve(args.path), write=True)]

    def run(self, args: ArgsT, ctx: ToolContext) -> ToolResult:
        return write(self.plan(args, ctx), ctx)

    def unready(self, args: ArgsT, ctx: ToolContext) -> ToolResult | None:
        """The failure this call meets whatever the user would answer (the model must read
        the file first, or put a marker where it cannot be restored); None when it is
        worth asking about."""
        return files.unanswerable(self.plan(args, ctx))

    def preview(self, args: ArgsT, ctx: ToolContext) -> str:
        """The diff `run` would report, or a one-line reason it would fail; writes nothing."""
        return preview(self.plan(args, ctx))

    @abstractmethod
    def plan(self, args: ArgsT, ctx: ToolContext) -> Planned | ToolResult:
        """What the call would write, or the failure `run` reports; reads but never writes."""
