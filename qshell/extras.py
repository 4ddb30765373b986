"""The pip command a fix-it hint names for an optional extra (`local`, `acp`), right for
how this copy of qshell was installed.

qshell's distribution is `qshell-agent` (`DISTRIBUTION`): the name `qshell` on PyPI belongs
to an unrelated project, so a hint saying `pip install 'qshell[local]'` would install a
stranger's package. The command stays `qshell`. `install_command(extra)` is
`pip install -e '<checkout>[extra]'` when qshell runs from a source checkout (the folder
above the package holds this project's pyproject.toml: a `pip install -e .` or a
PYTHONPATH), `.` for the checkout when it is the working directory, and otherwise
`pip install 'qshell-agent[extra]'`. A leaf: imports nothing of qshell. Pure functions;
any thread.
"""

from __future__ import annotations

import os
import shlex
from pathlib import Path

DISTRIBUTION = "qshell-agent"
_PROJECT_LINE = f'name = "{DISTRIBUTION}"'


def checkout(package_dir: Path | None = None) -> Path | None:
    """The source checkout this package runs from (the folder holding its pyproject.toml),
    or None for an installed copy (a wheel in site-packages)."""
    package = package_dir if package_dir is not None else Path(__file__).parent
    root = package.parent
    try:
        pyproject = (root / "pyproject.toml").read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    return root if _PROJECT_LINE in pyproject else None


def install_command(extra: str, *, package_dir: Path | None = None) -> str:
    """The one pip command that adds `extra` to this installation."""
    root = checkout(package_dir)
    if root is None:
        return f"pip install {shlex.quote(f'{DISTRIBUTION}[{extra}]')}"
    try:
        here = Path.cwd()
    except OSError:  # the working directory was removed
        here = None
    where = "." if here is not None and _same(here, root) else str(root)
    return f"pip install -e {shlex.quote(f'{where}[{extra}]')}"


def _same(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False
