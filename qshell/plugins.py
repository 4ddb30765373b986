"""Plugin hook specifications and discovery (pluggy, project name `qshell`).

Plugins come from the `qshell` entry-point group and are listed by `qshell plugins`.
`QSHELL_LOAD_PLUGINS` restricts loading: unset loads all, an empty value loads none,
and a comma-separated list loads only those names. The manager is built by a factory,
never kept in a module global, so tests and sessions each get their own. Hooks that the
speculation gate and the event observers will call are declared here; a plugin that
raises is reported, never allowed to crash qshell.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pluggy

PROJECT = "qshell"
hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


class HookSpecs:
    """The plugin contract."""

    @hookspec(firstresult=True)
    def qshell_tool_gate(self, tool_name: str, kind: str, args: Mapping[str, Any]) -> Any:
        """Decide a speculative tool call: return a gate decision, or None to abstain."""

    @hookspec
    def qshell_event(self, event: Any) -> None:
        """Observe one loop event (read-only)."""


@dataclass(frozen=True, slots=True)
class PluginInfo:
    name: str
    hooks: list[str]
    version: str | None


def make_plugin_manager(environ: Mapping[str, str]) -> pluggy.PluginManager:
    """A plugin manager with the specs registered and the allowed entry points loaded."""
    manager = pluggy.PluginManager(PROJECT)
    manager.add_hookspecs(HookSpecs)
    selection = environ.get("QSHELL_LOAD_PLUGINS")
    if selection is None:
        manager.load_setuptools_entrypoints(PROJECT)
    elif selection.strip():
        wanted = {name.strip() for name in selection.split(",") if name.strip()}
        for name in sorted(wanted):
            manager.load_setuptools_entrypoints(PROJECT, name=name)
    return manager


def describe(manager: pluggy.PluginManager) -> list[PluginInfo]:
    versions = {plugin: dist.version for plugin, dist in manager.list_plugin_distinfo()}
    infos = []
    for name, plugin in manager.list_name_plugin():
        if plugin is None:
            continue
        hooks = sorted(h.name for h in manager.get_hookcallers(plugin) or [])
        infos.append(PluginInfo(name=name, hooks=hooks, version=versions.get(plugin)))
    return infos
