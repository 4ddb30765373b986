"""Tools that gate plugins add (`qshell_register_tools`), checked and given the Tool shape.

A plugin's tool is any object with a `name`, a `kind` (a Kind or its value), a
`description`, an `Args` pydantic model class and `run(args, ctx)` returning a ToolResult
or text; `accesses(args, ctx)`, the paths it reads or writes (Access values, or paths it
reads), is optional but decides where it may run. `registered_tools` checks each one — a
malformed tool, or one whose name is taken, is reported once through the plugin host and
left out — and wraps the rest in a `RegisteredTool` subclass that remembers its plugin.
`speculation_concern` is the speculative gate's rule for them: such a tool runs in a
speculation only when its kind is read or search and it declares the paths it reads.
Nothing here decides a main-loop call (policy does, by kind). The wrappers hold no state
of their own: as thread-safe as the plugin's tool.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, ClassVar, cast

from pydantic import BaseModel

from qshell.plugins import PLUGIN_FAILURES, PluginHost, failure_text
from qshell.tools.base import Access, ErrorType, Kind, Tool, ToolContext, ToolResult

log = logging.getLogger(__name__)

HOOK = "qshell_register_tools"
TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")  # what every provider accepts
SPECULATIVE_KINDS = frozenset({Kind.READ, Kind.SEARCH})


class RegisteredTool:
    """A plugin's tool in the Tool shape; each one is a subclass made by `adapt`."""

    name: ClassVar[str]
    kind: ClassVar[Kind]
    description: ClassVar[str]
    Args: ClassVar[type[BaseModel]]
    plugin: ClassVar[str]

    def __init__(self, tool: Any) -> None:
        self._tool = tool

    def run(self, args: Any, ctx: ToolContext) -> ToolResult:
        try:
            result = self._tool.run(args, ctx)
        except SystemExit as exc:  # the loop turns any other exception into a result
            return ToolResult.fail(ErrorType.IO, f"the tool failed: {failure_text(exc)}")
        if isinstance(result, ToolResult):
            return result
        if isinstance(result, str):
            return ToolResult(llm_content=result, display=result)
        why = f"the {self.plugin} plugin's tool returned {type(result).__name__}, not text"
        return ToolResult.fail(ErrorType.IO, why)

    def accesses(self, args: Any, ctx: ToolContext) -> Sequence[Access]:
        method = getattr(self._tool, "accesses", None)
        if method is None:
            return []
        try:
            declared = list(method(args, ctx))
        except PLUGIN_FAILURES:  # it declares nothing, so speculation never runs it
            log.warning("tool %s of plugin %s: accesses failed", self.name, self.plugin)
            return []
        return [
            a if isinstance(a, Access) else Access(ctx.paths.resolve(str(a)))
            for a in declared
            if isinstance(a, Access | str | Path)
        ]


def adapt(plugin: str, tool: object) -> Tool:
    """`tool` as a Tool; ValueError or TypeError say what is wrong with it."""
    name = getattr(tool, "name", None)
    if not isinstance(name, str) or not TOOL_NAME.match(name):
        raise ValueError(f"tool name {name!r} is not 1-64 letters, digits, _ or -")
    kind = Kind(str(getattr(tool, "kind", "")))
    description = getattr(tool, "description", "")
    args = getattr(tool, "Args", None)
    if not isinstance(args, type) or not issubclass(args, BaseModel):
        raise TypeError(f"tool {name}: Args must be a pydantic model class")
    if not callable(getattr(tool, "run", None)):
        raise TypeError(f"tool {name} has no run(args, ctx)")
    attributes = {
        "name": name,
        "kind": kind,
        "description": str(description),
        "Args": args,
        "plugin": plugin,
    }
    made = type(f"PluginTool_{name}", (RegisteredTool,), attributes)
    return cast(Tool, made(tool))


def registered_tools(host: PluginHost, taken: Iterable[str]) -> list[Tool]:
    """The plugins' tools that pass the checks, whose names are not in `taken`."""
    names = set(taken)
    tools: list[Tool] = []
    for registered in host.tools:
        try:
            tool = adapt(registered.plugin, registered.tool)
        except (ValueError, TypeError) as exc:
            host.report(registered.plugin, HOOK, str(exc))
            continue
        except PLUGIN_FAILURES as exc:  # the plugin's own object raised
            host.report(registered.plugin, HOOK, failure_text(exc))
            continue
        if tool.name in names:
            host.report(registered.plugin, HOOK, f"tool name {tool.name} is taken")
            continue
        names.add(tool.name)
        tools.append(tool)
    return tools


def speculation_concern(tool: Tool, accesses: Sequence[Access]) -> str | None:
    """Why a plugin's tool may not run speculatively (None for a built-in tool, or a read or
    search tool that declares the paths it reads)."""
    if not isinstance(tool, RegisteredTool):
        return None
    if tool.kind not in SPECULATIVE_KINDS:
        return f"{tool.kind} tools of plugins never run speculatively"
    if not any(not access.write for access in accesses):
        return f"the {tool.plugin} plugin's tool declares no paths it reads"
    return None
