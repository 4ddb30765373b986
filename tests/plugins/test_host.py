"""The PluginHost calls each hook implementation itself: first answer wins, a failing gate
hook fails closed and is said once, observers cannot break anything."""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import Future
from pathlib import Path

from qshell.agent.events import PermissionReply, PermissionRequested
from qshell.plugins import (
    GateCall,
    GateContext,
    GateDecision,
    SuggestionCheck,
    TelemetryEvent,
    Verdict,
    hookimpl,
)
from qshell.telemetry import Telemetry
from tests.plugins.helpers import Gate, host_of

CALL = GateCall(tool="read_file", kind="read", paths=(Path("/p/a.txt"),))
CONTEXT = GateContext(False, "default", Path("/p"), GateDecision.allow())
CHECK = SuggestionCheck("", "default", Path("/p"))


def test_the_first_answer_wins_in_consultation_order():
    passing, first, second = Gate(None), Gate(GateDecision.deny("one")), Gate(GateDecision.ask("2"))
    host = host_of(("passing", passing), ("first", first), ("second", second))
    answer = host.tool_gate(CALL, CONTEXT)
    assert answer is not None and (answer.plugin, answer.decision.reason) == ("first", "one")
    assert len(passing.seen) == 1 and len(first.seen) == 1 and second.seen == []
    assert passing.seen[0] == (CALL, CONTEXT)


def test_tryfirst_goes_ahead_of_the_order():
    class Eager:
        @hookimpl(tryfirst=True)
        def qshell_tool_gate(self, call):  # a subset of the spec's arguments
            return GateDecision.allow("eager")

    host = host_of(("plain", Gate(GateDecision.deny("plain"))), ("eager", Eager()))
    answer = host.tool_gate(CALL, CONTEXT)
    assert answer is not None and answer.plugin == "eager"


def test_no_answer_when_every_plugin_passes():
    assert host_of(("a", Gate(None)), ("b", Gate(None))).tool_gate(CALL, CONTEXT) is None


def test_a_raising_gate_hook_fails_closed_and_is_said_once():
    host = host_of(("flaky", Gate(raises=RuntimeError("boom\nsecond line"))), ("next", Gate(None)))
    for _ in range(3):
        answer = host.tool_gate(CALL, CONTEXT)
        assert answer is not None and answer.failed and answer.plugin == "flaky"
        assert (
            answer.decision.verdict is Verdict.DENY
            and "plugin flaky failed" in answer.decision.reason
        )
    assert host.take_notices() == [
        "plugin flaky failed in qshell_tool_gate: RuntimeError: boom second line"
    ]
    assert host.take_notices() == []


def test_an_answer_that_is_no_gate_decision_fails_closed():
    for bad in ("allow", True, GateDecision("maybe", "?")):  # type: ignore[arg-type]
        host = host_of(("odd", Gate(bad)))
        answer = host.tool_gate(CALL, CONTEXT)
        assert answer is not None and answer.failed
        assert "not a GateDecision" in host.take_notices()[0]


def test_a_command_is_declared_read_only_by_any_plugin_and_a_raise_declares_nothing():
    class Yes:
        @hookimpl
        def qshell_shell_readonly(self, command, argv):
            return command == "cloc"

    class Broken:
        @hookimpl
        def qshell_shell_readonly(self, argv):
            if argv[0] == "tokei":
                raise ValueError("no")

    host = host_of(("yes", Yes()), ("broken", Broken()))
    assert host.shell_readonly("cloc", ["cloc", "."]) is True
    assert host.shell_readonly("scc", ["scc"]) is False
    assert host.shell_readonly("tokei", ["tokei"]) is False
    assert host.take_notices() == ["plugin broken failed in qshell_shell_readonly: ValueError: no"]
    assert host_of().readonly_rule is None and host.readonly_rule is not None


def test_a_suggestion_filter_rejects_and_a_raising_one_rejects_too():
    class Picky:
        @hookimpl
        def qshell_filter_suggestion(self, text, context):
            if text == "raise":
                raise LookupError("x")
            return "pushes" if "push" in text else None

    host = host_of(("picky", Picky()))
    assert host.filter_suggestion("run the tests", CHECK) is None
    assert host.filter_suggestion("push it", CHECK) == "plugin:picky"
    assert host.filter_suggestion("raise", CHECK) == "plugin:picky"
    assert "qshell_filter_suggestion: LookupError" in host.take_notices()[0]


def test_observers_see_each_event_and_what_they_raise_is_swallowed_and_said_once():
    seen: list[object] = []

    class Watcher:
        @hookimpl
        def qshell_event(self, event):
            seen.append(event)

    class Clumsy:
        @hookimpl
        def qshell_event(self, event):
            raise ZeroDivisionError("oops")

    host = host_of(("clumsy", Clumsy()), ("watcher", Watcher()))
    for event in ("a", "b"):
        host.event(event)
    assert seen == ["a", "b"]
    assert host.take_notices() == ["plugin clumsy failed in qshell_event: ZeroDivisionError: oops"]


def test_observers_are_called_one_event_at_a_time():
    inside = threading.Semaphore(1)
    overlaps: list[bool] = []

    class Slow:
        @hookimpl
        def qshell_event(self, event):
            overlaps.append(not inside.acquire(blocking=False))
            threading.Event().wait(0.002)
            inside.release()

    host = host_of(("slow", Slow()))

    def send_events() -> None:
        for i in range(20):
            host.event(i)

    threads = [threading.Thread(target=send_events) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(overlaps) == 80 and not any(overlaps)


def test_every_telemetry_record_reaches_the_observers_as_a_telemetry_event(tmp_path):
    seen: list[object] = []

    class Watcher:
        @hookimpl
        def qshell_event(self, event):
            seen.append(event)

    telemetry = Telemetry.for_state_dir(tmp_path)
    host = host_of(("watcher", Watcher()), telemetry=telemetry)
    telemetry.record("suggestion", outcome="shown", event="dropped")
    host.record("permission", tool="shell", verdict="deny")
    assert seen == [
        TelemetryEvent("suggestion", {"outcome": "shown"}),
        TelemetryEvent("permission", {"tool": "shell", "verdict": "deny"}),
    ]
    assert (tmp_path / "telemetry" / "events.jsonl").read_text().count("\n") == 2


def test_an_observer_can_neither_answer_a_question_nor_rewrite_a_record():
    seen: list[object] = []

    class Meddler:
        @hookimpl
        def qshell_event(self, event):
            seen.append(event)
            if isinstance(event, PermissionRequested):
                event.future.set_result(PermissionReply.__new__(PermissionReply))
            if isinstance(event, TelemetryEvent):
                try:
                    event.fields["verdict"] = "allow"  # type: ignore[index]
                except TypeError:
                    seen.append("read-only")

    host = host_of(("meddler", Meddler()), ("second", Meddler()))
    question = PermissionRequested("c1", "edit", {}, "why", Future())
    host.event(question)
    assert not question.future.done()  # only the front-end answers it
    record = TelemetryEvent("permission", {"verdict": "deny"})
    host.event(record)
    assert record.fields["verdict"] == "deny"
    assert seen.count("read-only") == 2


def test_a_gate_hook_raising_a_cancel_fails_closed_like_any_error():
    host = host_of(("cancels", Gate(raises=asyncio.CancelledError())))
    answer = host.tool_gate(CALL, CONTEXT)
    assert answer is not None and answer.failed and answer.decision.verdict is Verdict.DENY
