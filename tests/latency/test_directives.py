"""Post-execution directives (D1): a batch whose every result skips the next model round
ends the turn with the tool output as its answer, and the next turn is a valid request."""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import BaseModel

from qshell.agent import compaction
from qshell.agent.events import RoundFinished, TextDelta, ToolFinished, ToolStarted, TurnFinished
from qshell.agent.loop import PendingCalls, run_turn
from qshell.agent.session import check_history
from qshell.cancel import CancelToken
from qshell.latency.directives import Directives
from qshell.llm import anthropic, openai
from qshell.llm.messages import Message
from qshell.tools.base import Kind, ToolContext, ToolResult
from qshell.tools.read_file import ReadFileTool
from qshell.tools.registered import adapt
from tests.agent.scripted import NoteArgs, RecordingTool, SkippingTool, call
from tests.agent.test_loop import drive, make_session, yolo


def _one_call(name: str, text: str = "a", id_: str = "c1") -> Message:
    return Message.assistant("", [call(name, f'{{"text": "{text}"}}', id_)])


def test_a_batch_that_skips_ends_the_turn_with_the_tool_output_as_the_answer(tmp_path):
    session, provider = make_session(tmp_path, [_one_call("ls")], [SkippingTool("ls", Kind.READ)])
    events = drive(session, "list it", yolo())
    kinds = [type(e) for e in events]
    assert kinds == [RoundFinished, ToolStarted, ToolFinished, TextDelta, TurnFinished]
    end = events[-1]
    assert isinstance(end, TurnFinished) and end.text == "ls: a" and end.skipped_round
    assert end.rounds == 1 and end.finished
    assert events[3] == TextDelta("ls: a")
    assert len(provider.requests) == 1
    # the history ends with the results and no assistant answer, and is valid
    assert [m.role for m in session.history] == ["user", "assistant", "user"]
    assert session.history[-1].tool_results[0].content == "ls: a"
    assert check_history(session.history) == []


def test_every_result_of_the_batch_must_skip(tmp_path):
    calls = [call("ls", '{"text": "a"}', "c1"), call("note", '{"text": "b"}', "c2")]
    tools = [SkippingTool("ls", Kind.READ), RecordingTool("note", Kind.READ)]
    steps = [Message.assistant("", calls), Message.assistant("both")]
    session, provider = make_session(tmp_path, steps, tools)
    end = drive(session, "go", yolo())[-1]
    assert isinstance(end, TurnFinished) and end.text == "both" and not end.skipped_round
    assert len(provider.requests) == 2


def test_two_skipping_results_join_in_call_order(tmp_path):
    calls = [call("ls", '{"text": "a"}', "c1"), call("ls", '{"text": "b"}', "c2")]
    session, _ = make_session(
        tmp_path, [Message.assistant("", calls)], [SkippingTool("ls", Kind.READ)]
    )
    end = drive(session, "go", yolo())[-1]
    assert isinstance(end, TurnFinished) and end.text == "ls: a\n\nls: b"


def test_a_failed_result_goes_back_to_the_model_even_when_it_asks_to_skip(tmp_path):
    steps = [_one_call("ls", "fail"), Message.assistant("it broke")]
    session, provider = make_session(tmp_path, steps, [SkippingTool("ls", Kind.READ)])
    end = drive(session, "go", yolo())[-1]
    assert isinstance(end, TurnFinished) and end.text == "it broke"
    assert len(provider.requests) == 2


def test_always_summarize_turns_the_directives_off(tmp_path):
    steps = [_one_call("ls"), Message.assistant("summary")]
    session, provider = make_session(
        tmp_path,
        steps,
        [SkippingTool("ls", Kind.READ)],
        directives=Directives.of(always_summarize=True, allowlist=()),
    )
    end = drive(session, "go", yolo())[-1]
    assert isinstance(end, TurnFinished) and end.text == "summary" and not end.skipped_round
    assert len(provider.requests) == 2


