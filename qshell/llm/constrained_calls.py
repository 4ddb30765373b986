"""Tool calls a small model can make: grammar-constrained JSON instead of its own call syntax.

A model of half a billion parameters, offered tools through its chat template, answers in
prose when it should, but when it means to call a tool it often writes the call as bare
JSON (or in a ```json fence) rather than in the template's `<tool_call>` tags, and it
fills arguments from the schema's descriptions ("path relative to the project root").
llama.cpp can hold a generation to a JSON schema, so qshell lets the model start freely
and, once its first characters show it is writing a call (`looks_like_call`), asks again
with the reply constrained to `call_schema`: one object naming an offered tool, with
arguments that match that tool's schema (its enums pin paths to real files, see
latency/tool_offer.py). `parse_call` turns that reply into a ToolCall. Pure functions;
safe from any thread.
"""

from __future__ import annotations

import json
import re
import secrets
from collections.abc import Collection, Sequence
from typing import Any

from qshell.llm.messages import ToolCall, ToolSpec

TAG = "<tool_call"
FENCE = "```"
# a call written as JSON opens with one of these keys (`{"name": "shell", ...}`); any other
# object (`{"a": 1} is valid JSON`, an example package.json) is prose
CALL_KEYS = ('"name"', '"function"', '"tool"')
DECIDE_CHARS = 60  # undecided this far in, it is prose
CALLED = re.compile(r'"(?:name|tool)"\s*:\s*"([^"\\]*)(")?')


def looks_like_call(text: str, names: Collection[str]) -> bool | None:
    """Whether an answer that starts with `text` is a call of one of the tools `names`
    written as text (the template's `<tool_call>` tag, or a JSON object whose `name` or
    `tool` is one of them, bare or in a ```json fence): True, False, or None while its
    first characters cannot tell yet. A package.json opening `{"name": "shop"` is prose."""
    head = text.lstrip()
    if not head:
        return None
    if head.startswith(TAG):
        return True
    verdict = _decided(head[:DECIDE_CHARS], names)
    if verdict is None and len(head) > DECIDE_CHARS:
        return False
    return verdict


def _decided(head: str, names: Collection[str]) -> bool | None:
    if TAG.startswith(head) or FENCE.startswith(head):
        return None
    if head.startswith(FENCE):
        rest = head[len(FENCE) :]
        tag, newline, body = rest.partition("\n")
        if not newline:  # the fence's language tag is still coming
            return None if "json".startswith(tag.strip()) or tag.strip().startswith("{") else False
        if tag.strip() not in ("", "json"):
            return False
        return _call_object(body, names)
    return _call_object(head, names)


def _call_object(text: str, names: Collection[str]) -> bool | None:
    """Whether `text` opens a JSON object whose first key names a call of `names`."""
    text = text.lstrip()
    if not text:
        return None
    if not text.startswith("{"):
        return False
    after = text[1:].lstrip()
    if not after:
        return None
    if not any(after.startswith(key) for key in CALL_KEYS):
        return None if any(key.startswith(after) for key in CALL_KEYS) else False
    named = CALLED.search(text)
    if named is None:
        return None  # the name is still coming (or sits in a `function` object)
    value, closed = named.group(1), bool(named.group(2))
    if closed:
        return value in names
    return None if any(name.startswith(value) for name in names) else False


def call_schema(tools: Sequence[ToolSpec]) -> dict[str, Any]:
    """The JSON schema of one call to one of `tools`: `{"name": ..., "arguments": {...}}`."""
    choices = [
        {
            "type": "object",
            "properties": {"name": {"const": tool.name}, "arguments": _closed(tool.parameters)},
            "required": ["name", "arguments"],
            "additionalProperties": False,
        }
        for tool in tools
    ]
    return choices[0] if len(choices) == 1 else {"anyOf": choices}


def _closed(parameters: dict[str, Any]) -> dict[str, Any]:
    """A tool's parameters with every listed property required and no others: a small
    model leaves out what it may and invents what it can."""
    properties = parameters.get("properties")
    if not isinstance(properties, dict):
        return {"type": "object"}
    return {
        "type": "object",
        "properties": properties,
        "required": list(properties),
        "additionalProperties": False,
    }


def calls_prompt(tools: Sequence[ToolSpec]) -> str:
    """What the constrained round adds to the system prompt: the tools, one line each."""
    lines = [
        "Call one tool now. Reply with one JSON object: "
        '{"name": <tool name>, "arguments": {...}}. The tools:'
    ]
    for tool in tools:
        arguments = ", ".join(sorted(tool.parameters.get("properties") or {}))
        lines.append(f"- {tool.name}({arguments}): {tool.description}")
    return "\n".join(lines)


def parse_call(text: str, tools: Sequence[ToolSpec]) -> ToolCall | None:
    """The call a constrained reply holds, or None when it names no offered tool or its
    arguments are not an object."""
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return None
    if not isinstance(value, dict):
        return None
    name, arguments = value.get("name"), value.get("arguments")
    if name not in {tool.name for tool in tools} or not isinstance(arguments, dict):
        return None
    return ToolCall(
        id=f"call_{secrets.token_hex(6)}", name=str(name), arguments=json.dumps(arguments)
    )
