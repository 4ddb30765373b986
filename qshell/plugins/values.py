"""The values plugins see and return: the gate's vocabulary, a tool call, and the contexts.

`Verdict` is the one decision vocabulary of qshell's gates — `allow`, `ask`, `deny`, and
`boundary` (a speculation stops there until the user confirms) — shared by the main
policy (permissions/policy.py) and what a `qshell_tool_gate` plugin answers as a
`GateDecision`. `GateCall` and `GateContext` describe a tool call and where it is being
decided, `TelemetryEvent` is what `qshell_event` receives for a telemetry record,
`PluginConfig` what `qshell_configure` receives, and `SuggestionCheck` the context of
`qshell_filter_suggestion`. Frozen values with no behaviour beyond building them, so a
plugin can neither change a decision after the fact nor reach qshell's internals
through them; safe to share between threads.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


class Verdict(enum.StrEnum):
    ALLOW = "allow"
    ASK = "ask"
    DENY = "deny"
    BOUNDARY = "boundary"  # speculation only: stop here; the main loop asks instead


@dataclass(frozen=True, slots=True)
class GateDecision:
    """A gate's answer to one tool call: the verdict and why (shown to the user)."""

    verdict: Verdict
    reason: str = ""

    @classmethod
    def allow(cls, reason: str = "") -> GateDecision:
        return cls(Verdict.ALLOW, reason)

    @classmethod
    def ask(cls, reason: str) -> GateDecision:
        return cls(Verdict.ASK, reason)

    @classmethod
    def deny(cls, reason: str) -> GateDecision:
        return cls(Verdict.DENY, reason)

    @classmethod
    def boundary(cls, reason: str) -> GateDecision:
        return cls(Verdict.BOUNDARY, reason)


@dataclass(frozen=True, slots=True)
class GateCall:
    """One tool call as a gate plugin sees it. `paths` are the resolved paths it reads and
    `writes` those it writes, as the tool declares them; `command` is the shell command
    line of an `execute` call ("" otherwise); `args` its validated arguments."""

    tool: str
    kind: str  # read, search, fetch, edit, delete, move, execute, think, other
    args: Mapping[str, Any] = field(default_factory=dict)
    paths: tuple[Path, ...] = ()
    writes: tuple[Path, ...] = ()
    command: str = ""


@dataclass(frozen=True, slots=True)
class GateContext:
    """Where a call is decided: in a speculation or the main loop, in which approval mode,
    for which project, and what qshell decides on its own (`builtin`)."""

    speculative: bool
    approval_mode: str  # default, auto-edit, plan, yolo
    project_root: Path
    builtin: GateDecision


@dataclass(frozen=True, slots=True)
class TelemetryEvent:
    """One local telemetry record as `qshell_event` sees it: its name (`suggestion`,
    `speculation`, `permission`) and its fields, exactly as written to the events file."""

    name: str
    fields: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class PluginConfig:
    """What `qshell_configure` receives once, after loading: the plugin's name as loaded,
    its options (the settings' `plugins.options.<name>`), the project root, and qshell's
    private state directory (where a plugin may keep files of its own)."""

    name: str
    options: Mapping[str, Any]
    project_root: Path
    state_dir: Path


@dataclass(frozen=True, slots=True)
class SuggestionCheck:
    """The context of a next-prompt suggestion `qshell_filter_suggestion` judges."""

    previous_prompt: str
    approval_mode: str
    project_root: Path
