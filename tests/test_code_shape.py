"""The shape the style guide asks for: small modules, short functions, public seams.

No module of qshell/ passes 500 lines and no function 80 (split along a real seam before
that); no module imports another's `_private` name (what another module needs is public).
"""

from __future__ import annotations

import ast

from tests.imports import PACKAGE, imports, is_module, modules

MAX_MODULE_LINES = 500
MAX_FUNCTION_LINES = 80


def test_no_module_is_over_500_lines():
    long = {
        str(p.relative_to(PACKAGE)): n
        for p in modules().values()
        if (n := len(p.read_text().splitlines())) > MAX_MODULE_LINES
    }
    assert long == {}


def test_no_function_is_over_80_lines():
    long = []
    for path in modules().values():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                if lines > MAX_FUNCTION_LINES:
                    long.append(f"{path.relative_to(PACKAGE)}:{node.name} ({lines} lines)")
    assert long == []


def private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def test_no_module_uses_a_private_name_of_another():
    """Neither `from m import _name` (relative imports too) nor `m._name` where `m` is a
    module of qshell bound by an import."""
    found = []
    for name, path in modules().items():
        tree = ast.parse(path.read_text())
        imported = list(imports(path, tree))
        found += [
            f"{name}: {i.target}"
            for i in imported
            if i.name and private(i.name) and i.module != name
        ]
        bound = {i.local: i.target for i in imported if i.local and is_module(i.target)}
        found += [
            f"{name}: {bound[node.value.id]}.{node.attr}"
            for node in ast.walk(tree)
            if isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in bound
            and bound[node.value.id] != name
            and private(node.attr)
        ]
    assert found == []
