"""The shape the style guide asks for: small modules, short functions, public seams.

No module of qshell/ passes 500 lines and no function 80 (split along a real seam before
that); no module imports another's `_private` name (what another module needs is public).
"""

from __future__ import annotations

import ast
from pathlib import Path

import qshell

PACKAGE = Path(qshell.__file__).parent
MAX_MODULE_LINES = 500
MAX_FUNCTION_LINES = 80


def modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def test_no_module_is_over_500_lines():
    long = {
        str(p.relative_to(PACKAGE)): n
        for p in modules()
        if (n := len(p.read_text().splitlines())) > MAX_MODULE_LINES
    }
    assert long == {}


def test_no_function_is_over_80_lines():
    long = []
    for path in modules():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                if lines > MAX_FUNCTION_LINES:
                    long.append(f"{path.relative_to(PACKAGE)}:{node.name} ({lines} lines)")
    assert long == []


def test_no_module_imports_a_private_name_of_another():
    private = []
    for path in modules():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("qshell"):
                names = [a.name for a in node.names if a.name.startswith("_")]
                private += [f"{path.relative_to(PACKAGE)}: {node.module}.{n}" for n in names]
    assert [p for p in private if not p.endswith(".__version__")] == []
