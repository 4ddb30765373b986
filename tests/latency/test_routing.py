"""Summary-round routing (D2): the vetoes, the strategies, lean summary rounds, and the
runtime fallback when the fast model's stream starts a tool call."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from qshell.agent.events import TextDelta, TextWithdrawn, TurnFinished
from qshell.agent.session import check_history
from qshell.cancel import CancelToken
from qshell.config import SummaryTier
from qshell.latency.decisions import DecisionLog
from qshell.latency.router import FALLBACK_NOTICE, Router
from qshell.latency.routing import (
    PromptClass,
    Routing,
    Veto,
    classify,
    facts,
    predicts_summary,
    supported_language,
    vetoes,
)
from qshell.llm.base import StreamDone, StreamEvent, StreamText
from qshell.llm.messages import ChatRequest, Message, ToolResultBlock, Usage
from qshell.telemetry import Telemetry
from qshell.tools.base import Kind, ToolContext, ToolResult
from tests.agent.scripted import RecordingTool, call
from tests.agent.test_loop import drive, make_session, yolo

EARLIER = [Message.user("earlier"), Message.assistant("ok")]  # not a fresh session
LIMIT = 100_000


def _note(text: str = "a", id_: str = "c1", name: str = "note") -> Message:
    return Message.assistant("", [call(name, json.dumps({"text": text}), id_)])


def _routed(tmp_path: Path, prompt: str, steps, tools=None, history=EARLIER, **routing):
    """Run a turn with routing settings; returns the session and the provider's requests."""
    tools = tools or [RecordingTool("note", Kind.READ), RecordingTool("edit", Kind.EDIT)]
    session, provider = make_session(tmp_path, steps, tools, history=list(history))
    router = Router(Routing(**routing), DecisionLog(Telemetry(tmp_path / "decisions.jsonl")))
    events = drive(session, prompt, yolo(), router=router)
    return session, provider.requests, events


def _records(tmp_path: Path) -> list[dict]:
    return [json.loads(x) for x in (tmp_path / "decisions.jsonl").read_text().splitlines()]


@pytest.mark.parametrize(
    ("prompt", "kind"),
    [
        ("fix the failing test", PromptClass.ACTION),
        ("把 console.log 都改成 logger.info", PromptClass.ACTION),
        ("explain what this function does", PromptClass.ANALYSIS),
        ("为什么这个测试失败了", PromptClass.ANALYSIS),
        ("对比这两个实现", PromptClass.ANALYSIS),
        ("帮我修复这个 bug", PromptClass.ACTION),
        ("what is in notes.txt?", PromptClass.QUERY),
        ("notes.txt 里有什么", PromptClass.QUERY),
        ("explain it, then fix it", PromptClass.ACTION),
    ],
)
def test_prompts_are_classified_in_english_and_chinese(prompt, kind):
    assert classify(prompt) is kind


@pytest.mark.parametrize(
    ("prompt", "ok"),
    [
        ("list the files", True),
        ("列出文件", True),
        ("mixed 中文 and English", True),
        ("ファイルを一覧して", False),
        ("파일 목록을 보여줘", False),
        ("покажи файлы", False),
    ],
)
def test_only_english_and_chinese_prompts_are_supported(prompt, ok):
    assert supported_language(prompt) is ok


@pytest.mark.parametrize(
    ("prompt", "veto"),
    [
        ("add a line to notes", Veto.FURTHER_ACTION),
        ("在 notes 里新建一行", Veto.FURTHER_ACTION),
        ("why is it so slow?", Veto.DEEP_REASONING),
        ("分析一下这个结果", Veto.DEEP_REASONING),
        ("ファイルの中身は?", Veto.LANG_UNSUPPORTED),
    ],
)
def test_prompt_vetoes_in_english_and_chinese(tmp_path, prompt, veto):
    session, *_ = _routed(tmp_path, prompt, [_note(), Message.assistant("done")])
    assert vetoes(facts(session), context_limit=LIMIT)[0] is veto


def test_a_plain_question_after_one_read_is_a_pure_summary(tmp_path):
    session, *_ = _routed(tmp_path, "what does the note say?", [_note(), Message.assistant("a")])
    assert vetoes(facts(session), context_limit=LIMIT) == []


def test_a_mutator_in_the_batch_vetoes(tmp_path):
    steps = [_note(name="edit"), Message.assistant("done")]
    session, *_ = _routed(tmp_path, "what now?", steps)
    assert vetoes(facts(session), context_limit=LIMIT) == [Veto.WRITE_TOOL]


def test_an_error_in_the_batch_and_an_unresolved_one_in_history_veto(tmp_path):
    bad = Message.assistant("", [call("note", '{"wrong": 1}', "c1")])
    session, *_ = _routed(tmp_path, "what now?", [bad, Message.assistant("hm")])
    turn = facts(session)
    assert turn.batch_error and turn.unresolved_error
    assert vetoes(turn, context_limit=LIMIT) == [Veto.UNRESOLVED_ERROR]
    # a failed call never answered without error by the same call later stays unresolved
    steps = [bad, _note("b", "c2"), Message.assistant("done")]
    session, *_ = _routed(tmp_path, "what now?", steps)
    turn = facts(session)
    assert not turn.batch_error and turn.unresolved_error


