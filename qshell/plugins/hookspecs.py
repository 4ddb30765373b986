"""The plugin contract: every hook a qshell plugin may implement, one function each.

A plugin is a module (or any object) with functions marked `@hookimpl` and named after
these specs; it implements any subset, and a hook implementation may take any subset of
a spec's arguments. Each hook is called from one place in qshell: `qshell_configure` and
`qshell_register_tools` by the loader (plugins/loader.py), `qshell_tool_gate` by the one
gate consultation (permissions/plugin_gate.py), `qshell_shell_readonly` by the shell proof's
per-command rule (through `plugin_gate.prove`), `qshell_event` by agent/plugin_events.py and
the telemetry observer, `qshell_filter_suggestion` by the suggestion screen
(followup/suggestion.py) and `qshell_consequential_words` by followup/followup.py. Specs
only: nothing here runs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pluggy

from qshell.plugins.values import (
    GateCall,
    GateContext,
    GateDecision,
    PluginConfig,
    SuggestionCheck,
)

PROJECT = "qshell"
hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


@hookspec
def qshell_configure(config: PluginConfig) -> None:
    """Called once after loading, with this plugin's options; raising skips the plugin."""


@hookspec(firstresult=True)
def qshell_tool_gate(call: GateCall, context: GateContext) -> GateDecision | None:
    """Decide a tool call (allow, ask, deny, boundary) or return None to pass; the first
    answer wins, and qshell's fixed limits apply to it afterwards."""


@hookspec
def qshell_shell_readonly(command: str, argv: Sequence[str]) -> bool | None:
    """True declares one simple command (`command` its name, `argv` its words, the name
    first) read-only where qshell's own rules do not; structure and scope still apply."""


@hookspec
def qshell_register_tools(register: Callable[[Any], None]) -> None:
    """Add tools by calling `register(tool)` (name, kind, description, Args, run)."""


@hookspec
def qshell_event(event: object) -> None:
    """Observe one loop event (agent/events.py) or TelemetryEvent; read-only: never resolve
    the future of a question it carries."""


@hookspec
def qshell_filter_suggestion(text: str, context: SuggestionCheck) -> str | bool | None:
    """Reject a next-prompt suggestion by returning a reason (or True); None keeps it."""


@hookspec
def qshell_consequential_words() -> Sequence[str] | None:
    """Consequence rules to add to `suggestions.consequential`, each `kind: phrase, …` or
    one phrase: a suggestion matching one is hidden until the user asked for that kind,
    then shown with a marker and speculated through reads only."""
