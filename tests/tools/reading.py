"""`read`: the model reads files with read_file, as it must before write_file or edit may
overwrite them (tools/ledger.py)."""

from __future__ import annotations

from qshell.tools.base import ToolContext
from qshell.tools.read_file import ReadFileArgs, ReadFileTool


def read_first(ctx: ToolContext, *paths: str) -> None:
    """Read each of `paths` through `ctx` (its view and its ledger), as the model would."""
    for path in paths:
        result = ReadFileTool().run(ReadFileArgs(path=path), ctx)
        assert result.error is None, result.error