class _PluginLs:
    name = "pls"
    kind = Kind.READ
    description = "a plugin's listing"
    Args: ClassVar[type[BaseModel]] = NoteArgs

    def run(self, args: Any, ctx: ToolContext) -> ToolResult:
        return ToolResult(llm_content=f"plugin {args.text}", skip_llm_round=True)


def test_a_plugin_tool_skips_only_when_allowlisted(tmp_path):
    tool = adapt("p", _PluginLs())
    steps = [_one_call("pls"), Message.assistant("read back")]
    session, provider = make_session(tmp_path, steps, [tool])
    end = drive(session, "go", yolo())[-1]
    assert isinstance(end, TurnFinished) and end.text == "read back"
    assert len(provider.requests) == 2

    allowed = Directives.of(always_summarize=False, allowlist=["pls"])
    session, provider = make_session(tmp_path, [_one_call("pls")], [tool], directives=allowed)
    end = drive(session, "go", yolo())[-1]
    assert isinstance(end, TurnFinished) and end.text == "plugin a" and end.skipped_round
    assert len(provider.requests) == 1


def test_a_resumed_batch_that_skips_ends_the_turn(tmp_path):
    tool = SkippingTool("ls", Kind.READ)
    session, provider = make_session(tmp_path, [], [tool])
    session.append(Message.user("go"))
    ask = _one_call("ls", "z")
    session.append(ask)
    pending = PendingCalls(ask.tool_calls)
    events = list(run_turn(session, None, yolo(), CancelToken(), pending=pending))
    end = events[-1]
    assert isinstance(end, TurnFinished) and end.text == "ls: z" and end.rounds == 0
    assert provider.requests == [] and check_history(session.history) == []


def test_the_turn_after_a_skip_is_a_valid_request_for_both_providers(tmp_path):
    steps = [_one_call("ls"), Message.assistant("next answer")]
    session, provider = make_session(tmp_path, steps, [SkippingTool("ls", Kind.READ)])
    drive(session, "list it", yolo())
    end = drive(session, "and now?", yolo())[-1]
    assert isinstance(end, TurnFinished) and end.text == "next answer"
    request = provider.requests[-1]
    # nothing synthetic was added: the prompt follows the tool results
    assert [m.role for m in request.messages] == ["user", "assistant", "user", "user"]
    roles = [m["role"] for m in anthropic.build_body(request)["messages"]]
    assert roles == ["user", "assistant", "user"]  # strict alternation, results then prompt
    last = anthropic.build_body(request)["messages"][-1]["content"]
    assert [b["type"] for b in last] == ["tool_result", "text"]
    roles = [m["role"] for m in openai.build_body(request)["messages"]]
    assert roles == ["system", "user", "assistant", "tool", "user"]


def test_read_file_is_terminal_but_does_not_skip(tmp_path):
    (tmp_path / "a.txt").write_text("hello\n")
    steps = [Message.assistant("", [call("read_file", '{"path": "a.txt"}', "c1")])]
    session, provider = make_session(
        tmp_path, [*steps, Message.assistant("it says hello")], [ReadFileTool()]
    )
    events = drive(session, "read a.txt", yolo())
    finished = next(e for e in events if isinstance(e, ToolFinished))
    assert finished.result.result_is_terminal and not finished.result.skip_llm_round
    assert len(provider.requests) == 2


def test_compacting_after_a_skip_sends_one_user_message_with_the_results(tmp_path):
    steps = [_one_call("ls"), Message.assistant("the summary")]
    session, provider = make_session(tmp_path, steps, [SkippingTool("ls", Kind.READ)])
    drive(session, "list it", yolo())
    compaction.compact(session, CancelToken(), reason="manual")
    sent = provider.requests[-1].messages
    assert [m.role for m in sent] == ["user", "assistant", "user"]
    assert sent[-1].tool_results and "summary" in sent[-1].text.lower()
    assert check_history(session.history) == []
