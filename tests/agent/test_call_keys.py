"""Calls named by their response as well as their id: servers that number every
response's calls `call_0` must pair each result with its own call, in the loop's events
and in the history check."""

from __future__ import annotations

from qshell.agent.events import PermissionRequested, ToolFinished, ToolStarted
from qshell.agent.session import check_history
from qshell.config import ApprovalMode
from qshell.llm.messages import Message, ToolResultBlock
from qshell.permissions.runner import MainToolRunner
from qshell.tools.base import Kind
from tests.agent.scripted import RecordingTool, call
from tests.agent.test_loop import drive, make_session, yolo


def asks(text: str, id_: str = "call_0") -> Message:
    return Message.assistant("", [call("note", f'{{"text": "{text}"}}', id_)])


def answers(content: str, id_: str = "call_0") -> Message:
    return Message(role="user", content=[ToolResultBlock(tool_call_id=id_, content=content)])


def test_each_round_of_a_turn_with_call_0_every_time_has_events_and_results_of_its_own(
    tmp_path,
):
    tool = RecordingTool("note", Kind.READ)
    steps = [asks("a"), asks("b"), asks("c"), Message.assistant("done")]
    session, provider = make_session(tmp_path, steps, [tool])
    events = drive(session, "hi", yolo())
    started = [e.key for e in events if isinstance(e, ToolStarted)]
    finished = [e for e in events if isinstance(e, ToolFinished)]
    assert started == [e.key for e in finished] == [(1, "call_0"), (3, "call_0"), (5, "call_0")]
    assert [e.result.llm_content for e in finished] == ["note ran a", "note ran b", "note ran c"]
    made = [session.history[index].tool_calls[0].arguments for index, _ in started]
    assert made == ['{"text": "a"}', '{"text": "b"}', '{"text": "c"}']  # its response's call
    last = provider.requests[-1].messages
    assert [r.content for m in last for r in m.tool_results] == [
        "note ran a",
        "note ran b",
        "note ran c",
    ]
    assert check_history(session.history) == []


def test_a_permission_question_names_the_response_of_its_call(tmp_path):
    tool = RecordingTool("note", Kind.EDIT)
    session, _ = make_session(tmp_path, [asks("a"), asks("b"), Message.assistant("ok")], [tool])
    events = drive(session, "hi", MainToolRunner(ApprovalMode.DEFAULT, interactive=True))
    asked = [e.key for e in events if isinstance(e, PermissionRequested)]
    assert (
        asked
        == [(1, "call_0"), (3, "call_0")]
        == [e.key for e in events if isinstance(e, ToolStarted)]
    )


def test_repeated_ids_across_responses_pair_up():
    history = [Message.user("hi"), asks("a"), answers("A"), asks("b"), answers("B")]
    assert check_history(history) == []


def test_a_result_answering_a_call_of_an_earlier_response_is_a_problem():
    """Its id is known (an earlier response used it) but the message before it asked
    for something else: the API would reject the history."""
    stray = [Message.user("hi"), asks("a"), answers("A"), Message.assistant("ok"), answers("again")]
    assert check_history(stray) == ["tool result call_0 answers no call before it"]
    extra = Message(
        role="user",
        content=[
            ToolResultBlock(tool_call_id="call_1", content="B"),
            ToolResultBlock(tool_call_id="call_0", content="A"),
        ],
    )
    history = [Message.user("hi"), asks("a"), answers("A"), asks("b", "call_1"), extra]
    assert check_history(history) == ["tool result call_0 answers no call before it"]
