"""One name, one meaning; one exception tree.

No class name of qshell/ is defined twice (public or private, nested classes included), so
a name found in a traceback or a grep means one thing; no two modules share a file name
beyond the per-package `__init__.py`, `base.py` and `errors.py`. Every exception class
joins a tree: a leaf package's own root (they may not import `qshell.errors`: see
tests/test_layers.py), else `QshellError` for an error or `ControlSignal` for a signal
that ends something on purpose. (A module that needs an extra's package, the ACP SDK, is
checked where that extra is installed: the test's `every_module` case, marker `acp`.)
"""

from __future__ import annotations

import ast
import importlib
import inspect
from collections import Counter, defaultdict
from collections.abc import Iterator

import pytest

from qshell.errors import ControlSignal, QshellError
from qshell.overlay import OverlayError
from qshell.sandbox import SandboxError
from qshell.shellproof import ShellproofError
from tests.acp.sdk import needs_sdk
from tests.imports import PACKAGE, modules

# a leaf package's exception root (leaves import nothing of qshell.errors)
LEAF_ROOTS: dict[str, type[BaseException]] = {
    "qshell.overlay": OverlayError,
    "qshell.sandbox": SandboxError,
    "qshell.shellproof": ShellproofError,
}
# what the modules that need an extra import at their top (the ACP server's SDK)
EXTRAS_PACKAGES = {"acp"}
# file names each package may have of its own, qualified by the package they are in
SHARED_FILE_NAMES = {"__init__.py", "base.py", "errors.py"}


def class_names(tree: ast.AST) -> Iterator[str]:
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            yield node.name


def test_no_class_name_is_defined_twice():
    where: defaultdict[str, set[str]] = defaultdict(set)
    counts: Counter[str] = Counter()
    for name, path in modules().items():
        for found in class_names(ast.parse(path.read_text())):
            counts[found] += 1
            where[found].add(name)
    twice = {n: where[n] for n, c in counts.items() if c > 1}
    assert twice == {}


def test_no_two_modules_share_a_file_name():
    names = Counter(path.name for path in PACKAGE.rglob("*.py"))
    assert sorted(n for n, c in names.items() if c > 1 and n not in SHARED_FILE_NAMES) == []


def exception_classes(*, every_module: bool = False) -> Iterator[type[BaseException]]:
    """Every exception class defined in qshell/, nested ones included, outside errors.py —
    of the modules that import without an extra not installed here, unless `every_module`
    (then each extra must be installed)."""
    for name in modules():
        if name.endswith("__main__"):
            continue  # running it is the console script
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if every_module or exc.name not in EXTRAS_PACKAGES:
                raise
            continue  # its extra's run checks it (the `every_module` test)
        todo = [v for v in vars(module).values() if inspect.isclass(v)]
        while todo:
            cls = todo.pop()
            if cls.__module__ != name:
                continue
            todo.extend(v for v in vars(cls).values() if inspect.isclass(v))
            if issubclass(cls, BaseException) and name != "qshell.errors":
                yield cls


def leaf_of(module: str) -> str | None:
    return next((leaf for leaf in LEAF_ROOTS if module.startswith(leaf)), None)


@pytest.mark.parametrize(
    "every_module", [False, pytest.param(True, marks=[pytest.mark.acp, needs_sdk])]
)
def test_every_exception_joins_the_tree_of_its_package(every_module):
    strays = []
    for cls in exception_classes(every_module=every_module):
        leaf = leaf_of(cls.__module__)
        roots = (LEAF_ROOTS[leaf],) if leaf else (QshellError, ControlSignal)
        if not issubclass(cls, roots):
            strays.append(f"{cls.__module__}.{cls.__qualname__}")
    assert strays == []


def test_every_overlay_exception_is_an_overlay_error():
    found = [cls for cls in exception_classes() if cls.__module__.startswith("qshell.overlay.")]
    assert len(found) >= 11  # the package's eleven: PathRefused, ApplyConflict, …
    assert [cls.__name__ for cls in found if not issubclass(cls, OverlayError)] == []


def test_the_sandbox_error_is_still_an_os_error_where_callers_catch_one():
    from qshell.sandbox import SandboxUnavailable

    assert issubclass(SandboxUnavailable, SandboxError)
    assert issubclass(SandboxUnavailable, OSError)
