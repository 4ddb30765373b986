"""Gate plugins (pluggy, project name `qshell`): the contract, discovery and the host.

A plugin tunes what the main loop and speculation may do without forking qshell: decide
tool calls (`qshell_tool_gate`), declare more shell commands read-only
(`qshell_shell_readonly`), add tools (`qshell_register_tools`), observe events
(`qshell_event`), reject suggestions (`qshell_filter_suggestion`), and read its options
(`qshell_configure`); hookspecs.py is the whole contract, values.py what the hooks see.
Plugins come from `--plugin FILE`, the user plugins folder and the `qshell` entry-point
group (discovery.py), load through loader.py and are called only through the PluginHost
(host.py) that `open_host` builds — one per run, passed down, never a module global
(`NO_PLUGINS` is the empty host that tests and bare tool contexts get). A leaf: it
imports only `dirs`, `errors` and `telemetry` of qshell. Main thread to load; the host is
thread-safe.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from qshell.dirs import Dirs
from qshell.plugins.discovery import SELECT_ENV, USER_FOLDER, Found, PluginRequest, Source, find
from qshell.plugins.hookspecs import PROJECT, hookimpl, hookspec
from qshell.plugins.host import (
    PLUGIN_FAILURES,
    PluginAnswer,
    PluginHost,
    PluginInfo,
    Registered,
    failure_text,
)
from qshell.plugins.loader import Setup, load_plugins
from qshell.plugins.values import (
    GateCall,
    GateContext,
    GateDecision,
    PluginConfig,
    SuggestionCheck,
    TelemetryEvent,
    Verdict,
)
from qshell.telemetry import Telemetry

__all__ = [
    "NO_PLUGINS",
    "PLUGIN_FAILURES",
    "PROJECT",
    "SELECT_ENV",
    "USER_FOLDER",
    "Found",
    "GateCall",
    "GateContext",
    "GateDecision",
    "PluginAnswer",
    "PluginConfig",
    "PluginHost",
    "PluginInfo",
    "PluginRequest",
    "Registered",
    "Setup",
    "Source",
    "SuggestionCheck",
    "TelemetryEvent",
    "Verdict",
    "failure_text",
    "hookimpl",
    "hookspec",
    "open_host",
]

NO_PLUGINS = PluginHost.empty()


def open_host(
    request: PluginRequest,
    *,
    environ: Mapping[str, str],
    cwd: Path,
    options: Mapping[str, Mapping[str, object]],
    telemetry: Telemetry | None = None,
) -> PluginHost:
    """The plugins of one run in `cwd` (the project root): found, loaded, configured.
    A file named in `request` that does not exist raises InputError."""
    dirs = Dirs.from_environ(environ)
    found = find(request, environ=environ, config_dir=dirs.config, cwd=cwd)
    setup = Setup(options=options, project_root=cwd, state_dir=dirs.state)
    return load_plugins(found, setup, telemetry=telemetry)
