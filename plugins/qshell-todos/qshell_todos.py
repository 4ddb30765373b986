"""qshell-todos: an installable qshell plugin that adds the `todos` tool.

Installed as a package (`pip install ./plugins/qshell-todos`), qshell finds it through
the `qshell` entry-point group, so it loads in every session (unless `QSHELL_PLUGINS`
leaves it out or `--no-plugins` is given). `todos` lists the lines of a folder's files that
mark work left — `TODO`, `FIXME`, `XXX` — as `path:line: text`, skipping what the project
ignores, binary and very large files, and the files qshell counts as secrets. It is a
`search` tool that declares the folder it reads, so qshell lets it run without asking in
every mode and also in a speculation, where it reads through the speculation's overlay
(`ctx.view`) like the built-in tools do. No options.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, Field

from qshell.plugins import hookimpl
from qshell.tools.base import Access, ErrorType, Kind, ToolContext, ToolResult
from qshell.tools.walk import walk_files

MARKERS = re.compile(r"\b(TODO|FIXME|XXX)\b")
MAX_MATCHES = 200
MAX_FILE_BYTES = 1_000_000


class TodosArgs(BaseModel):
    path: str = Field(".", description="the folder to search, relative to the project root")


class TodosTool:
    name = "todos"
    kind = Kind.SEARCH
    description = "List the TODO, FIXME and XXX lines of the files under a folder."
    Args = TodosArgs

    def accesses(self, args: TodosArgs, ctx: ToolContext) -> list[Access]:
        return [Access(ctx.paths.resolve(args.path))]

    def run(self, args: TodosArgs, ctx: ToolContext) -> ToolResult:
        base = ctx.paths.resolve(args.path)
        if not ctx.view.is_dir(base):
            return ToolResult.fail(ErrorType.NOT_A_DIRECTORY, f"{args.path} is not a folder")
        found: list[str] = []
        for path in walk_files(base, ctx.root, view=ctx.view):
            if ctx.paths.hidden(path) or ctx.view.stat(path).st_size > MAX_FILE_BYTES:
                continue
            data = ctx.view.read_bytes(path)
            if b"\0" in data:
                continue
            for number, line in enumerate(data.decode("utf-8", "replace").splitlines(), 1):
                if MARKERS.search(line):
                    found.append(f"{ctx.paths.relative(path)}:{number}: {line.strip()}")
            if len(found) >= MAX_MATCHES:
                break
        text = "\n".join(found[:MAX_MATCHES]) or "no TODO, FIXME or XXX lines"
        return ToolResult(llm_content=text, display=f"{len(found)} lines")


@hookimpl
def qshell_register_tools(register: Callable[[Any], None]) -> None:
    register(TodosTool())
