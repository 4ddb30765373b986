"""Prompts are files: qshell/prompts/*.md, loaded through importlib.resources, bytes pinned.

The system prompt and the compaction, suggestion and prediction requests set the
provider's prompt-cache prefix, so their bytes are pinned here; and no long text stays
inside code, where it would hide among the logic (an ast walk of every module).
"""

from __future__ import annotations

import ast
import hashlib
from importlib import resources
from pathlib import Path

import pytest

from qshell import prompts
from qshell.agent import compaction, prediction
from qshell.agent import prompt as system
from qshell.followup import suggestion
from qshell.tools.edit import EditTool
from tests.imports import PACKAGE, modules

PROMPTS = PACKAGE / "prompts"
# The sha256 of each prompt file. Update a digest deliberately, in the change that edits the
# prompt: the text is the start of every request, so changing a byte moves the prompt-cache
# prefix (every cached conversation is read again at full price once).
DIGESTS = {
    "compaction": "a0dcb40e3b7b5ea0bd685e9d8c5851741cf39605fc8e9c9128793f0cd994a717",
    "prediction": "69b1d0e65fcffa47ed82971c0a1b49c2f3890ca5155d8672cccf3c79e6a59b63",
    "suggestion": "300d6266ccda0a963bffacafeb9c681906ac40b12259cf7cedb755b3862762c6",
    "system": "85dcc6828996051b594ef4577f4ee0402d79e5bb43ad9e4a58958aee961d6f08",
    "system_compact": "2f10c700d1aabbb98900cf9e62493ee33ca6698eeb99891dec8f0ecc73c09a40",
    "system_concise": "27da6353a21cb66424e93baed53ed31bd3220385103bb9f76b61e69853445b1d",
    "tool_edit": "ef8d0e4de6f8fae8888fec00120aabb2eecad8398f54cd7f3cc198f82d94d3fe",
}
MAX_LITERAL_CHARS = 500
# long literals that are data, not text for a reader or a model: (module, how it starts)
DATA_LITERALS = {("shellproof/rules/plain.py", "line-number no-line-number")}  # rg's options


def test_every_prompt_file_has_its_pinned_bytes():
    found = {p.stem: hashlib.sha256(p.read_bytes()).hexdigest() for p in PROMPTS.glob("*.md")}
    assert found == DIGESTS


def test_the_prompts_load_from_the_package_as_resources():
    assert Path(str(resources.files("qshell.prompts"))) == PROMPTS
    for name in DIGESTS:
        assert prompts.load(name) + "\n" == (PROMPTS / f"{name}.md").read_text(encoding="utf-8")


def test_the_prompt_constants_are_the_files():
    constants = {
        "system": system.BASE_PROMPT,
        "system_concise": system.CONCISE_PROMPT,
        "system_compact": system.COMPACT_PROMPT,
        "compaction": compaction.SUMMARY_REQUEST,
        "tool_edit": EditTool.description,
    }
    assert {name: prompts.load(name) for name in constants} == constants
    for filled in (prediction.PREDICTION_PROMPT, suggestion.SUGGESTION_PROMPT):
        assert "$" not in filled and "<next-prompt>" in filled
    assert suggestion.SUGGESTION_PROMPT.startswith(suggestion.SUGGESTION_MARKER + "\n")


def test_a_template_with_a_value_missing_is_an_error():
    with pytest.raises(KeyError):
        prompts.fill("prediction", OPEN="<next-prompt>")


def literal_chars(node: ast.AST) -> int:
    """How many characters a literal holds (an f-string: its constant parts); 0 otherwise."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str | bytes):
        return len(node.value)
    if isinstance(node, ast.JoinedStr):
        return sum(literal_chars(part) for part in node.values if isinstance(part, ast.Constant))
    return 0


def long_literals(path: Path) -> list[str]:
    """The long literals in `path`'s code. A string standing alone as a statement is a
    docstring (of a module, class, function or constant): it documents, it is never sent."""
    tree = ast.parse(path.read_text())
    inside: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            inside.update(id(part) for part in node.values)
        elif isinstance(node, ast.Expr):
            inside.add(id(node.value))
    found = []
    for node in ast.walk(tree):
        if id(node) not in inside and literal_chars(node) > MAX_LITERAL_CHARS:
            start = node.value if isinstance(node, ast.Constant) else ""
            where = str(path.relative_to(PACKAGE))
            if not any(where == m and str(start).startswith(s) for m, s in DATA_LITERALS):
                found.append(f"{where}:{getattr(node, 'lineno', 0)}")
    return found


def test_no_literal_over_500_characters_stays_in_code():
    assert [hit for path in modules().values() for hit in long_literals(path)] == []


def test_the_literal_count_reads_implicit_concatenation_and_f_strings_whole():
    joined = ast.parse('x = ("a" * 0, "' + "a" * 300 + '" "' + "b" * 300 + '")').body[0]
    f_string = ast.parse('y = f"' + "c" * 400 + "{x}" + "d" * 200 + '"').body[0]
    assert max(literal_chars(n) for n in ast.walk(joined)) == 600
    assert max(literal_chars(n) for n in ast.walk(f_string)) == 600
