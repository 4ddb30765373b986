from __future__ import annotations

import pytest
from pydantic import ValidationError

from qshell.tools import default_tools, tools_by_name
from qshell.tools.base import CONCURRENCY_SAFE_KINDS, Kind, tool_spec

EXPECTED = {
    "read_file": (Kind.READ, {"path", "offset", "limit"}, {"path"}),
    "write_file": (Kind.EDIT, {"path", "content"}, {"path", "content"}),
    "edit": (
        Kind.EDIT,
        {"path", "old_string", "new_string", "replace_all"},
        {"path", "old_string", "new_string"},
    ),
    "glob": (Kind.SEARCH, {"pattern", "path"}, {"pattern"}),
    "grep": (Kind.SEARCH, {"pattern", "path", "glob"}, {"pattern"}),
    "ls": (Kind.READ, {"path"}, set()),
    "shell": (Kind.EXECUTE, {"command", "timeout"}, {"command"}),
    "web_fetch": (Kind.FETCH, {"url"}, {"url"}),
}


def test_default_tools_come_in_model_order() -> None:
    assert [tool.name for tool in default_tools()] == list(EXPECTED)


def test_tools_by_name_indexes_every_tool() -> None:
    tools = default_tools()
    index = tools_by_name(tools)
    assert list(index) == list(EXPECTED)
    assert all(index[tool.name] is tool for tool in tools)


@pytest.mark.parametrize("tool", default_tools(), ids=lambda tool: tool.name)
def test_every_tool_schema_is_an_object_with_the_exact_argument_names(tool) -> None:
    kind, properties, required = EXPECTED[tool.name]
    spec = tool_spec(tool)
    schema = spec.parameters
    assert tool.kind is kind
    assert schema["type"] == "object"
    assert set(schema["properties"]) == properties
    assert set(schema.get("required", [])) == required
    assert schema.get("additionalProperties") is False
    assert all(prop.get("description") for prop in schema["properties"].values())
    assert spec.description == tool.description and len(tool.description) > 40


@pytest.mark.parametrize("tool", default_tools(), ids=lambda tool: tool.name)
def test_every_tool_rejects_unknown_arguments(tool) -> None:
    valid = {name: "x" for name in EXPECTED[tool.name][2]}
    with pytest.raises(ValidationError):
        tool.Args.model_validate({**valid, "surprise": 1})


def test_only_read_search_and_fetch_tools_are_concurrency_safe() -> None:
    safe = {tool.name for tool in default_tools() if tool.kind in CONCURRENCY_SAFE_KINDS}
    assert safe == {"read_file", "glob", "grep", "ls", "web_fetch"}
