"""Cancelling a real turn from another thread: the server sees the disconnect and the loop
ends cancelled with a valid history. Asserted by events, never by elapsed time."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from qshell.agent.events import FailureKind, TextDelta, ToolStarted, TurnFailed
from qshell.agent.loop import run_turn
from qshell.agent.session import Session, check_history
from qshell.cancel import CancelToken
from qshell.config import ApprovalMode
from qshell.permissions.runner import MainToolRunner
from qshell.tools import default_tools
from tests.agent.scripted import session_for
from tests.fakes.llm_server import Reply, ToolCallSpec, always, has_tool_result
from tests.fakes.providers import provider_for


def make_session(server, protocol: str, root: Path) -> Session:
    return session_for(provider_for(server, protocol), root, default_tools(), model="m1")


def run_in_worker(
    session: Session, cancel: CancelToken
) -> tuple[threading.Thread, list, threading.Event]:
    """Consume the turn in a worker; the Event is set at the first text delta."""
    events: list = []
    got_text = threading.Event()
    runner = MainToolRunner(ApprovalMode.YOLO, interactive=False)

    def consume() -> None:
        for event in run_turn(session, "go", runner, cancel):
            events.append(event)
            if isinstance(event, TextDelta):
                got_text.set()

    worker = threading.Thread(target=consume)
    worker.start()
    return worker, events, got_text


@pytest.mark.parametrize("protocol", ["openai", "anthropic"])
@pytest.mark.parametrize("after_first_chunk", [False, True])
def test_cancel_from_another_thread_closes_the_stream_and_ends_the_turn(
    llm_server, tmp_path, protocol, after_first_chunk
):
    rule = llm_server.add_rule(always(), Reply.text("streaming a long answer " * 20))
    hold = llm_server.hold(rule, after_first_chunk=after_first_chunk)
    session = make_session(llm_server, protocol, tmp_path)
    cancel = CancelToken()
    worker, events, got_text = run_in_worker(session, cancel)
    request = hold.wait_arrived(timeout=10)
    if after_first_chunk:
        assert got_text.wait(10)
    cancel.cancel()
    worker.join(30)
    assert not worker.is_alive()
    assert request.disconnected.wait(10)
    assert isinstance(events[-1], TurnFailed) and events[-1].kind is FailureKind.CANCELLED
    assert any(isinstance(e, TextDelta) for e in events) == after_first_chunk
    assert [m.role for m in session.history] == ["user"]
    hold.release()


def test_cancel_during_a_shell_tool_kills_it_and_answers_the_call(llm_server, tmp_path):
    marker = tmp_path / "finished"
    command = f"sleep 30; touch {marker}"
    llm_server.add_rule(has_tool_result(), Reply.text("never reached"))
    llm_server.add_rule(always(), Reply.tool_calls([ToolCallSpec("shell", {"command": command})]))
    session = make_session(llm_server, "openai", tmp_path)
    cancel = CancelToken()
    started = threading.Event()

    def consume() -> None:
        runner = MainToolRunner(ApprovalMode.YOLO, interactive=False)
        for event in run_turn(session, "go", runner, cancel):
            events.append(event)
            if isinstance(event, ToolStarted):
                started.set()

    events: list = []
    worker = threading.Thread(target=consume)
    worker.start()
    assert started.wait(10)
    cancel.cancel()
    worker.join(30)
    assert not worker.is_alive() and not marker.exists()
    assert isinstance(events[-1], TurnFailed) and events[-1].kind is FailureKind.CANCELLED
    assert check_history(session.history) == []
    assert session.history[-1].tool_results[0].is_error
    assert len(llm_server.requests) == 1
