"""grep: regex search over file contents, with ripgrep when present and Python otherwise.

ripgrep reads the real disk, so it only runs when `ctx.view` is the real view (RealView);
for any other view (a speculation's overlay) the Python backend runs, and it reads, lists
and stats everything through `ctx.view`. Both backends honour .gitignore (rg natively,
Python through tools/walk.py), skip `.git/`, binary files and secret-looking files (rg
through `--glob '!…'` rules built from the resolver's secret patterns, Python through
`PathResolver.is_secret`), and print `relpath:line:text` capped at MAX_MATCHES. The
caller's glob is applied in Python for both backends, since an including `--glob` would
override .gitignore inside rg. It never writes and runs nothing but rg. Stateless apart
from the backend chosen at construction: safe from any thread.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

from pydantic import BaseModel, ConfigDict, Field

from qshell.tools import files
from qshell.tools.base import Access, ErrorType, Kind, ToolContext, ToolResult
from qshell.tools.walk import glob_matcher, walk_entries

MAX_MATCHES = 200
MAX_MATCH_LINE_CHARS = 500
MAX_PY_FILE_BYTES = 20 * 1024 * 1024
GREP_TIMEOUT_S = 60.0
RG_ERROR_EXIT = 2
PathFilter = Callable[[str], bool]
_RG_BASE_ARGS = (
    "--no-heading",
    "--line-number",
    "--color=never",
    "--with-filename",
    "--null",
    "--hidden",
    "--no-require-git",
    "--sort=path",
)


def find_rg() -> str | None:
    """The ripgrep executable on PATH, or None."""
    return shutil.which("rg")


class GrepArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    pattern: str = Field(description="Regular expression to search for (Python/Rust syntax).")
    path: str | None = Field(
        default=None, description="File or directory to search (default: the project root)."
    )
    glob: str | None = Field(
        default=None, description="Only search files matching this glob, e.g. `*.py`."
    )


@dataclass
class _Found:
    lines: list[str] = field(default_factory=list)
    files: set[str] = field(default_factory=set)
    capped: bool = False
    stopped: str | None = None


class GrepTool:
    name: ClassVar[str] = "grep"
    kind: ClassVar[Kind] = Kind.SEARCH
    description: ClassVar[str] = (
        "Search file contents with a regular expression. Returns `path:line:text` lines "
        f"(paths relative to the project root), at most {MAX_MATCHES} matches. Files ignored "
        "by .gitignore, binary files and secret files are skipped. Narrow with `path` and "
        "`glob` (e.g. `*.py`, `src/**/*.ts`); use (?i) for case-insensitive matching."
    )
    Args: ClassVar[type[BaseModel]] = GrepArgs

    def __init__(self, use_rg: bool | None = None) -> None:
        """`use_rg`: True forces ripgrep, False forces Python, None uses rg if installed.

        Whatever the choice, a context whose view is not the real disk searches in Python.
        """
        self._use_rg = use_rg

    def accesses(self, args: GrepArgs, ctx: ToolContext) -> list[Access]:
        return [Access(ctx.paths.resolve(args.path))]

    def run(self, args: GrepArgs, ctx: ToolContext) -> ToolResult:
        try:
            regex = re.compile(args.pattern)
        except re.error as exc:
            return ToolResult.fail(ErrorType.INVALID_ARGS, f"invalid regular expression: {exc}")
        try:
            matches = glob_matcher(args.glob) if args.glob else None
        except ValueError as exc:
            return ToolResult.fail(ErrorType.INVALID_ARGS, str(exc))
        base = ctx.paths.resolve(args.path)
        try:
            if not ctx.view.exists(base):
                return files.not_found(base, ctx)
        except OSError as exc:
            return files.os_error(exc, ctx.paths.relative(base))
        on_disk = files.on_disk(ctx.view)
        rg = find_rg() if self._use_rg is not False and on_disk else None
        if self._use_rg and on_disk and rg is None:
            return ToolResult.fail(ErrorType.IO, "ripgrep (rg) is not installed")
        found = _search_rg(rg, args.pattern, matches, base, ctx) if rg is not None else None
        if found is None:
            found = _search_python(regex, matches, base, ctx)
        if ctx.cancel.cancelled:
            return ToolResult.fail(ErrorType.CANCELLED, "grep was cancelled")
        return _render(found, args, ctx)


def _record(found: _Found, shown: str, lineno: int, text: str) -> bool:
    """Add one match; False once MAX_MATCHES is exceeded (the caller should stop)."""
    if len(found.lines) >= MAX_MATCHES:
        found.capped = True
        return False
    if len(text) > MAX_MATCH_LINE_CHARS:
        text = text[:MAX_MATCH_LINE_CHARS] + " [...]"
    found.lines.append(f"{shown}:{lineno}:{text}")
    found.files.add(shown)
    return True


def _rg_command(rg: str, pattern: str, base: Path, ctx: ToolContext) -> list[str]:
    # Only exclusions go to rg: an including --glob would override .gitignore there, so the
    # caller's glob is applied to rg's output instead.
    command = [rg, *_RG_BASE_ARGS, "--glob", "!.git"]
    for secret in ctx.paths.secret_patterns:
        if secret != ".env.*":  # `.env.example` is no secret; `_wanted` drops `.env.local`
            command += ["--iglob", f"!{secret}"]
    if ctx.paths.is_inside_root(base):
        target = "." if base == ctx.paths.root else base.relative_to(ctx.paths.root).as_posix()
    else:
        target = str(base)
    return [*command, "--regexp", pattern, "--", target]


def _search_rg(
    rg: str, pattern: str, matches: PathFilter | None, base: Path, ctx: ToolContext
) -> _Found | None:
    """Search with ripgrep; None when rg cannot start or rejects the regex (the caller
    then falls back to Python)."""
    found = _Found()
    tree_wide = ctx.view.is_dir(base)
    with tempfile.TemporaryFile() as errors:
        try:
            proc = subprocess.Popen(
                _rg_command(rg, pattern, base, ctx),
                cwd=ctx.paths.root,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=errors,
            )
        except OSError:
            return None
        timed_out = threading.Event()

        def on_timeout() -> None:
            timed_out.set()
            proc.kill()

        timer = threading.Timer(GREP_TIMEOUT_S, on_timeout)
        timer.daemon = True
        timer.start()
        unregister = ctx.cancel.on_cancel(proc.kill)
        try:
            assert proc.stdout is not None
            for raw in proc.stdout:
                path_bytes, _, rest = raw.rstrip(b"\r\n").partition(b"\0")
                lineno, _, text = rest.partition(b":")
                if not lineno.isdigit():
                    continue
                path = ctx.paths.root / path_bytes.decode("utf-8", errors="replace")
                if tree_wide and not _wanted(path, base, matches, ctx):
                    continue
                shown = ctx.paths.relative(path)
                if not _record(found, shown, int(lineno), text.decode("utf-8", errors="replace")):
                    proc.kill()
                    break
        finally:
            timer.cancel()
            unregister()
            if proc.stdout is not None:
                proc.stdout.close()
            returncode = proc.wait()
        errors.seek(0)
        stderr = errors.read().decode("utf-8", errors="replace")
    if timed_out.is_set():
        found.stopped = f"search stopped after {GREP_TIMEOUT_S:.0f} s"
    elif returncode == RG_ERROR_EXIT and not found.lines and "regex" in stderr:
        return None
    return found


def _wanted(path: Path, base: Path, matches: PathFilter | None, ctx: ToolContext) -> bool:
    """True for a file of a tree-wide search that passes the glob and is not a secret, nor
    a symlink to one or out of the root."""
    if matches is not None and not matches(path.relative_to(base).as_posix()):
        return False
    return not ctx.paths.hidden(path)


def _candidates(
    base: Path, matches: PathFilter | None, ctx: ToolContext
) -> Iterable[tuple[Path, int]]:
    """(path, size) of each file to search, as `ctx.view` shows the tree."""
    if ctx.view.is_file(base):
        try:
            size = ctx.view.stat(base).st_size
        except OSError:
            return
        yield base, size
        return
    for entry in walk_entries(base, ctx.paths.root, view=ctx.view):
        if _wanted(entry.path, base, matches, ctx):
            yield entry.path, entry.size


def _search_python(
    regex: re.Pattern[str], matches: PathFilter | None, base: Path, ctx: ToolContext
) -> _Found:
    found = _Found()
    deadline = time.monotonic() + GREP_TIMEOUT_S
    for path, size in _candidates(base, matches, ctx):
        if ctx.cancel.cancelled:
            break
        if time.monotonic() > deadline:
            found.stopped = f"search stopped after {GREP_TIMEOUT_S:.0f} s"
            break
        if size > MAX_PY_FILE_BYTES:
            continue
        try:
            data = ctx.view.read_bytes(path)
        except OSError:
            continue
        if b"\0" in data[: files.SNIFF_BYTES]:
            continue
        shown = ctx.paths.relative(path)
        lines = data.decode("utf-8", errors="replace").split("\n")
        if lines[-1] == "":
            lines.pop()
        for lineno, line in enumerate(lines, start=1):
            text = line.removesuffix("\r")
            if regex.search(text) and not _record(found, shown, lineno, text):
                return found
    return found


def _render(found: _Found, args: GrepArgs, ctx: ToolContext) -> ToolResult:
    if not found.lines:
        message = f"No matches for {args.pattern!r}."
        if found.stopped:
            message += f" ({found.stopped})"
        return ToolResult(llm_content=message, display=message)
    kept: list[str] = []
    size = 0
    for line in found.lines:
        size += len(line) + 1
        if size > ctx.max_output_chars:
            found.capped = True
            break
        kept.append(line)
    body = "\n".join(kept)
    if found.capped:
        body += (
            f"\n\n[Showing the first {len(kept)} matches; there are more. Narrow the pattern, "
            "path or glob to see the rest.]"
        )
    if found.stopped:
        body += f"\n\n[Incomplete: {found.stopped}.]"
    more = "+" if found.capped else ""
    summary = f"{len(found.lines)}{more} matches in {len(found.files)} files"
    return ToolResult(llm_content=body, display=summary)
