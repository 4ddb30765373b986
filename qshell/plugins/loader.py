"""Loading plugins: import what discovery found, register it, configure it, collect its tools.

`load_plugins` turns the found plugins (plugins/discovery.py, in consultation order) into
a PluginHost. A plugin that fails — its import raises, its name is taken by a plugin
consulted before it, it implements a hook qshell does not know, its `qshell_configure`
or `qshell_register_tools` raises — is skipped and said once as a start-up note (one line);
the others load, and the run goes on. Registration is in reverse consultation order,
since pluggy calls the newest implementation first. Main thread, at start-up.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pluggy

from qshell.plugins.discovery import Found
from qshell.plugins.host import (
    PLUGIN_FAILURES,
    PluginHost,
    PluginInfo,
    Registered,
    arguments,
    failure_text,
    new_manager,
)
from qshell.plugins.values import PluginConfig
from qshell.telemetry import Telemetry


@dataclass(frozen=True, slots=True)
class Setup:
    """What plugins are configured with: their options by name, the project root, and the
    state directory they may keep files in."""

    options: Mapping[str, Mapping[str, Any]]
    project_root: Path
    state_dir: Path


class _Loading:
    """One load: the manager being filled, what loaded, what was skipped and why."""

    def __init__(self, found: Sequence[Found]) -> None:
        self.manager = new_manager()
        self.order = list(found)
        self.modules: dict[str, tuple[Found, object]] = {}  # registered, by name
        self.skipped: list[tuple[Found, str]] = []

    @property
    def notes(self) -> list[str]:
        """One line per skipped plugin, in consultation order."""
        skipped = sorted(self.skipped, key=lambda pair: self.order.index(pair[0]))
        return [f"plugin {f.name} ({_where(f)}) {why}; skipped" for f, why in skipped]

    def skip(self, found: Found, why: str) -> None:
        self.skipped.append((found, why))

    def register(self) -> None:
        imported: list[tuple[Found, object]] = []
        names: dict[str, Found] = {}
        for plugin in self.order:
            if plugin.name in names:
                self.skip(plugin, f"has the name of the plugin from {_where(names[plugin.name])}")
                continue
            try:
                module = plugin.load()
            except PLUGIN_FAILURES as exc:
                self.skip(plugin, f"failed to load: {failure_text(exc)}")
                continue
            names[plugin.name] = plugin
            imported.append((plugin, module))
        for plugin, module in reversed(imported):  # pluggy calls the newest first
            try:
                self.manager.register(module, name=plugin.name)
            except (ValueError, pluggy.PluginValidationError) as exc:
                self.skip(plugin, f"failed to load: {failure_text(exc)}")
                continue
            unknown = _unknown_hooks(self.manager, module)
            if unknown:
                self.manager.unregister(module)
                self.skip(plugin, f"implements unknown hooks: {', '.join(unknown)}")
                continue
            self.modules[plugin.name] = (plugin, module)

    def loaded(self) -> list[tuple[Found, object]]:
        """What is registered, in consultation order."""
        return [
            self.modules[f.name]
            for f in self.order
            if self.modules.get(f.name, (f,))[0] is f and f.name in self.modules
        ]

    def drop(self, plugin: Found, module: object, why: str) -> None:
        self.manager.unregister(module)
        del self.modules[plugin.name]
        self.skip(plugin, why)

    def configure(self, setup: Setup) -> None:
        for plugin, module in self.loaded():
            impl = _own_impl(self.manager, "qshell_configure", module)
            if impl is None:
                continue
            config = PluginConfig(
                name=plugin.name,
                options=dict(setup.options.get(plugin.name) or {}),
                project_root=setup.project_root,
                state_dir=setup.state_dir,
            )
            try:
                impl.function(**arguments(impl, config=config))
            except PLUGIN_FAILURES as exc:
                self.drop(plugin, module, f"failed to configure: {failure_text(exc)}")

    def tools(self) -> list[Registered]:
        found: list[Registered] = []
        for plugin, module in self.loaded():
            impl = _own_impl(self.manager, "qshell_register_tools", module)
            if impl is None:
                continue
            mine = _Collector(plugin.name)
            try:
                impl.function(**arguments(impl, register=mine))
            except PLUGIN_FAILURES as exc:
                self.drop(plugin, module, f"failed to register its tools: {failure_text(exc)}")
                continue
            found += mine.tools
        return found

    def describe(self) -> list[PluginInfo]:
        infos = [
            (self.order.index(plugin), _info(plugin, hooks=_hooks(self.manager, module)))
            for plugin, module in self.loaded()
        ]
        infos += [(self.order.index(f), _info(f, error=why)) for f, why in self.skipped]
        return [info for _, info in sorted(infos, key=lambda pair: pair[0])]


class _Collector:
    """The `register` callback of one plugin's `qshell_register_tools`."""

    def __init__(self, plugin: str) -> None:
        self.plugin = plugin
        self.tools: list[Registered] = []

    def __call__(self, tool: object) -> None:
        self.tools.append(Registered(self.plugin, tool))


def load_plugins(
    found: Sequence[Found], setup: Setup, *, telemetry: Telemetry | None = None
) -> PluginHost:
    """Import, register and configure `found`; the host of what loaded."""
    loading = _Loading(found)
    loading.register()
    loading.configure(setup)
    tools = loading.tools()
    return PluginHost(
        loading.manager,
        loading.describe(),
        notes=loading.notes,
        tools=tools,
        telemetry=telemetry,
    )


def _where(found: Found) -> str:
    return f"{found.source} {found.location}"


def _info(found: Found, *, hooks: list[str] | None = None, error: str | None = None) -> PluginInfo:
    return PluginInfo(
        name=found.name,
        source=str(found.source),
        location=found.location,
        version=found.version,
        hooks=hooks or [],
        error=error,
    )


def _hooks(manager: pluggy.PluginManager, plugin: object) -> list[str]:
    return sorted(caller.name for caller in manager.get_hookcallers(plugin) or [])


def _unknown_hooks(manager: pluggy.PluginManager, plugin: object) -> list[str]:
    callers = manager.get_hookcallers(plugin) or []
    return sorted(caller.name for caller in callers if caller.spec is None)


def _own_impl(manager: pluggy.PluginManager, hook: str, plugin: object) -> Any:
    """`plugin`'s implementation of `hook`, or None."""
    caller = getattr(manager.hook, hook)
    return next((impl for impl in caller.get_hookimpls() if impl.plugin is plugin), None)