def test_an_error_resolved_by_the_same_call_succeeding_does_not_veto(tmp_path):
    session, _ = make_session(tmp_path, [], [RecordingTool("note", Kind.READ)])
    args = '{"text": "a"}'
    session.history = [
        Message.user("what now?"),
        Message.assistant("", [call("note", args, "c1")]),
        Message(
            role="user", content=[ToolResultBlock(tool_call_id="c1", content="E", is_error=True)]
        ),
        Message.assistant("", [call("note", '{ "text":"a" }', "c2")]),  # the same call
        Message(role="user", content=[ToolResultBlock(tool_call_id="c2", content="ok")]),
    ]
    turn = facts(session)
    assert not turn.unresolved_error and not turn.batch_error
    assert turn.tool_count == 2 and turn.distinct_tool_count == 1


def test_an_error_of_an_earlier_turn_does_not_veto_this_turns_summary(tmp_path):
    # seed 004 §3.2: hasUnresolvedError(turn.toolResults, batch), the current turn's; a
    # call that failed turns ago (a missing file) must not keep D2 and D3 off for good
    failed = [
        Message.user("read the missing file"),
        Message.assistant("", [call("note", '{"text": "gone"}', "old")]),
        Message(
            role="user", content=[ToolResultBlock(tool_call_id="old", content="E", is_error=True)]
        ),
        Message.assistant("it does not exist"),
    ]
    steps = [_note("b", "c2"), Message.assistant("it says b")]
    session, *_ = _routed(tmp_path, "what does the note say?", steps, history=failed)
    turn = facts(session)
    assert not turn.unresolved_error and not turn.batch_error
    assert vetoes(turn, context_limit=LIMIT) == []
    assert predicts_summary(session)


def test_three_distinct_calls_and_long_output_veto(tmp_path):
    calls = [call("note", json.dumps({"text": t}), f"c{t}") for t in "abc"]
    steps = [Message.assistant("", calls), Message.assistant("done")]
    session, *_ = _routed(tmp_path, "what do they say?", steps)
    assert vetoes(facts(session), context_limit=LIMIT) == [Veto.CROSS_RESULT]
    long = "x" * 20_000
    session, *_ = _routed(tmp_path, "what does it say?", [_note(long), Message.assistant("x")])
    turn = facts(session)
    assert turn.output_tokens_est > 4000
    assert vetoes(turn, context_limit=LIMIT) == [Veto.OUTPUT_TOKENS]
    assert vetoes(turn, context_limit=10) == [Veto.OUTPUT_TOKENS, Veto.CONTEXT]


def test_a_new_session_and_a_compacted_history_veto(tmp_path):
    session, *_ = _routed(tmp_path, "what?", [_note(), Message.assistant("x")], history=[])
    assert vetoes(facts(session), context_limit=LIMIT) == [Veto.COMPACT_OR_CLEAR]
    compacted = [
        Message.user("<summary of the earlier conversation>\n\nwe read notes"),
        Message.assistant("Understood."),
    ]
    session, *_ = _routed(tmp_path, "what?", [_note(), Message.assistant("x")], history=compacted)
    assert vetoes(facts(session), context_limit=LIMIT) == [Veto.COMPACT_OR_CLEAR]


def test_always_primary_sends_the_requests_of_today(tmp_path):
    _, requests, _ = _routed(
        tmp_path, "what?", [_note(), Message.assistant("x")], fast_model="small"
    )
    assert [r.model for r in requests] == ["m", "m"]
    assert not any(r.no_tool_calls or r.reasoning_off for r in requests)


def test_auto_sends_a_pure_summary_to_the_fast_model_and_a_vetoed_round_to_the_primary(tmp_path):
    steps = [_note(), Message.assistant("x")]
    _, requests, _ = _routed(
        tmp_path, "what?", steps, strategy=SummaryTier.AUTO, fast_model="small"
    )
    assert [r.model for r in requests] == ["m", "small"]
    record = _records(tmp_path)[-1]
    assert record["decision"] == "fast" and record["tier_actual"] == "fast"
    assert record["fast_ttft_ms"] is not None and record["position"] == "summary"
    steps = [_note(), Message.assistant("x")]
    _, requests, _ = _routed(tmp_path, "why?", steps, strategy=SummaryTier.AUTO, fast_model="small")
    assert [r.model for r in requests] == ["m", "m"]
    assert _records(tmp_path)[-1]["veto_reason"] == "deep_reasoning"


def test_always_fast_ignores_vetoes_and_no_fast_model_means_primary(tmp_path):
    steps = [_note(), Message.assistant("x")]
    _, requests, _ = _routed(
        tmp_path, "fix it", steps, strategy=SummaryTier.ALWAYS_FAST, fast_model="small"
    )
    assert [r.model for r in requests] == ["m", "small"]
    steps = [_note(), Message.assistant("x")]
    _, requests, _ = _routed(tmp_path, "what?", steps, strategy=SummaryTier.ALWAYS_FAST)
    assert [r.model for r in requests] == ["m", "m"]


