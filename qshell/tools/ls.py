"""ls: list one directory's entries, directories marked with a trailing `/`.

It lists the directory as `ctx.view` shows it, through the shared gitignore-aware walker
(tools/walk.py) so ignored entries and `.git` are left out, sorts by name and caps the
listing. Secret-looking names are listed (only their contents are sensitive). It never
reads file contents and never writes. Stateless: one instance serves concurrent calls from
any thread.
"""

from __future__ import annotations

from typing import ClassVar

from pydantic import BaseModel, ConfigDict, Field

from qshell.tools import files
from qshell.tools.base import Access, Kind, ToolContext, ToolResult
from qshell.tools.walk import list_dir

MAX_LS_ENTRIES = 1000


class LsArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    path: str | None = Field(
        default=None, description="Directory to list (default: the project root)."
    )


class LsTool:
    name: ClassVar[str] = "ls"
    kind: ClassVar[Kind] = Kind.READ
    description: ClassVar[str] = (
        "List the entries of one directory (not recursive), sorted by name; directories end "
        f"with `/`. At most {MAX_LS_ENTRIES} entries. Entries ignored by .gitignore and the "
        ".git directory are left out. Use glob to find files recursively."
    )
    Args: ClassVar[type[BaseModel]] = LsArgs

    def accesses(self, args: LsArgs, ctx: ToolContext) -> list[Access]:
        return [Access(ctx.paths.resolve(args.path))]

    def run(self, args: LsArgs, ctx: ToolContext) -> ToolResult:
        base = ctx.paths.resolve(args.path)
        where = ctx.paths.relative(base)
        problem = files.require_dir(base, ctx)
        if problem is not None:
            return problem
        try:
            entries = list_dir(base, ctx.paths.root, view=ctx.view)
        except OSError as exc:
            return files.os_error(exc, where)
        if not entries:
            message = f"{where} is empty."
            return ToolResult(llm_content=message, display=message)
        names = [name + ("/" if is_dir else "") for name, is_dir in entries]
        body = "\n".join(names[:MAX_LS_ENTRIES])
        if len(names) > MAX_LS_ENTRIES:
            body += (
                f"\n\n[Showing the first {MAX_LS_ENTRIES} of {len(names)} entries; use glob "
                "with a pattern to find specific files.]"
            )
        return ToolResult(llm_content=body, display=f"{len(names)} entries in {where}")
