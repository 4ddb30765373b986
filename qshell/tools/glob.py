"""glob: list the files under a directory whose paths match a glob, newest first.

It walks the tree as `ctx.view` shows it, with the shared gitignore-aware walker
(tools/walk.py), skips `.git/`, ignored paths and secret-looking files, sorts matches by
modification time (newest first) and caps the list. It only reads directory entries and
file metadata, never contents, and never writes. Stateless: one instance serves concurrent
calls from any thread.
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from pydantic import BaseModel, ConfigDict, Field

from qshell.tools import files
from qshell.tools.base import Access, ErrorType, Kind, ToolContext, ToolResult
from qshell.tools.walk import glob_matcher, walk_entries

MAX_GLOB_RESULTS = 500
CANCEL_CHECK_EVERY_FILES = 256


class GlobArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    pattern: str = Field(
        description="Glob such as `**/*.py` or `src/**/test_*.ts`. `*` stays within one "
        "directory, `**` spans directories, `{a,b}` alternates; a pattern without `/` "
        "matches file names at any depth."
    )
    path: str | None = Field(
        default=None, description="Directory to search (default: the project root)."
    )


class GlobTool:
    name: ClassVar[str] = "glob"
    kind: ClassVar[Kind] = Kind.SEARCH
    description: ClassVar[str] = (
        "Find files by path pattern. Returns matching file paths (relative to the project "
        f"root), most recently modified first, at most {MAX_GLOB_RESULTS}. Files ignored by "
        ".gitignore, the .git directory and secret files (.env, keys) are skipped. Use grep "
        "to search file contents."
    )
    Args: ClassVar[type[BaseModel]] = GlobArgs

    def accesses(self, args: GlobArgs, ctx: ToolContext) -> list[Access]:
        return [Access(ctx.paths.resolve(args.path))]

    def run(self, args: GlobArgs, ctx: ToolContext) -> ToolResult:
        if not args.pattern.strip():
            return ToolResult.fail(ErrorType.INVALID_ARGS, "pattern must not be empty")
        base = ctx.paths.resolve(args.path)
        problem = files.require_dir(base, ctx)
        if problem is not None:
            return problem
        try:
            matches = glob_matcher(args.pattern)
        except ValueError as exc:
            return ToolResult.fail(ErrorType.INVALID_ARGS, str(exc))
        found: list[tuple[float, Path]] = []
        for count, entry in enumerate(walk_entries(base, ctx.paths.root, view=ctx.view)):
            if count % CANCEL_CHECK_EVERY_FILES == 0 and ctx.cancel.cancelled:
                return ToolResult.fail(ErrorType.CANCELLED, "glob was cancelled")
            path = entry.path
            if matches(path.relative_to(base).as_posix()) and not ctx.paths.hidden(path):
                found.append((entry.mtime, path))
        where = ctx.paths.relative(base)
        if not found:
            message = f"No files match {args.pattern!r} under {where}."
            return ToolResult(llm_content=message, display=message)
        found.sort(key=lambda item: (-item[0], item[1]))
        shown = [ctx.paths.relative(path) for _, path in found[:MAX_GLOB_RESULTS]]
        body = "\n".join(shown)
        if len(found) > MAX_GLOB_RESULTS:
            body += (
                f"\n\n[Showing the {MAX_GLOB_RESULTS} most recently modified of {len(found)} "
                "matches; use a narrower pattern or path to see the rest.]"
            )
        plural = "file" if len(found) == 1 else "files"
        return ToolResult(llm_content=body, display=f"{len(found)} {plural} match {args.pattern}")
