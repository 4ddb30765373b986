"""A bench plugin: the `workspaces` query "skill" of bench/latency_plan.py's scenario.

Loaded with `--plugin` (or `PluginRequest(files=...)`), it adds one read tool, `workspaces`,
that lists the workspaces named in the project's `workspaces.txt`, one a line, as a short
Markdown list. Its output is the answer to "which workspaces do I have", so its result says
`skip_llm_round` and `result_is_terminal` (seed 004 §3.1: a query skill decides for itself);
qshell honours that only when `toolPostExecAllowlist` names the tool. It reads one small
file, so it takes about a millisecond, the seed's "skill: 1 ms". It declares the file it
reads, keeps no state and is safe on any thread.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, ConfigDict

from qshell.plugins import hookimpl
from qshell.tools.base import Access, ErrorType, Kind, ToolContext, ToolResult

TOOL_NAME = "workspaces"
LIST_FILE = "workspaces.txt"


class WorkspacesArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")


class WorkspacesTool:
    name = TOOL_NAME
    kind = Kind.READ
    description = "List the user's workspaces (the query skill for 'which workspaces do I have')."
    Args = WorkspacesArgs

    def accesses(self, args: WorkspacesArgs, ctx: ToolContext) -> list[Access]:
        return [Access(ctx.paths.resolve(LIST_FILE))]

    def run(self, args: WorkspacesArgs, ctx: ToolContext) -> ToolResult:
        path = ctx.paths.resolve(LIST_FILE)
        if not ctx.view.is_file(path):
            return ToolResult.fail(ErrorType.NOT_FOUND, f"{LIST_FILE} does not exist")
        names = [
            n.strip()
            for n in ctx.view.read_bytes(path).decode("utf-8", "replace").splitlines()
            if n.strip()
        ]
        lines = [f"You have {len(names)} workspaces:", *(f"- `{n}`" for n in names)]
        text = "\n".join(lines)
        return ToolResult(
            llm_content=text,
            display=f"{len(names)} workspaces",
            skip_llm_round=True,
            result_is_terminal=True,
        )


@hookimpl
def qshell_register_tools(register: Callable[[Any], None]) -> None:
    register(WorkspacesTool())
