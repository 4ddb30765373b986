"""The import arrows point one way: ui → agent → llm, tools; leaves import nothing above.

Walks every module's imports with ast, like httpx's export test keeps `__all__` honest.
"""

from __future__ import annotations

import ast
from pathlib import Path

import qshell

PACKAGE = Path(qshell.__file__).parent
# a module under the key may not import anything under these prefixes
FORBIDDEN = {
    "qshell.llm": ("qshell.agent", "qshell.tools", "qshell.ui", "qshell.cli", "qshell.compose"),
    "qshell.tools": (
        "qshell.agent",
        "qshell.ui",
        "qshell.cli",
        "qshell.compose",
        "qshell.llm.openai",
        "qshell.llm.anthropic",
        "qshell.llm.http",
    ),
    "qshell.agent": ("qshell.ui", "qshell.cli", "qshell.compose"),
    "qshell.errors": ("qshell.",),
    "qshell.cancel": ("qshell.llm", "qshell.agent", "qshell.tools", "qshell.ui"),
    "qshell.config": ("qshell.llm", "qshell.agent", "qshell.tools", "qshell.ui"),
}
# front-ends render events; they never reach a provider or a tool implementation
UI_FORBIDDEN = ("qshell.llm.openai", "qshell.llm.anthropic", "qshell.llm.http", "qshell.tools.")


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
    return {name for name in found if name.startswith("qshell")}


def test_imports_point_one_way():
    problems = []
    for path in PACKAGE.rglob("*.py"):
        name = module_name(path)
        for prefix, banned in FORBIDDEN.items():
            if name == prefix or name.startswith(prefix + "."):
                for imported in imports_of(path):
                    if imported.startswith(banned) and not imported.startswith(prefix):
                        problems.append(f"{name} imports {imported}")
        if name.startswith("qshell.ui"):
            problems += [
                f"{name} imports {i}" for i in imports_of(path) if i.startswith(UI_FORBIDDEN)
            ]
    assert problems == []


def test_version_needs_no_heavy_imports():
    import subprocess
    import sys

    code = "import sys, qshell.cli; print(sorted(m for m in ('httpx', 'pydantic', 'rich', 'prompt_toolkit') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
