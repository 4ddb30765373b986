"""The loop acts on the stop reason: a round that did not finish (cut at the output limit,
refused, filtered) runs none of its calls, answers each "not run", ends the turn with a
note, and the next request leaves a call that was cut off out; reasoning streams as its
own event and stays in the history."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from qshell.agent.events import ReasoningDelta, TextDelta, TurnFinished
from qshell.agent.session import check_history
from qshell.cancel import CancelToken
from qshell.llm.anthropic import build_body as anthropic_body
from qshell.llm.base import StreamDone, StreamEvent, StreamReasoning, StreamText
from qshell.llm.messages import ChatRequest, Message, ReasoningBlock, StopReason, ToolCall, Usage
from qshell.llm.openai import build_body as openai_body
from qshell.tools.base import Kind
from tests.agent.scripted import RecordingTool
from tests.agent.test_loop import drive, make_session, yolo

CUT = ToolCall(id="c1", name="note", arguments='{"text": "a very long no', complete=False)


def ending(message: Message, stop: StopReason, native: str | None = None):
    def stream(request: ChatRequest, cancel: CancelToken) -> Iterator[StreamEvent]:
        for block in message.reasoning_blocks:
            yield StreamReasoning(block.text)
        if message.text:
            yield StreamText(message.text)
        yield StreamDone(message, Usage(prompt_tokens=10, completion_tokens=5), stop, native)

    return stream


def test_a_call_cut_off_by_the_output_limit_never_runs_and_the_turn_says_so(tmp_path):
    tool = RecordingTool("note", Kind.EDIT)
    cut = Message.assistant("Writing it now.", [CUT])
    session, provider = make_session(
        tmp_path, [ending(cut, "max_tokens", "length"), Message.assistant("ok")], [tool]
    )
    events = drive(session, "write the note", yolo())
    end = events[-1]
    assert isinstance(end, TurnFinished) and end.stop_reason == "max_tokens"
    assert not end.finished and end.text == "Writing it now."
    assert "output limit" in end.note and "maxTokens" in end.note and "note did not run" in end.note
    assert tool.ran == []
    # the history keeps what was said, the cut arguments included, and stays valid
    assert session.history[1].tool_calls == [CUT]
    assert session.history[2].tool_results[0].is_error
    assert "not run" in session.history[2].tool_results[0].content
    assert check_history(session.history) == []
    # the next turn's request leaves the cut call and its result out
    drive(session, "try again in two parts", yolo())
    sent = provider.requests[-1]
    for body in (openai_body(sent), anthropic_body(sent)):
        assert "c1" not in str(body["messages"])
        assert "Writing it now." in str(body["messages"])


@pytest.mark.parametrize(
    ("stop", "said"),
    [("refusal", "declined"), ("content_filter", "content filter"), ("other", "before it was")],
)
def test_an_answer_that_did_not_finish_ends_the_turn_with_its_reason(tmp_path, stop, said):
    tool = RecordingTool("note", Kind.READ)
    message = Message.assistant("I can't", [ToolCall(id="c9", name="note", arguments="{}")])
    session, _ = make_session(tmp_path, [ending(message, stop, "network_error")], [tool])
    end = drive(session, "do it", yolo())[-1]
    assert isinstance(end, TurnFinished) and end.stop_reason == stop and said in end.note
    assert tool.ran == [] and check_history(session.history) == []


def test_a_finished_answer_has_no_note(tmp_path):
    session, _ = make_session(tmp_path, [Message.assistant("fine")], [])
    end = drive(session, "hi", yolo())[-1]
    assert isinstance(end, TurnFinished) and end.finished and end.note == ""


def test_reasoning_streams_as_its_own_event_and_stays_in_the_history(tmp_path):
    thought = ReasoningBlock(text="the user greets me", source="reasoning_content")
    message = Message.assistant("hello", reasoning=[thought])
    session, _ = make_session(tmp_path, [ending(message, "end_turn")], [])
    events = drive(session, "hi", yolo())
    assert [e.text for e in events if isinstance(e, ReasoningDelta)] == ["the user greets me"]
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["hello"]
    assert session.history[-1].reasoning == "the user greets me"


@pytest.mark.parametrize(
    "cut",
    [
        Message.assistant(reasoning=[ReasoningBlock(text="Let me think", source="thinking")]),
        Message.assistant(
            "", [CUT], reasoning=[ReasoningBlock(text="I'll note", source="reasoning_content")]
        ),
    ],
    ids=["reasoning-only", "reasoning-and-cut-call"],
)
def test_a_round_cut_off_while_reasoning_is_not_sent_as_an_empty_assistant_message(tmp_path, cut):
    """Mistral rejects an assistant message with neither content nor calls; the round is
    left out of the next request as a round that said nothing (or only a cut call) is."""
    tool = RecordingTool("note", Kind.EDIT)
    session, provider = make_session(
        tmp_path, [ending(cut, "max_tokens", "length"), Message.assistant("ok")], [tool]
    )
    drive(session, "write the note", yolo())
    drive(session, "go on", yolo())
    assert session.history[1] == cut  # the history keeps what was said
    sent = [m for m in openai_body(provider.requests[-1])["messages"] if m["role"] != "system"]
    assert sent == [
        {"role": "user", "content": "write the note"},
        {"role": "user", "content": "go on"},
    ]
