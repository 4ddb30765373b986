"""A small model's tool calls: telling a call written as text from prose by its first
characters, the JSON schema its constrained reply is held to, and reading that reply."""

from __future__ import annotations

import json

import pytest

from qshell.llm.constrained_calls import call_schema, calls_prompt, looks_like_call, parse_call
from qshell.llm.messages import ToolSpec

READ = ToolSpec(
    name="read_file",
    description="Read a file.",
    parameters={
        "type": "object",
        "properties": {"path": {"type": "string", "enum": ["a.py"]}, "limit": {"type": "integer"}},
        "required": ["path"],
    },
)
LS = ToolSpec(name="ls", description="List the project.", parameters={"type": "object"})
NAMES = frozenset({"read_file", "ls", "shell"})


@pytest.mark.parametrize(
    "text",
    [
        '{"name": "read_file"',
        '  \n{"name": "ls"',
        '{ "function": {"name": "shell"',
        '{"tool": "ls"',
        "<tool_call",
        '<tool_call>\n{"name": "ls"}',
        '```json\n{"name": "ls"}',
        '```\n{"name": "read_file"}',
        '```json\n  {\n  "name": "ls"',
    ],
)
def test_an_answer_opening_like_a_call_is_a_call(text: str) -> None:
    assert looks_like_call(text, NAMES) is True


@pytest.mark.parametrize(
    "text",
    [
        "Hello",
        "The file says hello.",
        "Sure! ```json",
        "```python\nprint(1)",
        "```py\n",
        "```sh\nls",
        "<b>bold</b>",
        "- a list item",
        "``x",
        # JSON that is the answer, not a call: an example, a value the prompt asked for
        '{"a": 1} is valid JSON',
        '{"scripts": {"test": "pytest"}}',
        '```json\n{"scripts": {}}',
        "[1, 2, 3]",
        "{" + " " * 65,
    ],
)
def test_an_answer_opening_like_prose_json_or_other_code_is_not_a_call(text: str) -> None:
    assert looks_like_call(text, NAMES) is False


@pytest.mark.parametrize(
    "text",
    [
        "",
        "   ",
        "\n",
        "<",
        "<to",
        "<tool_ca",
        "`",
        "``",
        "```",
        "```js",
        "```json",
        "```\n",
        "{",
        '{"na',
        '```json\n{ "func',
        '{"name"',
        '```json\n  {\n  "name": ',
    ],
)
def test_an_opening_that_could_still_become_either_is_undecided(text: str) -> None:
    assert looks_like_call(text, NAMES) is None


def test_an_opening_still_undecided_after_forty_characters_is_prose() -> None:
    assert looks_like_call("```\n", NAMES) is None
    assert looks_like_call("```\n" + " " * 60 + "x", NAMES) is False


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"name": "read_file"', True),
        ('{"name": "re', None),  # may still become read_file
        ('{"name": "shop", "version": "1.0.0"}', False),  # a package.json
        ('{\n  "name": "Alice", "age": 30}', False),
        ('```json\n{\n  "name": "tsconfig"', False),
        ('```json\n{\n  "name": "ls"}', True),
        ('{"function": {"name": "shell"', True),
        ('{"tool": "ls"', True),
    ],
)
def test_a_json_answer_is_a_call_only_when_it_names_an_offered_tool(
    text: str, expected: bool | None
) -> None:
    assert looks_like_call(text, NAMES) is expected


def test_the_schema_of_one_tool_is_that_call_with_closed_arguments() -> None:
    schema = call_schema([READ])
    assert schema == {
        "type": "object",
        "properties": {
            "name": {"const": "read_file"},
            "arguments": {
                "type": "object",
                "properties": READ.parameters["properties"],
                "required": ["path", "limit"],  # every listed argument, not just the required
                "additionalProperties": False,
            },
        },
        "required": ["name", "arguments"],
        "additionalProperties": False,
    }


def test_the_schema_of_several_tools_is_any_one_of_their_calls() -> None:
    schema = call_schema([READ, LS])
    assert list(schema) == ["anyOf"]
    assert schema["anyOf"][0] == call_schema([READ])
    ls = schema["anyOf"][1]
    assert ls["properties"]["name"] == {"const": "ls"}
    assert ls["properties"]["arguments"] == {"type": "object"}  # no properties to close


def test_the_calls_prompt_lists_each_tool_with_its_arguments_and_description() -> None:
    prompt = calls_prompt([READ, LS])
    lines = prompt.splitlines()
    assert '{"name": <tool name>, "arguments": {...}}' in lines[0]
    assert lines[1:] == ["- read_file(limit, path): Read a file.", "- ls(): List the project."]


def test_a_reply_naming_an_offered_tool_is_its_call() -> None:
    call = parse_call(
        '{"name": "read_file", "arguments": {"path": "a.py", "limit": 3}}', [READ, LS]
    )
    assert call is not None
    assert call.name == "read_file"
    assert json.loads(call.arguments) == {"path": "a.py", "limit": 3}
    assert call.id.startswith("call_")
    again = parse_call('{"name": "ls", "arguments": {}}', [READ, LS])
    assert again is not None and again.name == "ls" and again.id != call.id


@pytest.mark.parametrize(
    "reply",
    [
        '{"name": "write_file", "arguments": {"path": "a.py"}}',  # not offered
        '{"name": "read_file", "arguments": "a.py"}',  # arguments not an object
        '{"name": "read_file"}',
        '[{"name": "ls", "arguments": {}}]',  # not an object
        '"ls"',
        "I will read a.py.",
        '{"name": "ls", "arguments": {',  # cut short
        "[" * 100_000,
        "",
    ],
)
def test_a_reply_that_is_no_call_of_an_offered_tool_is_none(reply: str) -> None:
    assert parse_call(reply, [READ, LS]) is None
