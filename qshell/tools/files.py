"""File helpers shared by the file tools: binary sniffing, UTF-8 decoding, error mapping.

It answers "is this binary?", decodes a file the way read_file and edit both need (UTF-8,
byte-order mark remembered), opens a file for streaming, suggests near names for a missing
path, turns an OSError into the matching ToolResult failure, and says whether an existing
file may be overwritten (read in this session and unchanged since: `ctx.reads`,
tools/ledger.py). Whatever it reads, lists or stats goes through the tool's `ctx.view` (a
FileView); it never writes and never decides policy. Safe from any thread (the ledger
locks).
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from pathlib import Path

from qshell.tools.base import ErrorType, ToolContext, ToolResult
from qshell.tools.fileview import FileView, RealView
from qshell.tools.ledger import Seen, Unread

SNIFF_BYTES = 8192
UTF8_BOM = b"\xef\xbb\xbf"
MAX_SUGGESTIONS = 3
MAX_SUGGESTION_SCAN_ENTRIES = 2000
_UTF8_MAX_CHAR_BYTES = 4


def looks_binary(sample: bytes) -> bool:
    """True when `sample` (the start of a file) has a NUL byte or is not UTF-8."""
    if b"\x00" in sample:
        return True
    # A multi-byte character may be cut at the end of the sample; allow that much.
    for cut in range(_UTF8_MAX_CHAR_BYTES):
        try:
            sample[: len(sample) - cut].decode("utf-8")
            return False
        except UnicodeDecodeError:
            continue
    return True


@dataclass(frozen=True, slots=True)
class TextFile:
    """A decoded text file: content without the BOM, and whether it had one."""

    text: str
    bom: bool

    def encode(self, text: str) -> bytes:
        """`text` as bytes in this file's encoding (UTF-8, BOM kept if it had one)."""
        data = text.encode("utf-8")
        return UTF8_BOM + data if self.bom else data


def decode_text(data: bytes) -> TextFile | None:
    """The file's text, or None when it is binary or not valid UTF-8."""
    if b"\x00" in data[:SNIFF_BYTES]:
        return None
    bom = data.startswith(UTF8_BOM)
    try:
        text = data[len(UTF8_BOM) :].decode("utf-8") if bom else data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return TextFile(text, bom)


def on_disk(view: FileView) -> bool:
    """True when `view` is the real disk, so a tool may stream or hand paths to rg."""
    return isinstance(view, RealView)


def similar_names(path: Path, view: FileView) -> list[str]:
    """Names in `path`'s parent directory that look like `path.name` (cheap, best effort)."""
    try:
        entries = view.scandir(path.parent)
    except OSError:
        return []
    names = [entry.name for entry in entries[:MAX_SUGGESTION_SCAN_ENTRIES]]
    return difflib.get_close_matches(path.name, names, n=MAX_SUGGESTIONS, cutoff=0.6)


def not_found(path: Path, ctx: ToolContext, hint: str = "") -> ToolResult:
    """A NOT_FOUND failure for `path`, naming near matches in its directory if any."""
    paths = ctx.paths
    message = f"{paths.relative(path)} does not exist."
    near = [paths.relative(path.parent / name) for name in similar_names(path, ctx.view)]
    if near:
        message += f" Did you mean: {', '.join(near)}?"
    if hint:
        message += f" {hint}"
    return ToolResult.fail(ErrorType.NOT_FOUND, message)


def os_error(exc: OSError, shown: str) -> ToolResult:
    """The ToolResult failure for an OSError raised while working on `shown`."""
    reason = exc.strerror or str(exc)
    if isinstance(exc, FileNotFoundError):
        return ToolResult.fail(ErrorType.NOT_FOUND, f"{shown} does not exist")
    if isinstance(exc, PermissionError):
        return ToolResult.fail(ErrorType.PERMISSION_DENIED, f"{shown}: permission denied")
    if isinstance(exc, IsADirectoryError):
        return ToolResult.fail(ErrorType.IS_DIRECTORY, f"{shown} is a directory")
    if isinstance(exc, NotADirectoryError):
        return ToolResult.fail(ErrorType.NOT_A_DIRECTORY, f"{shown}: a parent is not a directory")
    return ToolResult.fail(ErrorType.IO, f"{shown}: {reason}")


def refuse_outside_root(path: Path, ctx: ToolContext) -> ToolResult | None:
    """An OUTSIDE_ROOT failure when `path` is not inside the project root, else None."""
    if ctx.paths.is_inside_root(path):
        return None
    return ToolResult.fail(
        ErrorType.OUTSIDE_ROOT,
        f"{path} is outside the project root {ctx.paths.root}; only files inside it can be written",
    )


def require_dir(path: Path, ctx: ToolContext) -> ToolResult | None:
    """A NOT_FOUND / NOT_A_DIRECTORY failure unless `path` is a directory in `ctx.view`."""
    paths = ctx.paths
    try:
        if ctx.view.is_dir(path):
            return None
        if not ctx.view.exists(path):
            return not_found(path, ctx)
    except OSError as exc:
        return os_error(exc, paths.relative(path))
    return ToolResult.fail(ErrorType.NOT_A_DIRECTORY, f"{paths.relative(path)} is not a directory")


# the failures of a write no answer can make succeed (the model must first read the file,
# or it wrote a redaction marker that cannot be put back there): no question is worth asking
UNANSWERABLE = frozenset(
    {ErrorType.NOT_READ, ErrorType.CHANGED_SINCE_READ, ErrorType.REDACTION_MARKER}
)


def unanswerable(planned: object) -> ToolResult | None:
    """`planned` (a tool's plan, or the failure it met) when it is a failure the user's
    answer cannot change."""
    if isinstance(planned, ToolResult) and planned.error is not None:
        return planned if planned.error.type in UNANSWERABLE else None
    return None


def overwrite_refusal(path: Path, current: bytes, ctx: ToolContext) -> ToolResult | None:
    """The failure of a write over the existing file `path` (now holding `current`) that
    the model has not read in this session, or that changed since it read it; else None."""
    shown = ctx.paths.relative(path)
    problem = ctx.reads.problem(ctx.view, path, current)
    if problem is Unread.NEVER_READ:
        return ToolResult.fail(
            ErrorType.NOT_READ,
            f"{shown} already exists and has not been read in this session; read it with "
            "read_file first (one page is enough), then write it",
        )
    if problem is Unread.CHANGED:
        return ToolResult.fail(
            ErrorType.CHANGED_SINCE_READ,
            f"{shown} has changed since it was last read (the user or another program edited "
            "it); read it again with read_file so those changes are not lost",
        )
    return None


def note_written(path: Path, data: bytes, ctx: ToolContext) -> None:
    """The model knows what it has just written to `path`: it may go on editing it."""
    ctx.reads.note(ctx.view, path, Seen.of(data))
