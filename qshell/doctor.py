"""`qshell doctor`: one screen saying how qshell is set up here, for a user or a bug report.

It reports the version, the project root, which settings files are in force (and what of
the project's was not applied), the provider it would talk to (name, URL, model, whether a
key is set — never the key), the sandbox the commands it runs on its own would get and why
not, and where speculation overlays go. It changes nothing and sends nothing; a part that
cannot be worked out says why instead.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path

from qshell import __version__
from qshell.config import PROJECT_SETTINGS, USER_SETTINGS_NAME, Settings, assemble_settings
from qshell.dirs import Dirs
from qshell.errors import QshellError


def doctor_report(root: Path, environ: Mapping[str, str]) -> list[str]:
    """The lines of the report for a session in `root`."""
    from qshell.overlay import OverlayUnavailable
    from qshell.overlay.base_dir import choose_base
    from qshell.providers import provider_config
    from qshell.sessions import tool_context

    dirs = Dirs.from_environ(environ)
    lines = [f"qshell {__version__} · Python {sys.version.split()[0]}", f"project: {root}"]
    for label, path in (
        ("user settings", dirs.config / USER_SETTINGS_NAME),
        ("project settings", root / PROJECT_SETTINGS),
    ):
        lines.append(f"{label}: {path}" + ("" if path.is_file() else " (none)"))
    try:
        loaded = assemble_settings(project_root=root, environ=environ)
    except QshellError as exc:
        return [*lines, f"settings: {exc}"]
    settings = loaded.settings
    lines += [f"  {note}" for note in loaded.notes]
    provider_name = str(settings.provider)
    try:
        config = provider_config(settings, environ)
        provider_name = str(config.name)
        key = "set" if config.api_key else "not set"
        where = config.base_url or "(built in)"
        lines.append(f"provider: {config.name} at {where} · model {config.model} · key {key}")
    except QshellError as exc:
        lines.append(f"provider: none — {exc}")
    ctx = tool_context(settings, root=root, environ=environ)
    sandbox = f"sandbox: {ctx.sandbox_mode} (sandbox.enabled: {settings.sandbox.enabled})"
    lines.append(sandbox)
    lines.append(_background_line(settings, provider_name))
    if ctx.sandbox_missing or ctx.sandbox_note:
        lines.append(f"  {ctx.sandbox_missing or ctx.sandbox_note}")
    try:
        lines.append(f"speculation overlays: {choose_base(root.resolve(), environ=environ)}")
    except OverlayUnavailable as exc:
        lines.append(f"speculation overlays: unavailable — {exc}")
    lines.append(f"state: {dirs.state} · cache: {dirs.cache}")
    return lines


def _background_line(settings: Settings, provider_name: str) -> str:
    """Whether suggestions and speculation run, from every settings layer (speculation
    needs a suggestion to speculate, so it is off whenever suggestions are)."""
    from qshell.followup.guards import background_enabled

    suggesting = background_enabled(settings.suggestions.enabled, provider_name)
    speculating = suggesting and background_enabled(settings.speculation.enabled, provider_name)
    return f"suggestions: {_on(suggesting)} · speculation: {_on(speculating)}"


def _on(value: bool) -> str:
    return "on" if value else "off"
