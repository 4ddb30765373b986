"""Tools that plugins register: checked, adapted to the Tool shape, and kept out of a
speculation unless they read or search and declare the paths they read."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from qshell.plugins import hookimpl
from qshell.sessions import session_tools
from qshell.tools.base import Access, Kind, ToolContext, ToolResult, tool_spec
from qshell.tools.registered import adapt, registered_tools, speculation_concern
from tests.plugins.helpers import host_of


class CountArgs(BaseModel):
    path: str = "."


class Count:
    name = "count_files"
    kind = "search"
    description = "Count the files under a folder."
    Args = CountArgs

    def __init__(self, *, declares: bool = True) -> None:
        self.declares = declares

    def accesses(self, args: CountArgs, ctx: ToolContext) -> list[Any]:
        return [args.path] if self.declares else []

    def run(self, args: CountArgs, ctx: ToolContext) -> str:
        return str(sum(1 for p in ctx.paths.resolve(args.path).iterdir() if p.is_file()))


class Registers:
    def __init__(self, *tools: object) -> None:
        self.tools = tools

    @hookimpl
    def qshell_register_tools(self, register):
        for tool in self.tools:
            register(tool)


def test_a_registered_tool_works_like_a_built_in_one(root: Path, ctx: ToolContext):
    (root / "a.txt").write_text("a")
    tool = adapt("counter", Count())
    assert (tool.name, tool.kind, type(tool).plugin) == ("count_files", Kind.SEARCH, "counter")  # type: ignore[attr-defined]
    args = tool.Args.model_validate({"path": "."})
    assert tool.run(args, ctx) == ToolResult(llm_content="1", display="1")
    assert tool.accesses(args, ctx) == [Access(root)]
    assert tool_spec(tool).parameters["properties"]["path"]["default"] == "."


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ({"name": "bad name!"}, "not 1-64 letters"),
        ({"kind": "teleport"}, "teleport"),
        ({"Args": dict}, "pydantic model"),
        ({"run": None}, "no run"),
    ],
)
def test_a_malformed_tool_is_refused_saying_what_is_wrong(change, problem):
    tool = Count()
    for key, value in change.items():
        setattr(tool, key, value)
    with pytest.raises((ValueError, TypeError), match=problem):
        adapt("p", tool)


def test_bad_and_clashing_tools_are_left_out_and_said_once():
    clash = Count()
    clash.name = "read_file"
    host = host_of(("p", Registers(Count(), clash, object())))
    tools = session_tools(host)
    assert [t.name for t in tools].count("count_files") == 1
    assert [t.name for t in tools].count("read_file") == 1  # the built-in one
    assert host.take_notices() == [
        "plugin p failed in qshell_register_tools: tool name read_file is taken"
    ]


def test_a_plugin_tool_runs_speculatively_only_reading_declared_paths(ctx: ToolContext):
    args = CountArgs()
    declared = adapt("p", Count())
    silent = adapt("p", Count(declares=False))
    assert speculation_concern(declared, declared.accesses(args, ctx)) is None
    assert "declares no paths" in (speculation_concern(silent, []) or "")
    other = Count()
    other.kind = "other"
    assert "never run speculatively" in (
        speculation_concern(adapt("p", other), [Access(ctx.root)]) or ""
    )


def test_registered_tools_keep_the_order_they_were_registered():
    second = Count()
    second.name = "count_again"
    host = host_of(("p", Registers(Count(), second)))
    assert [t.name for t in registered_tools(host, [])] == ["count_files", "count_again"]
