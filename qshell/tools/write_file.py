"""write_file: create or overwrite a file inside the project root and report the diff.

It writes the given content as UTF-8 exactly as provided (no newline translation),
creating missing parent directories, and returns a unified diff of old → new. Every read,
existence check and write goes through `ctx.view`. It refuses
any path that resolves outside the project root (symlinks and `..` included) and never
writes there; it overwrites an existing file only when the model has read it in this
session and it has not changed since (`files.overwrite_refusal`), and notes what it wrote
(`ctx.reads`). A redaction marker in the content is written as the secret it stands for
where the file holds that secret, and refused anywhere else (`planned.restored`). `preview` works out the same diff without writing; both carry out the plan
through tools/planned.py, as edit does. Approval is the policy
layer's job via `accesses()`. Stateless: one instance serves concurrent calls from any
thread.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from pydantic import BaseModel, ConfigDict, Field

from qshell.tools import files, planned
from qshell.tools.base import ErrorType, FileEdit, Kind, ToolContext, ToolResult
from qshell.tools.diffs import count_lines, unified_diff


class WriteFileArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    path: str = Field(description="File to write: relative to the project root, or absolute.")
    content: str = Field(description="The complete new content of the file.")


class WriteFileTool(planned.PlannedWriteTool[WriteFileArgs]):
    name: ClassVar[str] = "write_file"
    kind: ClassVar[Kind] = Kind.EDIT
    description: ClassVar[str] = (
        "Create a file or replace its entire content. Parent directories are created. Only "
        "paths inside the project root can be written. Returns a unified diff of the change. "
        "To change part of an existing file prefer `edit`. An existing file must be read with "
        "read_file in this session before it is overwritten, and read again if it changed."
    )
    Args: ClassVar[type[BaseModel]] = WriteFileArgs

    def plan(self, args: WriteFileArgs, ctx: ToolContext) -> _WritePlan | ToolResult:
        """What the write would change, or the failure `run` reports; reads but never writes."""
        path = ctx.paths.resolve(args.path)
        shown = ctx.paths.relative(path)
        refusal = files.refuse_outside_root(path, ctx)
        if refusal is not None:
            return refusal
        try:
            if ctx.view.is_dir(path):
                return ToolResult.fail(ErrorType.IS_DIRECTORY, f"{shown} is a directory")
            existed = ctx.view.exists(path)
            current = ctx.view.read_bytes(path) if existed else b""
        except OSError as exc:
            return files.os_error(exc, shown)
        refusal = files.overwrite_refusal(path, current, ctx) if existed else None
        if refusal is not None:
            return refusal
        old = _old_text(current) if existed else ""
        new = planned.restored(args.content, held=old, shown=shown, ctx=ctx)
        if isinstance(new, ToolResult):
            return new
        return _WritePlan(path, shown, existed=existed, old=old, new=new)


@dataclass(frozen=True, slots=True)
class _WritePlan:
    """A write worked out but not done: the file's text before and after."""

    path: Path
    shown: str
    existed: bool
    old: str
    new: str

    def data(self) -> bytes:
        """The content as given, in UTF-8."""
        return self.new.encode("utf-8")

    def result(self) -> ToolResult:
        """What `run` reports once the content is written (and `preview` shows before)."""
        diff = unified_diff(self.old, self.new, self.shown)
        if not self.existed:
            summary = f"Created {self.shown} ({count_lines(self.new)} lines)."
        elif self.old == self.new:
            summary = f"Wrote {self.shown}: content unchanged."
        else:
            summary = f"Updated {self.shown} ({diff.summary} lines)."
        llm = summary if not diff.text else f"{summary}\n\n{diff.text}"
        edit = FileEdit(self.path, self.old if self.existed else None, self.new)
        return ToolResult(llm_content=llm, display=diff.text or summary, edit=edit)


def _old_text(data: bytes) -> str:
    """The current text for the diff; a placeholder line when it is not UTF-8 text."""
    decoded = files.decode_text(data)
    return decoded.text if decoded is not None else "(binary content)\n"
