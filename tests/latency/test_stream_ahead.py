"""Stream-ahead execution (D4): read calls that start while their response still streams.

Over real HTTP the scripted server holds its stream right after the chunk that completes
a call; a read that the loop starts early runs while the server still holds (it records
that and releases the hold itself), so "it started before the stream ended" is shown by
an ordering, never by elapsed time (a watchdog releases the hold only so that a broken
loop fails instead of hanging). The decisions the loop must not make early are checked
with an in-process stream whose phase (streaming or ended) each decision records.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from qshell import sessions
from qshell.agent.events import (
    Event,
    FailureKind,
    PermissionAnswer,
    PermissionReply,
    PermissionRequested,
    RoundFinished,
    ToolFinished,
    ToolStarted,
    TurnFailed,
    TurnFinished,
)
from qshell.agent.loop import run_turn
from qshell.agent.session import Session, SessionRequest, check_history
from qshell.cancel import CancelToken
from qshell.config import ApprovalMode, load_settings
from qshell.errors import ControlSignal
from qshell.llm.base import StreamDone, StreamEvent, StreamText, StreamToolCall
from qshell.llm.messages import ChatRequest, Message, ToolCall, Usage
from qshell.permissions.policy import Decision
from qshell.permissions.runner import MainToolRunner
from qshell.tools import default_tools
from qshell.tools.base import Access, Kind, Tool, ToolContext, ToolResult
from qshell.tools.registered import adapt
from tests.agent.scripted import NoteArgs, RecordingTool, ScriptedProvider, call, session_for
from tests.fakes.llm_server import (
    Hold,
    Reply,
    ScriptedLLMServer,
    ToolCallSpec,
    always,
    has_tool_result,
)
from tests.fakes.providers import provider_for

WATCHDOG_S = 20.0


class ProbeTool(RecordingTool):
    """A tool of any kind whose run calls `on_run(text, ctx)` for its result."""

    def __init__(self, name: str, kind: Kind, on_run: Callable[[str, Any], str]) -> None:
        super().__init__(name, kind)
        self.on_run = on_run

    def run(self, args: Any, ctx: ToolContext) -> ToolResult:
        self.ran.append(args.text)
        return ToolResult(llm_content=self.on_run(args.text, ctx))


class LoggingRunner(MainToolRunner):
    """The main runner, logging each decision with the phase the stream was in."""

    def __init__(self, mode: ApprovalMode, phase: list[str] | None = None) -> None:
        super().__init__(mode, interactive=True)
        self.phase = phase if phase is not None else ["-"]
        self.decided: list[tuple[str, str]] = []  # (phase, call text or tool name)

    def decide(self, tool: Tool, args: Any, ctx: ToolContext) -> Decision:
        self.decided.append((self.phase[0], getattr(args, "text", None) or tool.name))
        return super().decide(tool, args, ctx)


class Watchdog:
    """Releases `hold` after WATCHDOG_S unless released first; says whether it had to."""

    def __init__(self, hold: Hold) -> None:
        self.hold = hold
        self.fired = False
        threading.Thread(target=self._watch, daemon=True).start()

    def _watch(self) -> None:
        if not self.hold.released.wait(WATCHDOG_S):
            self.fired = True
            self.hold.release()


def http_session(
    server: ScriptedLLMServer, protocol: str, root: Path, tools: list[Tool], **options: Any
) -> Session:
    return session_for(provider_for(server, protocol), root, tools, model="m1", **options)


def early_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("qshell-early")]


def releasing(hold: Hold, seen: dict[str, bool]) -> Callable[[str, Any], str]:
    """A run that records whether the stream was still held, then lets it go on."""

    def run(text: str, ctx: Any) -> str:
        seen[text] = not hold.released.is_set()
        hold.release()
        return f"read {text}"

    return run


def probe_calls(*texts: str) -> list[ToolCallSpec]:
    return [ToolCallSpec("probe", {"text": t}) for t in texts]


@pytest.mark.parametrize("protocol", ["openai", "anthropic"])
def test_a_read_starts_while_its_response_streams_and_its_events_still_follow_the_stream(
    llm_server, tmp_path, protocol
):
    llm_server.add_rule(has_tool_result(), Reply.text("both read"))
    rule = llm_server.add_rule(always(), Reply.tool_calls(probe_calls("a", "b"), "Reading."))
    hold = llm_server.hold(rule, after_call=0)
    watchdog = Watchdog(hold)
    held: dict[str, bool] = {}
    session = http_session(
        llm_server, protocol, tmp_path, [ProbeTool("probe", Kind.READ, releasing(hold, held))]
    )
    events = list(
        run_turn(session, "go", MainToolRunner(ApprovalMode.YOLO, interactive=False), CancelToken())
    )
    assert not watchdog.fired
    assert held == {"a": True, "b": False}  # a ran while the server held the rest back
    kinds = [
        type(e).__name__
        for e in events
        if isinstance(e, RoundFinished | ToolStarted | ToolFinished)
    ]
    assert kinds[:5] == [
        "RoundFinished",
        "ToolStarted",
        "ToolStarted",
        "ToolFinished",
        "ToolFinished",
    ]
    results = session.history[2].tool_results
    assert [r.content for r in results] == ["read a", "read b"]
    assert isinstance(events[-1], TurnFinished) and events[-1].text == "both read"
    assert check_history(session.history) == [] and not early_threads()


def test_a_later_early_call_finishing_first_still_returns_in_call_order(llm_server, tmp_path):
    llm_server.add_rule(has_tool_result(), Reply.text("ok"))
    rule = llm_server.add_rule(always(), Reply.tool_calls(probe_calls("slow", "fast")))
    hold = llm_server.hold(rule, after_call=1)
    watchdog = Watchdog(hold)
    fast_done = threading.Event()
    finished: list[str] = []
    held: dict[str, bool] = {}

    def run(text: str, ctx: Any) -> str:
        held[text] = not hold.released.is_set()
        if text == "slow":
            fast_done.wait(WATCHDOG_S)  # the later call must finish first
        else:
            fast_done.set()
            hold.release()
        finished.append(text)
        return f"{text} result"

    session = http_session(llm_server, "openai", tmp_path, [ProbeTool("probe", Kind.READ, run)])
    events = list(
        run_turn(session, "go", MainToolRunner(ApprovalMode.YOLO, interactive=False), CancelToken())
    )
    assert not watchdog.fired and held == {"slow": True, "fast": True}
    assert finished == ["fast", "slow"]
    assert [e.result.llm_content for e in events if isinstance(e, ToolFinished)] == [
        "slow result",
        "fast result",
    ]
    calls = session.history[1].tool_calls
    results = session.history[2].tool_results
    assert [r.tool_call_id for r in results] == [c.id for c in calls]
    assert [r.content for r in results] == ["slow result", "fast result"]
    assert llm_server.requests[1].body["messages"][-1]["content"] == "fast result"


@pytest.mark.parametrize("protocol", ["openai", "anthropic"])
def test_a_round_cut_at_the_output_limit_after_an_early_start_answers_not_run(
    llm_server, tmp_path, protocol
):
    cut = ToolCallSpec("probe", '{"text": "b')  # the limit fell inside its arguments
    reply = Reply.tool_calls([*probe_calls("a"), cut], stop_reason="max_tokens")
    hold = llm_server.hold(llm_server.add_rule(always(), reply), after_call=0)
    watchdog = Watchdog(hold)
    held: dict[str, bool] = {}
    session = http_session(
        llm_server, protocol, tmp_path, [ProbeTool("probe", Kind.READ, releasing(hold, held))]
    )
    events = list(
        run_turn(session, "go", MainToolRunner(ApprovalMode.YOLO, interactive=False), CancelToken())
    )
    assert not watchdog.fired and held == {"a": True}  # it did start early
    end = events[-1]
    assert isinstance(end, TurnFinished) and end.stop_reason == "max_tokens"
    assert not any(isinstance(e, ToolStarted) for e in events)
    results = session.history[-1].tool_results
    assert [r.is_error for r in results] == [True, True]
    assert all(r.content.startswith("not run:") for r in results)
    assert check_history(session.history) == [] and not early_threads()
    assert len(llm_server.requests) == 1


def test_cancelling_during_an_early_call_cancels_it_and_ends_the_turn(llm_server, tmp_path):
    rule = llm_server.add_rule(always(), Reply.tool_calls(probe_calls("wait", "more")))
    llm_server.hold(rule, after_call=0)  # never released: the stream is still going
    started = threading.Event()
    saw_cancel: list[bool] = []

    def run(text: str, ctx: Any) -> str:
        started.set()
        saw_cancel.append(ctx.cancel.wait(WATCHDOG_S))
        return "cancelled" if saw_cancel[-1] else "not cancelled"

    session = http_session(llm_server, "openai", tmp_path, [ProbeTool("probe", Kind.READ, run)])
    cancel = CancelToken()
    events: list[Event] = []
    runner = MainToolRunner(ApprovalMode.YOLO, interactive=False)
    worker = threading.Thread(target=lambda: events.extend(run_turn(session, "go", runner, cancel)))
    worker.start()
    assert started.wait(WATCHDOG_S)
    cancel.cancel()
    worker.join(WATCHDOG_S)
    assert not worker.is_alive()
    assert saw_cancel == [True]
    assert isinstance(events[-1], TurnFailed) and events[-1].kind is FailureKind.CANCELLED
    assert [m.role for m in session.history] == ["user"] and not early_threads()
    assert llm_server.requests[0].disconnected.wait(WATCHDOG_S)


# ---------------------------------------------------------------- in-process streams


def announcing(phase: list[str], calls: list[ToolCall], *, wait_for: threading.Event | None = None):
    """A stream that announces each call, then (optionally) waits until `wait_for` is set,
    marks the phase "ended" and sends StreamDone."""

    def stream(request: ChatRequest, cancel: CancelToken) -> Iterator[StreamEvent]:
        phase[0] = "streaming"
        yield StreamText("Working.")
        for index, each in enumerate(calls):
            yield StreamToolCall(index, each)
        if wait_for is not None:
            wait_for.wait(WATCHDOG_S)
        phase[0] = "ended"
        message = Message.assistant("Working.", calls)
        yield StreamDone(message, Usage(prompt_tokens=10, completion_tokens=2), "tool_use")

    return stream


def scripted_session(steps: list[Any], tools: list[Tool], root: Path, **options: Any) -> Session:
    return session_for(ScriptedProvider(steps), root, tools, **options)


def edit_then_read(log: list[str]) -> list[Tool]:
    def logged(text: str, ctx: Any) -> str:
        log.append(text)
        return text

    return [ProbeTool("write", Kind.EDIT, logged), ProbeTool("look", Kind.READ, logged)]


def test_a_read_after_a_write_in_one_response_does_not_start_early(tmp_path):
    phase = ["-"]
    ran: list[str] = []
    calls = [call("write", '{"text": "w"}', "c1"), call("look", '{"text": "r"}', "c2")]
    session = scripted_session(
        [announcing(phase, calls), Message.assistant("done")], edit_then_read(ran), tmp_path
    )
    runner = LoggingRunner(ApprovalMode.YOLO, phase)
    events = list(run_turn(session, "go", runner, CancelToken()))
    assert isinstance(events[-1], TurnFinished)
    assert runner.decided == [("ended", "w"), ("ended", "r")]
    assert ran == ["w", "r"]  # the read sees the write


def test_a_read_before_a_write_starts_early_and_the_write_waits_for_the_batch(tmp_path):
    phase = ["-"]
    ran: list[str] = []
    read_ran = threading.Event()
    tools = edit_then_read(ran)

    def look(text: str, ctx: Any) -> str:
        ran.append(text)
        read_ran.set()
        return text

    tools[1] = ProbeTool("look", Kind.READ, look)
    calls = [call("look", '{"text": "r"}', "c1"), call("write", '{"text": "w"}', "c2")]
    steps = [announcing(phase, calls, wait_for=read_ran), Message.assistant("done")]
    session = scripted_session(steps, tools, tmp_path)
    runner = LoggingRunner(ApprovalMode.YOLO, phase)
    events = list(run_turn(session, "go", runner, CancelToken()))
    assert isinstance(events[-1], TurnFinished)
    assert runner.decided == [("streaming", "r"), ("ended", "w")]
    assert ran == ["r", "w"] and read_ran.is_set()


def test_a_read_that_needs_permission_is_not_started_early_and_is_asked_once(tmp_path):
    root = tmp_path / "project"
    root.mkdir()
    outside = tmp_path / "notes.txt"
    outside.write_text("outside the root\n")
    phase = ["-"]
    calls = [call("read_file", f'{{"path": "{outside}"}}', "c1")]
    session = scripted_session(
        [announcing(phase, calls), Message.assistant("read it")], default_tools(), root
    )
    runner = LoggingRunner(ApprovalMode.DEFAULT, phase)
    events: list[Event] = []
    for event in run_turn(session, "go", runner, CancelToken()):
        events.append(event)
        if isinstance(event, PermissionRequested):
            assert phase == ["ended"] and not any(isinstance(e, ToolStarted) for e in events)
            event.future.set_result(PermissionReply(PermissionAnswer.ALLOW_ONCE))
    assert runner.decided == [("streaming", "read_file")]  # decided once, during the stream
    assert isinstance(events[-1], TurnFinished) and events[-1].text == "read it"
    assert "outside the root" in session.history[2].tool_results[0].content


def test_with_the_setting_off_nothing_is_decided_or_started_before_the_stream_ends(tmp_path):
    phase = ["-"]
    ran: list[str] = []
    calls = [call("look", '{"text": "a"}', "c1"), call("look", '{"text": "b"}', "c2")]

    def look(text: str, ctx: Any) -> str:
        ran.append(phase[0])
        return text

    tools: list[Tool] = [ProbeTool("look", Kind.READ, look)]
    steps = [announcing(phase, calls), Message.assistant("done")]
    session = scripted_session(steps, tools, tmp_path, stream_ahead=False)
    runner = LoggingRunner(ApprovalMode.YOLO, phase)
    events = list(run_turn(session, "go", runner, CancelToken()))
    assert isinstance(events[-1], TurnFinished)
    assert runner.decided == [("ended", "a"), ("ended", "b")]
    assert ran == ["ended", "ended"]


class Stop(ControlSignal):
    """A control signal a runner's decision raises (as a speculation's Boundary does)."""


def test_a_control_signal_from_an_early_decision_is_raised_by_the_batch_and_decided_once(
    tmp_path,
):
    phase = ["-"]
    calls = [call("look", '{"text": "a"}', "c1"), call("look", '{"text": "stop"}', "c2")]
    tools: list[Tool] = [ProbeTool("look", Kind.READ, lambda t, c: t)]

    class Stopping(LoggingRunner):
        def decide(self, tool: Tool, args: Any, ctx: ToolContext) -> Decision:
            decision = super().decide(tool, args, ctx)
            if args.text == "stop":
                raise Stop("boundary")
            return decision

    session = scripted_session([announcing(phase, calls)], tools, tmp_path)
    runner = Stopping(ApprovalMode.YOLO, phase)
    events: list[Event] = []
    with pytest.raises(Stop):
        for event in run_turn(session, "go", runner, CancelToken()):
            events.append(event)
    assert runner.decided == [("streaming", "a"), ("streaming", "stop")]
    assert any(isinstance(e, RoundFinished) for e in events)  # raised by the batch, after
    assert not early_threads()


def test_the_setting_reaches_every_session_and_its_forks(tmp_path):
    # a key names a provider on any install (without it only the `local` extra would)
    environ = {"HOME": str(tmp_path), "QSHELL_STREAM_AHEAD_TOOLS": "false", "OPENAI_API_KEY": "k"}
    provider = ScriptedProvider([])
    for value, expected in (("false", False), ("true", True)):
        environ["QSHELL_STREAM_AHEAD_TOOLS"] = value
        settings = load_settings(project_root=tmp_path, environ=environ)
        session = sessions.open_session(
            settings, SessionRequest(), root=tmp_path, environ=environ, provider=provider
        )
        assert (
            session.options.stream_ahead is expected
            and session.fork().options.stream_ahead is expected
        )
        session.close()


def test_a_call_the_final_message_changed_is_decided_and_run_again_with_its_final_arguments(
    tmp_path,
):
    """A server that announced a call too early (its final arguments differ): the early run
    is discarded and the batch runs the call the message holds."""
    phase = ["-"]
    ran: list[str] = []

    def look(text: str, ctx: Any) -> str:
        ran.append(text)
        return f"saw {text}"

    tools: list[Tool] = [ProbeTool("look", Kind.READ, look)]
    final = [call("look", '{"text": "new"}', "c1")]
    announced = announcing(phase, [call("look", '{"text": "old"}', "c1")])

    def stream(request: ChatRequest, cancel: CancelToken) -> Iterator[StreamEvent]:
        for event in announced(request, cancel):
            if isinstance(event, StreamDone):
                event = StreamDone(Message.assistant("", final), event.usage, "tool_use")
            yield event

    session = scripted_session([stream, Message.assistant("done")], tools, tmp_path)
    runner = LoggingRunner(ApprovalMode.YOLO, phase)
    list(run_turn(session, "go", runner, CancelToken()))
    assert runner.decided == [("streaming", "old"), ("ended", "new")]
    assert sorted(ran) == ["new", "old"]
    assert session.history[2].tool_results[0].content == "saw new"


def test_allowing_a_tool_always_covers_the_later_calls_decided_during_the_stream(tmp_path):
    root = tmp_path / "project"
    root.mkdir()
    for name in ("one.txt", "two.txt"):
        (tmp_path / name).write_text(f"{name} outside\n")
    phase = ["-"]
    calls = [
        call("read_file", f'{{"path": "{tmp_path / name}"}}', f"c{number}")
        for number, name in enumerate(("one.txt", "two.txt"))
    ]
    session = scripted_session(
        [announcing(phase, calls), Message.assistant("read both")], default_tools(), root
    )
    runner = LoggingRunner(ApprovalMode.DEFAULT, phase)
    asked = []
    for event in run_turn(session, "go", runner, CancelToken()):
        if isinstance(event, PermissionRequested):
            asked.append(event.call_id)
            event.future.set_result(PermissionReply(PermissionAnswer.ALLOW_ALWAYS))
    assert asked == ["c0"]  # "always" for the first covers the second, as without D4
    results = session.history[2].tool_results
    assert [r.is_error for r in results] == [False, False]
    assert runner.decided == [("streaming", "read_file")] * 2 + [("ended", "read_file")]


class _PluginRead:
    """A plugin's tool that calls itself a read; `declares` says whether it names the
    paths it reads (the speculative gate's rule for trusting a plugin's read)."""

    kind = Kind.READ
    description = "Look something up."

    def __init__(self, name: str, ran: list[str], *, declares: bool) -> None:
        self.name = name
        self.ran = ran
        self.Args = NoteArgs
        if declares:
            self.accesses = lambda args, ctx: [Access(ctx.paths.resolve("notes.txt"))]

    def run(self, args: Any, ctx: ToolContext) -> str:
        self.ran.append(args.text)  # its side effect, whatever its kind says
        return args.text


def test_a_plugin_read_starts_early_only_when_it_declares_what_it_reads(tmp_path):
    # a plugin's kind is its own word: a "read" that writes, started early, would have
    # run although a round cut after it answers "not run"; like a speculation, D4 trusts
    # it only when it names the paths it reads
    phase = ["-"]
    ran: list[str] = []
    tools = [
        adapt("p", _PluginRead("declared", ran, declares=True)),
        adapt("p", _PluginRead("undeclared", ran, declares=False)),
    ]
    calls = [call("declared", '{"text": "d"}', "c1"), call("undeclared", '{"text": "u"}', "c2")]
    session = scripted_session(
        [announcing(phase, calls), Message.assistant("done")], tools, tmp_path
    )
    runner = LoggingRunner(ApprovalMode.YOLO, phase)
    events = list(run_turn(session, "go", runner, CancelToken()))
    assert isinstance(events[-1], TurnFinished)
    assert runner.decided == [("streaming", "d"), ("ended", "u")]
    assert sorted(ran) == ["d", "u"]
