"""Plugin discovery (pluggy, project name `qshell`), for `qshell plugins`.

Plugins come from the `qshell` entry-point group. `QSHELL_LOAD_PLUGINS` restricts loading:
unset loads all, an empty value loads none, and a comma-separated list loads only those
names. The manager is built by a factory, never kept in a module global, so tests and
sessions each get their own. No hook is declared yet: the gate and event hooks arrive with
gate plugins (Roadmap 10), together with the places that call them; until then a loaded
plugin is listed with whatever hooks it implements, and nothing calls them. Main thread.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import pluggy

PROJECT = "qshell"


@dataclass(frozen=True, slots=True)
class PluginInfo:
    name: str
    hooks: list[str]
    version: str | None


def make_plugin_manager(environ: Mapping[str, str]) -> pluggy.PluginManager:
    """A plugin manager with the allowed entry points loaded."""
    manager = pluggy.PluginManager(PROJECT)
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
