"""The built-in tools, one module each; `default_tools()` lists them in model order.

This package root only assembles the tool list; the tool modules are imported lazily inside
`default_tools` so importing `qshell.tools` stays cheap. It holds no state and creates new
tool instances on every call, so it is safe from any thread.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from qshell.tools.base import Tool


def default_tools() -> list[Tool]:
    """One instance of each built-in tool, in the order the model is shown them."""
    from qshell.tools.edit import EditTool
    from qshell.tools.glob import GlobTool
    from qshell.tools.grep import GrepTool
    from qshell.tools.ls import LsTool
    from qshell.tools.read_file import ReadFileTool
    from qshell.tools.shell import ShellTool
    from qshell.tools.web_fetch import WebFetchTool
    from qshell.tools.write_file import WriteFileTool

    return [
        ReadFileTool(),
        WriteFileTool(),
        EditTool(),
        GlobTool(),
        GrepTool(),
        LsTool(),
        ShellTool(),
        WebFetchTool(),
    ]


def tools_by_name(tools: Iterable[Tool]) -> dict[str, Tool]:
    """Index tools by name; a later tool with the same name replaces an earlier one."""
    return {tool.name: tool for tool in tools}
