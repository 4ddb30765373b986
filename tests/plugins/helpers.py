"""Plugins for tests: the example plugins' folder, the README's example plugin, one-hook
plugin files, in-memory plugins and their host, and an "installed" example package whose
entry point a subprocess finds offline.

`entry_point_env` installs the `qshell-todos` example the way pip would as far as
`importlib.metadata` can tell: a `.dist-info` directory (its METADATA and an
`entry_points.txt` written from the example's own `pyproject.toml`) on a folder put on
PYTHONPATH beside the package's source. No network, no build, no pip.
"""

from __future__ import annotations

import os
import textwrap
import tomllib
from collections.abc import Callable
from pathlib import Path

from qshell.plugins import (
    Found,
    GateCall,
    GateContext,
    PluginHost,
    Setup,
    Source,
    hookimpl,
)
from qshell.plugins.loader import load_plugins
from qshell.telemetry import Telemetry

EXAMPLES = Path(__file__).resolve().parents[2] / "plugins"
PACKAGE = EXAMPLES / "qshell-todos"
README = Path(__file__).resolve().parents[2] / "README.md"


def readme_plugin(path: Path) -> Path:
    """The README's example gate plugin (`no_prod`, under "Writing a gate plugin"), saved
    as `path` exactly as written there."""
    section = README.read_text().split("## Writing a gate plugin", 1)[1]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(section.split("```python\n", 1)[1].split("```", 1)[0])
    return path


def write_plugin(path: Path, signature: str, *body: str) -> Path:
    """A plugin file with one hook implementation: `def <signature>:` and `body`."""
    lines = "\n".join(f"    {line}" for line in body)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        "from qshell.plugins import GateDecision, hookimpl\n\n\n"
        f"@hookimpl\ndef {signature}:\n{lines}\n"
    )
    return path


def install_example(site: Path) -> Path:
    """The example package's dist-info in `site` (created); returns `site`."""
    project = tomllib.loads((PACKAGE / "pyproject.toml").read_text())["project"]
    name, version = project["name"], project["version"]
    info = site / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    points = project["entry-points"]["qshell"]
    entries = "\n".join(f"{key} = {value}" for key, value in points.items())
    (info / "entry_points.txt").write_text(textwrap.dedent(f"[qshell]\n{entries}\n"))
    return site


def entry_point_env(directory: Path, select: str = "todos") -> dict[str, str]:
    """Environment for `run_qshell` in which the example package is installed and
    QSHELL_PLUGINS selects `select` (the tests' conftest selects none)."""
    site = install_example(directory / "site-packages")
    paths = [str(site), str(PACKAGE), os.environ.get("PYTHONPATH", "")]
    return {"PYTHONPATH": os.pathsep.join(p for p in paths if p), "QSHELL_PLUGINS": select}


class Gate:
    """An in-memory gate plugin: answers every call with `answer` (or raises `raises`),
    keeping what it was shown."""

    def __init__(self, answer: object = None, *, raises: BaseException | None = None) -> None:
        self.answer = answer
        self.raises = raises
        self.seen: list[tuple[GateCall, GateContext]] = []

    @hookimpl
    def qshell_tool_gate(self, call: GateCall, context: GateContext) -> object:
        self.seen.append((call, context))
        if self.raises is not None:
            raise self.raises
        return self.answer


def _loader(plugin: object) -> Callable[[], object]:
    return lambda: plugin


def host_of(*plugins: tuple[str, object], telemetry: Telemetry | None = None) -> PluginHost:
    """A host of in-memory plugins, `(name, plugin)` in consultation order."""
    found = [
        Found(name, Source.FILE, f"<{name}>", None, _loader(plugin)) for name, plugin in plugins
    ]
    setup = Setup(options={}, project_root=Path("/"), state_dir=Path("/"))
    return load_plugins(found, setup, telemetry=telemetry)
