"""What each qshell module imports, read with ast: the data the layer and shape tests judge.

Every import counts — at the top, inside functions and under `TYPE_CHECKING` — and relative
imports are resolved against the module's package. `from qshell.permissions import
policy` counts as importing `qshell.permissions` and `qshell.permissions.policy`; a name
imported from a module counts as `module.name` too, so a prefix rule on a module also
catches a name taken from it.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import qshell

PACKAGE = Path(qshell.__file__).parent


@dataclass(frozen=True)
class Imported:
    """One name one module imports: `module` is where from, `name` what (None: the module
    itself), `local` the name it is bound to in the importing module (None: not bound)."""

    module: str
    name: str | None
    local: str | None = None

    @property
    def target(self) -> str:
        return f"{self.module}.{self.name}" if self.name else self.module


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _base(path: Path, level: int) -> str:
    """The package a relative import of `level` dots starts from."""
    package = module_name(path) if path.name == "__init__.py" else module_name(path.parent)
    parts = package.split(".")
    return ".".join(parts[: len(parts) - (level - 1)])


def imports(path: Path, tree: ast.AST | None = None) -> Iterator[Imported]:
    """Every qshell module or name the module at `path` imports."""
    for node in ast.walk(tree or ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("qshell"):
                    yield Imported(alias.name, None, alias.asname)
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level:
                module = ".".join(filter(None, (_base(path, node.level), module)))
            if not module.startswith("qshell"):
                continue
            yield Imported(module, None)
            for alias in node.names:
                yield Imported(module, alias.name, alias.asname or alias.name)


def is_module(name: str) -> bool:
    """Whether `name` (a dotted qshell name) is a module or package of the tree."""
    relative = Path(*name.split(".")[1:])
    return (PACKAGE / relative).with_suffix(".py").is_file() or (PACKAGE / relative).is_dir()
