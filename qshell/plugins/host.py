"""PluginHost: the plugins loaded for one run, and the code that calls their hooks.

Once loading is done (plugins/loader.py calls `qshell_configure` and
`qshell_register_tools` then), every hook call goes through here. It calls each
implementation itself, in consultation order (pluggy's: the first consulted plugin was
registered last; `tryfirst`/`trylast` are honoured, wrappers are not called), so it knows
which plugin answered and which one failed. Gate hooks fail closed: a `qshell_tool_gate`
that raises, or answers anything but a `GateDecision` or None, becomes a failed answer
(the caller makes it a deny or a boundary); a `qshell_shell_readonly` that raises proves
nothing; a `qshell_filter_suggestion` that raises rejects the suggestion; a
`qshell_consequential_words` that raises adds no rule. Each failure is
reported once per plugin and hook: a notice waits in `take_notices()` for a front-end to
show. `qshell_event` observers are called one event at a time under a lock; what they
raise is logged, swallowed and said once too. The host also carries the run's Telemetry,
whose every record it passes to the observers. It holds no module global: compose builds
one per run and passes it down in the ToolContext. Thread-safe: the plugin set is fixed
once built; notices and event dispatch are guarded by locks.
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import pluggy

from qshell.plugins import hookspecs
from qshell.plugins.values import (
    GateCall,
    GateContext,
    GateDecision,
    SuggestionCheck,
    TelemetryEvent,
    Verdict,
)
from qshell.telemetry import Telemetry

log = logging.getLogger(__name__)

GATE_HOOK = "qshell_tool_gate"
READONLY_HOOK = "qshell_shell_readonly"
EVENT_HOOK = "qshell_event"
FILTER_HOOK = "qshell_filter_suggestion"
WORDS_HOOK = "qshell_consequential_words"
HOOKS = (
    "qshell_configure",
    GATE_HOOK,
    READONLY_HOOK,
    "qshell_register_tools",
    EVENT_HOOK,
    FILTER_HOOK,
    WORDS_HOOK,
)
MAX_DETAIL_CHARS = 200
# what a plugin may raise without ending qshell (a Ctrl-C still does)
PLUGIN_FAILURES: tuple[type[BaseException], ...] = (
    Exception,
    SystemExit,
    asyncio.CancelledError,  # every BaseException of the standard library but a Ctrl-C
    BaseExceptionGroup,  # and a closing generator
)


def new_manager() -> pluggy.PluginManager:
    manager = pluggy.PluginManager(hookspecs.PROJECT)
    manager.add_hookspecs(hookspecs)
    return manager


def failure_text(exc: BaseException) -> str:
    """An exception as one short line: its type and message."""
    text = " ".join(str(exc).split())
    line = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
    return line if len(line) <= MAX_DETAIL_CHARS else line[: MAX_DETAIL_CHARS - 1] + "…"


@dataclass(frozen=True, slots=True)
class PluginInfo:
    """One plugin for `qshell plugins`: where it came from, its hooks, why it did not
    load (`error`, None when it did)."""

    name: str
    source: str
    location: str
    version: str | None
    hooks: list[str] = field(default_factory=list)
    error: str | None = None


@dataclass(frozen=True, slots=True)
class PluginAnswer:
    """The first plugin answer to a gate question, and whose it is; `failed` when the
    plugin raised or answered no GateDecision (its decision is then a deny)."""

    decision: GateDecision
    plugin: str
    failed: bool = False


@dataclass(frozen=True, slots=True)
class Registered:
    """A tool a plugin registered, not validated yet (tools/registered.py does that)."""

    plugin: str
    tool: object


class PluginHost:
    """The hooks of the loaded plugins, called one implementation at a time."""

    def __init__(
        self,
        manager: pluggy.PluginManager,
        infos: Sequence[PluginInfo] = (),
        *,
        notes: Sequence[str] = (),
        tools: Sequence[Registered] = (),
        telemetry: Telemetry | None = None,
    ) -> None:
        self._manager = manager
        self.infos = list(infos)
        self.startup_notes = tuple(notes)  # said once at start: plugins that did not load
        self.tools = list(tools)
        self.telemetry = telemetry or Telemetry.disabled()
        self._impls = {
            hook: [
                impl
                for impl in reversed(getattr(manager.hook, hook).get_hookimpls())
                if not (impl.hookwrapper or impl.wrapper)
            ]
            for hook in HOOKS
        }
        self._lock = threading.Lock()
        self._events = threading.RLock()  # an observer may cause another event
        self._reported: set[tuple[str, str]] = set()
        self._pending: list[str] = []
        self.telemetry.observe(self.telemetry_event)

    @classmethod
    def empty(cls) -> PluginHost:
        """A host with no plugin: every hook passes."""
        return cls(new_manager())

    def implements(self, hook: str) -> bool:
        return bool(self._impls[hook])

    @property
    def readonly_rule(self) -> Callable[[str, Sequence[str]], bool] | None:
        """`shell_readonly`, for the shell proof; None when no plugin declares commands."""
        return self.shell_readonly if self._impls[READONLY_HOOK] else None

    # -- gate hooks ---------------------------------------------------------------------

    def tool_gate(self, call: GateCall, context: GateContext) -> PluginAnswer | None:
        """The first plugin answer to `call`, or None when every plugin passed."""
        for impl in self._impls[GATE_HOOK]:
            name = impl.plugin_name
            try:
                result = impl.function(**arguments(impl, call=call, context=context))
            except PLUGIN_FAILURES as exc:
                return self._failed(name, failure_text(exc))
            if result is None:
                continue
            decision = _as_decision(result)
            if decision is None:
                return self._failed(name, f"returned {result!r:.80}, not a GateDecision or None")
            return PluginAnswer(decision, name)
        return None

    def _failed(self, plugin: str, detail: str) -> PluginAnswer:
        self.report(plugin, GATE_HOOK, detail)
        why = f"plugin {plugin} failed ({GATE_HOOK}), so the call is refused"
        return PluginAnswer(GateDecision.deny(why), plugin, failed=True)

    def shell_readonly(self, command: str, argv: Sequence[str]) -> bool:
        """Whether a plugin declares this simple command read-only; a plugin that raises
        makes the answer False, whatever the others say."""
        declared = False
        for impl in self._impls[READONLY_HOOK]:
            try:
                result = impl.function(**arguments(impl, command=command, argv=tuple(argv)))
            except PLUGIN_FAILURES as exc:
                self.report(impl.plugin_name, READONLY_HOOK, failure_text(exc))
                return False
            declared = declared or result is True
        return declared

    def filter_suggestion(self, text: str, context: SuggestionCheck) -> str | None:
        """`plugin:<name>` for the first plugin that rejects `text` (or raises), else None."""
        for impl in self._impls[FILTER_HOOK]:
            name = impl.plugin_name
            try:
                result = impl.function(**arguments(impl, text=text, context=context))
            except PLUGIN_FAILURES as exc:
                self.report(name, FILTER_HOOK, failure_text(exc))
                return f"plugin:{name}"
            if result:
                log.debug("plugin %s rejects the suggestion: %s", name, result)
                return f"plugin:{name}"
        return None

    def consequential_words(self) -> tuple[str, ...]:
        """The consequence rules every plugin adds (followup/consequence.py's form); a
        plugin that raises or answers anything but strings adds none, said once."""
        rules: list[str] = []
        for impl in self._impls[WORDS_HOOK]:
            try:
                result = impl.function(**arguments(impl)) or ()
                if isinstance(result, str) or not all(isinstance(r, str) for r in result):
                    raise TypeError("qshell_consequential_words must return a list of strings")
            except PLUGIN_FAILURES as exc:
                self.report(impl.plugin_name, WORDS_HOOK, failure_text(exc))
                continue
            rules.extend(result)
        return tuple(rules)

    # -- observers ----------------------------------------------------------------------

    def event(self, event: object) -> None:
        """Show `event` to every `qshell_event` observer, one event at a time, as a view
        it cannot act through (`observed_view`)."""
        impls = self._impls[EVENT_HOOK]
        if not impls:
            return
        with self._events:
            for impl in impls:
                try:
                    impl.function(**arguments(impl, event=observed_view(event)))
                except PLUGIN_FAILURES as exc:
                    self._observer_failed(impl.plugin_name, exc)

    def telemetry_event(self, name: str, fields: Mapping[str, Any]) -> None:
        """The Telemetry observer: each record reaches `qshell_event` as a TelemetryEvent."""
        self.event(TelemetryEvent(name, dict(fields)))

    def _observer_failed(self, plugin: str, exc: BaseException) -> None:
        """Logged, swallowed, and said once: the event goes on to the other observers."""
        log.debug("plugin %s failed observing an event", plugin, exc_info=exc)
        self.report(plugin, EVENT_HOOK, failure_text(exc))

    def record(
        self, event: str, /, *, texts: Mapping[str, Any] | None = None, **fields: Any
    ) -> None:
        """Append one telemetry record (which the observers see too); `texts` are kept in
        the file only under `telemetry.logText` (telemetry.py)."""
        self.telemetry.record(event, texts=texts, **fields)

    # -- failures -----------------------------------------------------------------------

    def report(self, plugin: str, hook: str, detail: str) -> None:
        """Say once (per plugin and hook) that a plugin failed; a front-end shows it."""
        with self._lock:
            if (plugin, hook) in self._reported:
                return
            self._reported.add((plugin, hook))
            self._pending.append(f"plugin {plugin} failed in {hook}: {detail}")
        log.debug("plugin %s failed in %s: %s", plugin, hook, detail)

    def take_notices(self) -> list[str]:
        """The failures not shown yet (each is returned once)."""
        with self._lock:
            pending, self._pending = self._pending, []
        return pending


def arguments(impl: Any, **offered: object) -> dict[str, object]:
    """The arguments an implementation asks for (it may take any subset of the spec's)."""
    return {name: offered[name] for name in impl.argnames if name in offered}


def _as_decision(value: object) -> GateDecision | None:
    if not isinstance(value, GateDecision):
        return None
    try:
        verdict = Verdict(value.verdict)
    except ValueError:
        return None
    return GateDecision(verdict, str(value.reason))


def observed_view(event: object) -> object:
    """`event` as an observer may see it: a TelemetryEvent with its own read-only copy of
    the fields; an event holding a future (a question) with a detached one, so only the
    front-end can answer it."""
    if isinstance(event, TelemetryEvent):
        return TelemetryEvent(event.name, MappingProxyType(copy.deepcopy(dict(event.fields))))
    future = getattr(event, "future", None)
    if isinstance(future, Future) and dataclasses.is_dataclass(event):
        return dataclasses.replace(event, future=Future())  # type: ignore[type-var]
    return event
