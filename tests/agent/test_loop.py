"""The agent loop: rounds, tool batches, approvals, failures and the history invariant."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from qshell.agent.events import (
    FailureKind,
    PermissionAnswer,
    PermissionReply,
    PermissionRequested,
    RoundFinished,
    TextDelta,
    ToolFinished,
    ToolStarted,
    TurnFailed,
    TurnFinished,
)
from qshell.agent.loop import run_turn
from qshell.agent.session import Session, check_history
from qshell.cancel import CancelToken
from qshell.config import ApprovalMode
from qshell.errors import AuthError, ProviderUnavailable, StreamBroken
from qshell.llm.base import StreamText
from qshell.llm.messages import Message
from qshell.permissions.runner import MainToolRunner
from qshell.tools.base import ErrorType, Kind
from tests.agent.scripted import (
    BlockingTool,
    RecordingTool,
    ScriptedProvider,
    call,
    session_for,
)


def make_session(tmp_path: Path, steps, tools, **kw) -> tuple[Session, ScriptedProvider]:
    provider = ScriptedProvider(steps)
    return session_for(provider, tmp_path, tools, home=tmp_path / "home", **kw), provider


def drive(session, prompt, runner, cancel=None, answer=None, router=None):
    events = []
    for event in run_turn(session, prompt, runner, cancel or CancelToken(), router=router):
        events.append(event)
        if isinstance(event, PermissionRequested):
            event.future.set_result(answer or PermissionReply(PermissionAnswer.ALLOW_ONCE))
    return events


def yolo() -> MainToolRunner:
    return MainToolRunner(ApprovalMode.YOLO, interactive=False)


def test_a_two_round_turn_runs_the_tool_and_returns_the_answer(tmp_path):
    tool = RecordingTool("note", Kind.READ)
    session, provider = make_session(
        tmp_path,
        [Message.assistant("", [call("note", '{"text": "a"}', "c1")]), Message.assistant("done")],
        [tool],
    )
    events = drive(session, "hi", yolo())
    kinds = [type(e) for e in events]
    assert kinds == [
        RoundFinished,
        ToolStarted,
        ToolFinished,
        TextDelta,
        RoundFinished,
        TurnFinished,
    ]
    assert tool.ran == ["a"]
    assert isinstance(events[-1], TurnFinished) and events[-1].text == "done"
    assert events[-1].rounds == 2 and events[-1].usage.prompt_tokens == 20
    assert [m.role for m in session.history] == ["user", "assistant", "user", "assistant"]
    assert session.history[2].tool_results[0].content == "note ran a"
    assert len(provider.requests) == 2 and check_history(session.history) == []


def test_consecutive_read_calls_run_in_parallel_and_results_keep_call_order(tmp_path):
    barrier = threading.Barrier(3)
    tools = [RecordingTool(f"r{i}", Kind.READ, barrier=barrier) for i in range(3)]
    calls = [call(f"r{i}", f'{{"text": "{i}"}}', f"c{i}") for i in range(3)]
    session, _ = make_session(
        tmp_path, [Message.assistant("", calls), Message.assistant("ok")], tools
    )
    events = drive(session, "go", yolo())
    assert isinstance(events[-1], TurnFinished)
    assert [r.tool_call_id for r in session.history[2].tool_results] == ["c0", "c1", "c2"]
    assert all(not r.is_error for r in session.history[2].tool_results)


def test_mutating_calls_run_in_order_after_earlier_reads(tmp_path):
    order: list[str] = []

    class Ordered(RecordingTool):
        def run(self, args, ctx):
            order.append(self.name)
            return super().run(args, ctx)

    tools = [Ordered("read", Kind.READ), Ordered("write", Kind.EDIT), Ordered("read2", Kind.READ)]
    calls = [call(t.name, '{"text": "x"}', f"c{i}") for i, t in enumerate(tools)]
    session, _ = make_session(
        tmp_path, [Message.assistant("", calls), Message.assistant("ok")], tools
    )
    drive(session, "go", yolo())
    assert order == ["read", "write", "read2"]


def test_invalid_arguments_and_unknown_tools_become_error_results_for_the_model(tmp_path):
    tool = RecordingTool("note", Kind.READ)
    calls = [
        call("note", '{"wrong": 1}', "c1"),
        call("nope", "{}", "c2"),
        call("note", "not json", "c3"),
    ]
    session, _provider = make_session(
        tmp_path, [Message.assistant("", calls), Message.assistant("ok")], [tool]
    )
    events = drive(session, "go", yolo())
    finished = [e for e in events if isinstance(e, ToolFinished)]
    assert all(f.result.error is not None for f in finished)
    assert [f.result.error.type for f in finished if f.result.error] == [
        ErrorType.INVALID_ARGS,
        ErrorType.UNKNOWN_TOOL,
        ErrorType.INVALID_ARGS,
    ]
    results = session.history[2].tool_results
    assert all(r.is_error for r in results) and "text" in results[0].content
    assert "note" in results[1].content
    assert tool.ran == [] and isinstance(events[-1], TurnFinished)


def test_arguments_nested_past_the_parser_are_invalid_not_a_crash(tmp_path):
    # a hostile model may nest its arguments deeper than json can parse
    deep = '{"text": ' + "[" * 100_000 + "]" * 100_000 + "}"
    tool = RecordingTool("note", Kind.READ)
    steps = [Message.assistant("", [call("note", deep, "c1")]), Message.assistant("ok")]
    session, _provider = make_session(tmp_path, steps, [tool])
    events = drive(session, "go", yolo())
    (finished,) = [e for e in events if isinstance(e, ToolFinished)]
    assert finished.result.error is not None
    assert finished.result.error.type is ErrorType.INVALID_ARGS
    assert tool.ran == [] and isinstance(events[-1], TurnFinished)


def test_a_denied_tool_tells_the_model_and_the_turn_goes_on(tmp_path):
    tool = RecordingTool("edit", Kind.EDIT)
    session, _provider = make_session(
        tmp_path,
        [Message.assistant("", [call("edit", '{"text": "x"}', "c1")]), Message.assistant("ok")],
        [tool],
    )
    runner = MainToolRunner(ApprovalMode.DEFAULT, interactive=True)
    events = drive(
        session, "go", runner, answer=PermissionReply(PermissionAnswer.DENY, "not that file")
    )
    assert any(isinstance(e, PermissionRequested) for e in events)
    assert tool.ran == []
    result = session.history[2].tool_results[0]
    assert result.is_error and "denied" in result.content and "not that file" in result.content
    assert isinstance(events[-1], TurnFinished)


def test_allow_always_stops_asking_for_that_tool(tmp_path):
    tool = RecordingTool("edit", Kind.EDIT)
    steps = [
        Message.assistant("", [call("edit", '{"text": "1"}', "c1")]),
        Message.assistant("", [call("edit", '{"text": "2"}', "c2")]),
        Message.assistant("ok"),
    ]
    session, _ = make_session(tmp_path, steps, [tool])
    runner = MainToolRunner(ApprovalMode.DEFAULT, interactive=True)
    events = drive(session, "go", runner, answer=PermissionReply(PermissionAnswer.ALLOW_ALWAYS))
    assert sum(isinstance(e, PermissionRequested) for e in events) == 1
    assert tool.ran == ["1", "2"]


def test_non_interactive_runner_denies_instead_of_asking(tmp_path):
    tool = RecordingTool("sh", Kind.EXECUTE)
    session, _ = make_session(
        tmp_path,
        [Message.assistant("", [call("sh", '{"text": "x"}', "c1")]), Message.assistant("ok")],
        [tool],
    )
    events = drive(session, "go", MainToolRunner(ApprovalMode.AUTO_EDIT, interactive=False))
    assert not any(isinstance(e, PermissionRequested) for e in events)
    refusal = session.history[2].tool_results[0].content  # auto-edit would not do: say yolo
    assert refusal.endswith("print mode cannot ask for approval; rerun with -y/--yolo (everything)")
    assert tool.ran == []


def test_max_turns_stops_the_turn_with_a_valid_history(tmp_path):
    tool = RecordingTool("note", Kind.READ)
    steps = [Message.assistant("", [call("note", f'{{"text": "{i}"}}', f"c{i}")]) for i in range(3)]
    session, _ = make_session(tmp_path, steps, [tool], max_turns=3)
    events = drive(session, "go", yolo())
    assert isinstance(events[-1], TurnFailed) and events[-1].kind is FailureKind.MAX_TURNS
    assert events[-1].kind.exit_code == 53
    assert check_history(session.history) == []


@pytest.mark.parametrize(
    ("error", "kind"),
    [
        (AuthError("bad key"), FailureKind.AUTH),
        (ProviderUnavailable("down"), FailureKind.UNAVAILABLE),
        (StreamBroken("cut"), FailureKind.STREAM_BROKEN),
    ],
)
def test_provider_errors_end_the_turn_without_a_partial_assistant_message(tmp_path, error, kind):
    def partial_then_error(request, cancel):
        yield StreamText("half an ans")
        raise error

    session, _ = make_session(tmp_path, [partial_then_error], [])
    events = drive(session, "go", yolo())
    assert isinstance(events[-1], TurnFailed) and events[-1].kind is kind
    assert [m.role for m in session.history] == ["user"]


def test_cancel_during_a_tool_answers_every_call_and_ends_cancelled(tmp_path):
    blocker = BlockingTool()
    later = RecordingTool("later", Kind.EDIT)
    calls = [call("block", '{"text": "x"}', "c1"), call("later", '{"text": "y"}', "c2")]
    session, _ = make_session(tmp_path, [Message.assistant("", calls)], [blocker, later])
    cancel = CancelToken()

    def cancel_once_started() -> None:
        if blocker.started.wait(10):
            cancel.cancel()

    threading.Thread(target=cancel_once_started).start()
    events = drive(session, "go", yolo(), cancel=cancel)
    assert isinstance(events[-1], TurnFailed) and events[-1].kind is FailureKind.CANCELLED
    results = session.history[-1].tool_results
    assert [r.tool_call_id for r in results] == ["c1", "c2"]
    assert all(r.is_error for r in results) and later.ran == []
    assert check_history(session.history) == []


def test_cancel_while_a_permission_question_is_open_ends_the_turn(tmp_path):
    tool = RecordingTool("edit", Kind.EDIT)
    session, _ = make_session(
        tmp_path, [Message.assistant("", [call("edit", '{"text": "x"}', "c1")])], [tool]
    )
    cancel = CancelToken()
    events = []
    for event in run_turn(
        session, "go", MainToolRunner(ApprovalMode.DEFAULT, interactive=True), cancel
    ):
        events.append(event)
        if isinstance(event, PermissionRequested):
            cancel.cancel()
    assert isinstance(events[-1], TurnFailed) and events[-1].kind is FailureKind.CANCELLED
    assert tool.ran == [] and check_history(session.history) == []


def test_continuing_after_a_failed_turn_sends_a_valid_history(tmp_path):
    session, provider = make_session(
        tmp_path, [ProviderUnavailable("down"), Message.assistant("back")], []
    )
    drive(session, "first", yolo())
    events = drive(session, "second", yolo())
    assert isinstance(events[-1], TurnFinished)
    assert [m.text for m in provider.requests[1].messages] == ["first", "second"]


def test_a_turn_resumed_mid_batch_runs_only_the_calls_without_a_known_result(tmp_path):
    from qshell.agent.loop import PendingCalls
    from qshell.tools.base import ToolResult

    first, second = RecordingTool("first", Kind.READ), RecordingTool("second", Kind.EDIT)
    calls = [call("first", '{"text": "a"}', "c1"), call("second", '{"text": "b"}', "c2")]
    session, provider = make_session(tmp_path, [Message.assistant("finished")], [first, second])
    session.append(Message.user("go"))
    session.append(Message.assistant("", calls))
    pending = PendingCalls(calls, {"c1": ToolResult(llm_content="ran earlier")})
    events = list(
        run_turn(
            session,
            None,
            MainToolRunner(ApprovalMode.YOLO, interactive=False),
            CancelToken(),
            pending=pending,
        )
    )
    assert first.ran == [] and second.ran == ["b"]
    assert [e.call_id for e in events if isinstance(e, ToolStarted)] == ["c2"]
    results = session.history[2].tool_results
    assert [r.content for r in results] == ["ran earlier", "second ran b"]
    assert isinstance(events[-1], TurnFinished) and events[-1].text == "finished"
    assert check_history(session.history) == [] and len(provider.requests) == 1
