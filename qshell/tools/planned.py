"""A file change worked out before it is made: the steps edit and write_file share.

Both tools first plan a call (the file's text before and after, read through `ctx.view`,
or the failure the call meets) and then either carry the plan out or show it. This module
owns those two steps: `write` puts the planned bytes through `ctx.view`, notes them in
`ctx.reads` (the model may go on editing what it wrote) and reports the plan's result;
`preview` gives the diff the result would show, or the failure on one line, writing
nothing. What a tool plans, and how its result reads, stays with the tool. Stateless: safe
from any thread.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from qshell.tools import files
from qshell.tools.base import ToolContext, ToolResult


class Planned(Protocol):
    """A tool's plan for one file: where, how results name it, what to write, what to say."""

    @property
    def path(self) -> Path: ...

    @property
    def shown(self) -> str: ...

    def data(self) -> bytes:
        """The file's new content as written."""
        ...

    def result(self) -> ToolResult:
        """What the tool reports once the data is written (and a preview shows before)."""
        ...


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


def preview(plan: Planned | ToolResult) -> str:
    """The diff `write` would report for `plan`, or its failure on one line."""
    if isinstance(plan, ToolResult):
        return " ".join(plan.display.split())
    return plan.result().display
