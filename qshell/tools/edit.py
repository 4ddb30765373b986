"""edit: replace an exact string in a file inside the project root and report the diff.

`old_string` must occur exactly once unless `replace_all` is set; an empty `old_string`
creates a new file (or fills an empty one). The file's encoding is kept (UTF-8, with its
byte-order mark if it had one) and so are CRLF line endings when `new_string` uses LF. It
refuses paths that resolve outside the root and never writes there; a failed match never
writes at all. Like write_file it changes an existing file only when the model has read it
in this session and it has not changed since (`files.overwrite_refusal`), and notes what
it wrote (`ctx.reads`). A redaction marker in old_string or new_string stands for the
secret the model saw redacted: old_string matches the real bytes, and new_string writes
the secret back where the file holds it; anywhere else the edit is refused
(`planned.restored`). `preview` works the change out the same way and returns the diff without
writing; both carry out the plan through tools/planned.py, as write_file does. Every read,
existence check and write goes through `ctx.view`. Stateless: one
instance serves concurrent calls from any thread.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from pydantic import BaseModel, ConfigDict, Field

from qshell.prompts import load
from qshell.tools import files, planned
from qshell.tools.base import ErrorType, FileEdit, Kind, ToolContext, ToolResult
from qshell.tools.diffs import unified_diff

_LINE_NUMBER_PREFIX_RE = re.compile(r"^\s*\d+\t", re.MULTILINE)
_WHITESPACE_RE = re.compile(r"\s+")


class EditArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    path: str = Field(description="File to edit: relative to the project root, or absolute.")
    old_string: str = Field(
        description="Exact text to replace, including whitespace and indentation. Empty "
        "only to create a new file."
    )
    new_string: str = Field(description="Text to put in its place (must differ from old_string).")
    replace_all: bool = Field(
        default=False, description="Replace every occurrence instead of requiring exactly one."
    )


class EditTool(planned.PlannedWriteTool[EditArgs]):
    name: ClassVar[str] = "edit"
    kind: ClassVar[Kind] = Kind.EDIT
    description: ClassVar[str] = load("tool_edit")
    Args: ClassVar[type[BaseModel]] = EditArgs

    def plan(self, args: EditArgs, ctx: ToolContext) -> _EditPlan | ToolResult:
        """What the edit would write, or the failure `run` reports; reads but never writes."""
        path = ctx.paths.resolve(args.path)
        shown = ctx.paths.relative(path)
        refusal = files.refuse_outside_root(path, ctx)
        if refusal is not None:
            return refusal
        if args.old_string == args.new_string:
            return ToolResult.fail(
                ErrorType.NO_CHANGE, "old_string and new_string are identical; nothing to change"
            )
        try:
            if ctx.view.is_dir(path):
                return ToolResult.fail(ErrorType.IS_DIRECTORY, f"{shown} is a directory")
            if not ctx.view.exists(path):
                if args.old_string:
                    hint = "To create a new file, pass an empty old_string."
                    return files.not_found(path, ctx, hint=hint)
                new = planned.restored(args.new_string, held="", shown=shown, ctx=ctx)
                if isinstance(new, ToolResult):
                    return new
                return _EditPlan(path, shown, old="", new=new, encoder=None, count=0)
            current = ctx.view.read_bytes(path)
        except OSError as exc:
            return files.os_error(exc, shown)
        decoded = files.decode_text(current)
        if decoded is None:
            return ToolResult.fail(
                ErrorType.BINARY_FILE, f"{shown} is binary or not UTF-8 text; it cannot be edited"
            )
        refusal = files.overwrite_refusal(path, current, ctx)
        if refusal is not None:
            return refusal
        text = decoded.text
        pair = _restored(args, text, shown, ctx)
        if isinstance(pair, ToolResult):
            return pair
        old_string, new_string = pair
        if not old_string:
            if text:
                return ToolResult.fail(
                    ErrorType.INVALID_ARGS,
                    f"old_string is empty but {shown} already has content; give the exact text "
                    "to replace, or use write_file to replace the whole file",
                )
            return _EditPlan(path, shown, old="", new=new_string, encoder=decoded, count=0)
        hit = _find(text, old_string, new_string)
        if hit is None:
            return ToolResult.fail(ErrorType.NO_MATCH, _no_match_message(text, old_string))
        old, new, count = hit
        if count > 1 and not args.replace_all:
            return ToolResult.fail(
                ErrorType.AMBIGUOUS_MATCH,
                f"old_string occurs {count} times in {shown}; include more surrounding lines to "
                "make it unique, or set replace_all to true to replace every occurrence",
            )
        replaced = text.replace(old, new) if args.replace_all else text.replace(old, new, 1)
        done = count if args.replace_all else 1
        return _EditPlan(path, shown, old=text, new=replaced, encoder=decoded, count=done)


@dataclass(frozen=True, slots=True)
class _EditPlan:
    """An edit worked out but not written: the file's text before and after."""

    path: Path
    shown: str
    old: str
    new: str
    encoder: files.TextFile | None  # None: a new file, written as plain UTF-8
    count: int

    def data(self) -> bytes:
        """The new text in the file's own encoding (plain UTF-8 for a new file)."""
        encoder = self.encoder
        return encoder.encode(self.new) if encoder is not None else self.new.encode("utf-8")

    def result(self) -> ToolResult:
        """What `run` reports once the new text is written (and `preview` shows before)."""
        diff = unified_diff(self.old, self.new, self.shown)
        if self.encoder is None:
            summary = f"Created {self.shown} ({diff.summary} lines)."
        else:
            plural = "occurrence" if self.count == 1 else "occurrences"
            summary = f"Edited {self.shown}: replaced {self.count} {plural} ({diff.summary} lines)."
        edit = FileEdit(self.path, self.old if self.encoder is not None else None, self.new)
        return ToolResult(
            llm_content=f"{summary}\n\n{diff.text}", display=diff.text or summary, edit=edit
        )