def test_lean_summary_rounds_set_the_knobs_only_on_a_predicted_pure_summary(tmp_path):
    steps = [_note(), Message.assistant("x")]
    _, requests, _ = _routed(tmp_path, "what?", steps, lean=True)
    first, summary = requests
    assert not first.no_tool_calls and not first.reasoning_off
    assert summary.no_tool_calls and summary.reasoning_off and summary.model == "m"
    steps = [_note(), Message.assistant("x")]
    _, requests, _ = _routed(tmp_path, "fix it", steps, lean=True)
    assert not requests[1].no_tool_calls


def test_a_lean_round_that_still_calls_a_tool_runs_it(tmp_path):
    steps = [_note("a", "c1"), _note("b", "c2"), Message.assistant("x")]
    session, requests, events = _routed(tmp_path, "what?", steps, lean=True)
    assert requests[1].no_tool_calls and isinstance(events[-1], TurnFinished)
    assert events[-1].text == "x" and check_history(session.history) == []


def test_a_fast_round_that_calls_a_tool_is_retried_on_the_primary(tmp_path):
    steps = [_note("a", "c1"), Message.assistant("let me look", [call("note", "{}", "c9")])]
    steps.append(Message.assistant("the answer"))
    session, requests, events = _routed(
        tmp_path, "what?", steps, strategy=SummaryTier.ALWAYS_FAST, fast_model="small"
    )
    assert [r.model for r in requests] == ["m", "small", "m"]
    assert requests[2].messages == requests[1].messages  # the user content is not repeated
    assert TextWithdrawn(FALLBACK_NOTICE) in events
    end = events[-1]
    assert isinstance(end, TurnFinished) and end.text == "the answer"
    roles = [m.role for m in session.history]
    assert roles == ["user", "assistant", "user", "assistant", "user", "assistant"]
    assert "let me look" not in [m.text for m in session.history]
    assert check_history(session.history) == []
    record = _records(tmp_path)[-1]
    assert record["fallback_triggered"] and record["fallback_reason"] == "tool_call_seen"
    assert record["tier_requested"] == "fast" and record["tier_actual"] == "primary"
    assert record["fast_ttft_ms"] is not None and record["primary_ttft_ms"] is not None
    assert record["fast_tokens_consumed"] == 2 and record["fast_tokens_source"] == "usage"


@dataclass(frozen=True)
class StreamedCall:
    """A provider's tool-call event, of the kind stream-ahead providers yield."""

    index: int


def test_a_fast_stream_is_cut_at_its_first_tool_call_event_and_estimated(tmp_path):
    closed = []

    def fast(request: ChatRequest, cancel: CancelToken) -> Iterator[StreamEvent]:
        try:
            yield StreamText("12345678")
            yield StreamedCall(0)  # type: ignore[misc]
            yield StreamDone(Message.assistant("never"), Usage(), "end_turn")
        finally:
            closed.append(True)

    steps = [_note("a", "c1"), fast, Message.assistant("primary")]
    _, requests, events = _routed(
        tmp_path, "what?", steps, strategy=SummaryTier.ALWAYS_FAST, fast_model="small"
    )
    assert closed == [True] and [r.model for r in requests] == ["m", "small", "m"]
    assert TextDelta("12345678") in events and events[-1].text == "primary"
    record = _records(tmp_path)[-1]
    assert record["fast_tokens_consumed"] == 2 and record["fast_tokens_source"] == "estimated"


def test_a_speculative_fork_writes_no_decisions(tmp_path):
    session, *_ = _routed(tmp_path, "what?", [Message.assistant("x")])
    before = len(_records(tmp_path))
    fork = session.fork()  # a speculation runs it without a router: no log, primary only
    fork.provider.steps.append(Message.assistant("y"))
    drive(fork, "and?", yolo())
    assert len(_records(tmp_path)) == before


class TerminalTool(RecordingTool):
    """Its results are already in the form the user wants (`result_is_terminal`)."""

    def run(self, args: Any, ctx: ToolContext) -> ToolResult:
        return ToolResult(llm_content=f"{self.name}: {args.text}", result_is_terminal=True)


def test_the_round_after_a_batch_records_that_batchs_signals_and_counts(tmp_path):
    tools = [TerminalTool("note", Kind.READ), RecordingTool("edit", Kind.EDIT)]
    steps = [_note(), _note("b", "c2", name="edit"), Message.assistant("done")]
    _routed(tmp_path, "what now?", steps, tools=tools)
    first, middle, summary = _records(tmp_path)
    assert first["signal_resultIsTerminal"] is False and first["batches_before"] == 0
    assert middle["signal_resultIsTerminal"] is True and middle["position"] == "middle"
    assert middle["tool_count"] == 1 and middle["has_write_tool"] is False
    assert summary["signal_resultIsTerminal"] is False and summary["has_write_tool"] is True
    assert summary["tool_count"] == 2 and summary["veto_reason"] == "write_tool"
    assert summary["batches_before"] == 2 and summary["signal_skipLlmRound"] is False
