"""audit_log: every tool-gate decision appended to a JSONL file, one line each.

It changes no decision. It observes the `permission` telemetry events qshell records
for each tool call — in the main loop and in speculation, after the plugins and the
fixed limits have had their say — and appends one JSON object per decision: `time`
(seconds since the epoch), `tool`, `kind`, `target` (the command, or the paths), `mode`,
`speculative`, `builtin` (what qshell alone decided), `verdict` (what stands: allow, ask,
deny, boundary), `reason`, `decided_by` (`qshell` or the plugin whose answer it is) and
`limited` (the fixed limit that overrode a plugin, if one did). The file is created
private (0600) and each line is one `write`, so two qshell processes appending to it
leave whole lines.

The file is `plugins.options.audit_log.path` (`~` expanded), else `audit.jsonl` in
qshell's state directory:

    {"plugins": {"options": {"audit_log": {"path": "~/qshell-audit.jsonl"}}}}
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

from qshell.plugins import PluginConfig, TelemetryEvent, hookimpl

DEFAULT_NAME = "audit.jsonl"
FILE_MODE = 0o600
FIELDS = (
    "tool",
    "kind",
    "target",
    "mode",
    "speculative",
    "builtin",
    "verdict",
    "reason",
    "decided_by",
    "limited",
)

_target: list[Path] = []  # this load's file (qshell_configure)
_lock = threading.Lock()


@hookimpl
def qshell_configure(config: PluginConfig) -> None:
    path = config.options.get("path")
    if path is not None and not isinstance(path, str):
        raise ValueError("plugins.options.audit_log.path must be a string")
    _target[:] = [Path(path).expanduser() if path else config.state_dir / DEFAULT_NAME]


@hookimpl
def qshell_event(event: object) -> None:
    if not isinstance(event, TelemetryEvent) or event.name != "permission" or not _target:
        return
    record = {"time": round(time.time(), 3), **{key: event.fields.get(key) for key in FIELDS}}
    line = (json.dumps(record, ensure_ascii=False, default=str) + "\n").encode()
    path = _target[0]
    with _lock:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, FILE_MODE)
        try:
            os.write(fd, line)
        finally:
            os.close(fd)