def _restored(
    args: EditArgs, text: str, shown: str, ctx: ToolContext
) -> tuple[str, str] | ToolResult:
    """old_string and new_string with their redaction markers put back (old_string then
    matches the file's real bytes), or the failure when a marker cannot be put back."""
    old = planned.restored(args.old_string, held=text, shown=shown, ctx=ctx)
    if isinstance(old, ToolResult):
        return old
    new = planned.restored(args.new_string, held=text, shown=shown, ctx=ctx)
    return new if isinstance(new, ToolResult) else (old, new)


def _uses_crlf(text: str) -> bool:
    """True when most of `text`'s line breaks are CRLF."""
    crlf = text.count("\r\n")
    return crlf > 0 and crlf * 2 >= text.count("\n")


def _variants(text: str, old: str, new: str) -> list[tuple[str, str]]:
    """(old, new) pairs to try, the file's own line-ending style first, then as given."""
    lf = (old.replace("\r\n", "\n"), new.replace("\r\n", "\n"))
    crlf = (lf[0].replace("\n", "\r\n"), lf[1].replace("\n", "\r\n"))
    ordered = [crlf, (old, new), lf] if _uses_crlf(text) else [lf, (old, new), crlf]
    unique: list[tuple[str, str]] = []
    for pair in ordered:
        if pair not in unique:
            unique.append(pair)
    return unique


def _find(text: str, old: str, new: str) -> tuple[str, str, int] | None:
    """The first line-ending variant of (old, new) found in `text`, with its count."""
    for old_variant, new_variant in _variants(text, old, new):
        count = text.count(old_variant)
        if count:
            return old_variant, new_variant, count
    return None


def _no_match_message(text: str, old: str) -> str:
    message = "old_string was not found in the file."
    if _LINE_NUMBER_PREFIX_RE.search(old):
        return (
            f"{message} It seems to contain read_file line-number prefixes (digits and a tab); "
            "remove them and copy only the file's text."
        )
    if _squash(old) and _squash(old) in _squash(text):
        return (
            f"{message} The same text exists with different whitespace or indentation; copy it "
            "exactly from a fresh read_file."
        )
    first = next((line.strip() for line in old.splitlines() if line.strip()), "")
    if first:
        for number, line in enumerate(text.splitlines(), start=1):
            if first in line:
                return (
                    f"{message} Its first line appears at line {number}, but the lines after it "
                    "differ; read the file again and copy the text exactly."
                )
    return f"{message} Read the file again and copy the text exactly, whitespace included."


def _squash(text: str) -> str:
    return _WHITESPACE_RE.sub(" ", text).strip()
