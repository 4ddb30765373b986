"""read_file: show a text file to the model as numbered lines, one page at a time.

It reads and stats the file through `ctx.view`, streaming it where the view can (the real
disk and the speculation overlay: never more than one page plus a counting buffer in
memory, however large the file). It numbers lines `cat -n` style from 1, truncates very
long lines and tells the model which offset to read next; it stops with a cancelled result
as soon as `ctx.cancel` is set, checked every line and every counting chunk. It refuses
binary files, directories and special files, and never writes. A successful read — one page
or the whole file — is noted in `ctx.reads` with the SHA-256 of every byte it streamed (it
reads to the end to count the lines anyway), so write_file and edit may then overwrite
the file while it still holds those bytes. Reads outside the root are allowed here; approval is the policy layer's job via `accesses()`. Stateless: one instance
serves concurrent calls from any thread.
"""

from __future__ import annotations

import stat
from dataclasses import dataclass, field
from typing import ClassVar

from pydantic import BaseModel, ConfigDict, Field

from qshell.cancel import CancelToken
from qshell.tools import files
from qshell.tools.base import Access, ErrorType, Kind, ToolContext, ToolResult
from qshell.tools.fileview import open_stream
from qshell.tools.ledger import Hashing

DEFAULT_LIMIT_LINES = 2000
MAX_LINE_CHARS = 2000
MAX_LINE_BYTES = MAX_LINE_CHARS * 4
READ_BUDGET_CHARS = 100_000
COUNT_CHUNK_BYTES = 1 << 20
TRUNCATED_LINE_MARK = " [... line truncated]"


class ReadFileArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    path: str = Field(description="File to read: relative to the project root, or absolute.")
    offset: int | None = Field(
        default=None, ge=1, description="1-based line number to start at (default 1)."
    )
    limit: int | None = Field(
        default=None,
        ge=1,
        description=f"Maximum number of lines to return (default {DEFAULT_LIMIT_LINES}).",
    )


@dataclass
class _Page:
    lines: list[str] = field(default_factory=list)
    chars: int = 0
    first: int = 0
    last: int = 0
    total: int = 0


class ReadFileTool:
    name: ClassVar[str] = "read_file"
    kind: ClassVar[Kind] = Kind.READ
    description: ClassVar[str] = (
        "Read a text file. Returns lines prefixed with their 1-based line number and a tab "
        f"(like `cat -n`); up to {DEFAULT_LIMIT_LINES} lines per call, lines longer than "
        f"{MAX_LINE_CHARS} characters are cut. Use `offset` and `limit` to page through long "
        "files; the result says which offset to use next. The line-number prefix is not part "
        "of the file: never copy it into edit strings. Binary files and directories are "
        "refused (use ls for directories)."
    )
    Args: ClassVar[type[BaseModel]] = ReadFileArgs

    def accesses(self, args: ReadFileArgs, ctx: ToolContext) -> list[Access]:
        return [Access(ctx.paths.resolve(args.path))]

    def run(self, args: ReadFileArgs, ctx: ToolContext) -> ToolResult:
        path = ctx.paths.resolve(args.path)
        shown = ctx.paths.relative(path)
        try:
            info = ctx.view.stat(path)
        except FileNotFoundError:
            return files.not_found(path, ctx)
        except OSError as exc:
            return files.os_error(exc, shown)
        if stat.S_ISDIR(info.st_mode):
            return ToolResult.fail(
                ErrorType.IS_DIRECTORY, f"{shown} is a directory; use ls to list it"
            )
        if not stat.S_ISREG(info.st_mode):
            return ToolResult.fail(ErrorType.INVALID_ARGS, f"{shown} is not a regular file")
        offset = args.offset or 1
        limit = args.limit or DEFAULT_LIMIT_LINES
        try:
            with open_stream(ctx.view, path) as fh:
                if files.looks_binary(fh.read(files.SNIFF_BYTES)):
                    return ToolResult.fail(
                        ErrorType.BINARY_FILE, f"{shown} is a binary file (or not UTF-8 text)"
                    )
                fh.seek(0)
                hashing = Hashing(fh)
                page = _read_page(hashing, offset, limit, ctx.cancel)
        except OSError as exc:
            return files.os_error(exc, shown)
        if page is None:
            return ToolResult.fail(ErrorType.CANCELLED, f"reading {shown} was cancelled")
        result = _render(page, shown, offset)
        if result.error is None:  # one page is enough: the model knows the file is there
            ctx.reads.note(ctx.view, path, hashing.seen())
        return result


def _read_line(fh: Hashing) -> tuple[bytes, bool] | None:
    """The next line (at most MAX_LINE_BYTES of it, without its newline) and whether it
    was cut; None at end of file."""
    raw = fh.readline(MAX_LINE_BYTES)
    if not raw:
        return None
    if raw.endswith(b"\n"):
        return raw.rstrip(b"\r\n"), False
    if len(raw) < MAX_LINE_BYTES:
        return raw, False
    # The line goes on: skip the rest of it.
    rest = fh.readline(MAX_LINE_BYTES)
    while rest and not rest.endswith(b"\n"):
        rest = fh.readline(MAX_LINE_BYTES)
    return raw, True


def _read_page(fh: Hashing, offset: int, limit: int, cancel: CancelToken) -> _Page | None:
    """The page from line `offset`, and the file's line count; None when cancelled."""
    page = _Page()
    lineno = 0
    while True:
        if cancel.cancelled:
            return None
        item = _read_line(fh)
        if item is None:
            page.total = lineno
            return page
        lineno += 1
        if lineno < offset:
            continue
        full = len(page.lines) >= limit or page.chars >= READ_BUDGET_CHARS
        if full:
            remaining = _count_remaining_lines(fh, cancel)
            if remaining is None:
                return None
            page.total = lineno + remaining
            return page
        raw, cut = item
        text = raw.decode("utf-8", errors="replace")
        if lineno == 1:
            text = text.removeprefix("\ufeff")
        if cut or len(text) > MAX_LINE_CHARS:
            text = text[:MAX_LINE_CHARS] + TRUNCATED_LINE_MARK
        line = f"{lineno:>6}\t{text}"
        page.lines.append(line)
        page.chars += len(line) + 1
        page.first = page.first or lineno
        page.last = lineno


def _count_remaining_lines(fh: Hashing, cancel: CancelToken) -> int | None:
    """Lines after the current position, counting a final unterminated line; None when
    cancelled."""
    count = 0
    last = b"\n"
    while chunk := fh.read(COUNT_CHUNK_BYTES):
        if cancel.cancelled:
            return None
        count += chunk.count(b"\n")
        last = chunk[-1:]
    return count if last == b"\n" else count + 1


def _render(page: _Page, shown: str, offset: int) -> ToolResult:
    if page.total == 0:
        return ToolResult(
            llm_content=f"{shown} is empty.", display=f"{shown} is empty", result_is_terminal=True
        )
    if not page.lines:
        return ToolResult.fail(
            ErrorType.INVALID_ARGS,
            f"offset {offset} is past the end of {shown}, which has {page.total} lines",
        )
    body = "\n".join(page.lines)
    if page.last < page.total:
        body += (
            f"\n\n[Showing lines {page.first}-{page.last} of {page.total}. "
            f"Call read_file with offset={page.last + 1} to read more.]"
        )
    count = page.last - page.first + 1
    # the file's text is the answer's form (seed 004's table: terminal, but no skip — a
    # read is as often a step of a larger task)
    return ToolResult(
        llm_content=body, display=f"Read {count} lines from {shown}", result_is_terminal=True
    )
