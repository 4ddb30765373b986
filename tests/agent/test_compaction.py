"""Compaction: /compact, automatic compaction at turn start, and retry after ContextTooLong."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from qshell.agent import transcript as transcripts
from qshell.agent.compaction import (
    ACKNOWLEDGEMENT,
    SUMMARY_HEADER,
    SUMMARY_REQUEST,
    CompactionError,
    compact,
    needs_compaction,
    prepare_summary,
)
from qshell.agent.events import FailureKind, HistoryCompacted, TurnFailed, TurnFinished
from qshell.agent.loop import run_turn
from qshell.agent.session import check_history
from qshell.cancel import CancelToken
from qshell.config import ApprovalMode
from qshell.errors import Cancelled, ContextTooLong, ProviderUnavailable
from qshell.llm.base import StreamDone
from qshell.llm.messages import Message, ToolResultBlock
from qshell.llm.messages import Usage as LlmUsage
from qshell.permissions.runner import MainToolRunner
from qshell.tools.base import Kind
from tests.agent.scripted import RecordingTool, ScriptedProvider, call, session_for
from tests.e2e.helpers import provider_env, run_qshell
from tests.fakes.llm_server import (
    Reply,
    ToolCallSpec,
    Usage,
    always,
    has_tool_result,
    last_user_text_contains,
)

EARLIER = [
    Message.user("add a flag"),
    Message.assistant("", [call("note", '{"text": "a"}', "c1")]),
    Message(role="user", content=[ToolResultBlock(tool_call_id="c1", content="noted")]),
    Message.assistant("added --fast to cli.py"),
]


def make_session(tmp_path: Path, steps, *, history=EARLIER, transcript=None, **kw):
    provider = ScriptedProvider(steps)
    tools = [RecordingTool("note", Kind.READ)]
    session = session_for(
        provider,
        tmp_path,
        tools,
        home=tmp_path / "home",
        history=history,
        transcript=transcript,
        **kw,
    )
    return session, provider


def drive(session, prompt):
    runner = MainToolRunner(ApprovalMode.YOLO, interactive=False)
    return list(run_turn(session, prompt, runner, CancelToken()))


def test_compact_replaces_the_history_with_the_summary_and_an_acknowledgement(tmp_path):
    transcript = transcripts.Transcript.create(tmp_path / "t", "s1", {"system_prompt": "sys"})
    for message in EARLIER:
        transcript.write_message(message)
    summary_reply = Message.assistant("Goal: a --fast flag.", [call("note", '{"text": "x"}')])
    session, provider = make_session(tmp_path, [summary_reply], transcript=transcript)
    event = compact(session, CancelToken(), reason="by hand", instructions="focus on cli.py")
    assert event == HistoryCompacted(reason="by hand", messages_before=4, messages_after=2)
    assert session.history == [
        Message.user(f"{SUMMARY_HEADER}\n\nGoal: a --fast flag."),
        Message.assistant(ACKNOWLEDGEMENT),
    ]
    request = provider.requests[0]
    assert request.system == "sys" and request.model == "m"
    assert [t.name for t in request.tools] == ["note"]
    assert request.messages[:4] == EARLIER
    assert "summary" in request.messages[4].text and "focus on cli.py" in request.messages[4].text
    assert session.stats.usage.prompt_tokens == 10 and session.stats.rounds == 1
    transcript.close()
    records = [json.loads(line) for line in transcript.path.read_text().splitlines()]
    assert [r["type"] for r in records[-4:]] == ["usage", "compacted", "message", "message"]
    assert records[-3]["reason"] == "by hand" and records[-3]["messages_before"] == 4
    loaded = transcripts.load(transcript.path)
    assert loaded.messages == session.history
    assert loaded.last_prompt_tokens == session.stats.last_prompt_tokens > 0


def test_a_trailing_user_message_is_joined_with_the_summary_request(tmp_path):
    history = [*EARLIER, Message.user("a prompt whose turn failed")]
    session, provider = make_session(tmp_path, [Message.assistant("summary")], history=history)
    compact(session, CancelToken(), reason="r")
    sent = provider.requests[0].messages
    assert len(sent) == 5 and sent[-1].role == "user"
    assert sent[-1].text.startswith("a prompt whose turn failed")


@pytest.mark.parametrize(
    "step", [ProviderUnavailable("down"), Message.assistant(""), Message.assistant("  ")]
)
def test_a_failed_compaction_leaves_the_history_untouched(tmp_path, step):
    session, _ = make_session(tmp_path, [step])
    with pytest.raises((ProviderUnavailable, CompactionError)):
        compact(session, CancelToken(), reason="r")
    assert session.history == EARLIER


@pytest.mark.parametrize("stop", ["max_tokens", "refusal", "content_filter"])
def test_a_summary_that_did_not_finish_leaves_the_history_untouched(tmp_path, stop):
    def unfinished(request, cancel):
        message = Message.assistant("The user asked to add a fl")
        yield StreamDone(message, LlmUsage(prompt_tokens=5, completion_tokens=5), stop)

    session, _ = make_session(tmp_path, [unfinished])
    with pytest.raises(CompactionError, match="did not finish"):
        compact(session, CancelToken(), reason="r")
    assert session.history == EARLIER


def test_a_cancelled_compaction_raises_cancelled_and_keeps_the_history(tmp_path):
    def cancelled(request, cancel):
        raise Cancelled()
        yield

    session, _ = make_session(tmp_path, [cancelled])
    with pytest.raises(Cancelled):
        compact(session, CancelToken(), reason="r")
    assert session.history == EARLIER


def test_needs_compaction_counts_the_last_round_and_the_incoming_text(tmp_path):
    session, _ = make_session(tmp_path, [], context_window=1000, compact_threshold=0.5)
    session.stats.last_prompt_tokens = 480
    assert not needs_compaction(session, "x" * 80)  # 480 + 20 = 500, not above 500
    assert needs_compaction(session, "x" * 84)
    short, _ = make_session(tmp_path, [], history=EARLIER[:3], context_window=1000)
    short.stats.last_prompt_tokens = 10_000
    assert not needs_compaction(short, "hi")


def test_record_round_tracks_the_size_of_the_last_round(tmp_path):
    session, _ = make_session(tmp_path, [Message.assistant("ok")])
    drive(session, "hi")
    assert session.stats.last_prompt_tokens == 12


def test_a_turn_near_the_context_window_compacts_before_the_prompt(tmp_path):
    steps = [Message.assistant("the summary"), Message.assistant("answer")]
    session, provider = make_session(
        tmp_path, steps, context_window=100, compact_threshold=0.5, last_prompt_tokens=60
    )
    events = drive(session, "next step")
    assert isinstance(events[0], HistoryCompacted)
    assert events[0].reason == "the conversation was close to the model's context window"
    assert isinstance(events[-1], TurnFinished) and events[-1].text == "answer"
    assert provider.requests[0].messages[:4] == EARLIER
    assert [m.text for m in provider.requests[1].messages] == [
        f"{SUMMARY_HEADER}\n\nthe summary",
        ACKNOWLEDGEMENT,
        "next step",
    ]
    assert events[-1].usage.prompt_tokens == 20  # the summary round counts in the turn


def test_a_first_round_that_is_too_long_compacts_and_retries_once(tmp_path):
    steps = [ContextTooLong("too long"), Message.assistant("summary"), Message.assistant("done")]
    session, provider = make_session(tmp_path, steps)
    events = drive(session, "big prompt")
    compacted = [e for e in events if isinstance(e, HistoryCompacted)]
    assert len(compacted) == 1 and compacted[0].reason == "the model's context window was exceeded"
    assert compacted[0].messages_before == 5 and compacted[0].messages_after == 3
    assert isinstance(events[-1], TurnFinished) and events[-1].text == "done"
    assert provider.requests[1].messages[:4] == EARLIER  # the prompt is not summarised
    assert [m.text for m in session.history][2:] == ["big prompt", "done"]
    assert check_history(session.history) == []


def test_a_second_context_too_long_ends_the_turn(tmp_path):
    steps = [ContextTooLong("too long"), Message.assistant("summary"), ContextTooLong("still")]
    session, _ = make_session(tmp_path, steps)
    events = drive(session, "big prompt")
    assert isinstance(events[-1], TurnFailed)
    assert events[-1].kind is FailureKind.CONTEXT_TOO_LONG
    assert [m.text for m in session.history][2:] == ["big prompt"]


def test_too_long_without_earlier_history_fails_without_compacting(tmp_path):
    session, provider = make_session(tmp_path, [ContextTooLong("too long")], history=[])
    events = drive(session, "huge")
    assert [type(e) for e in events] == [TurnFailed]
    assert len(provider.requests) == 1


def test_a_compaction_failure_inside_a_turn_fails_the_turn_and_keeps_the_history(tmp_path):
    steps = [ContextTooLong("too long"), ProviderUnavailable("down")]
    session, _ = make_session(tmp_path, steps)
    events = drive(session, "big prompt")
    assert isinstance(events[-1], TurnFailed) and events[-1].kind is FailureKind.UNAVAILABLE
    assert session.history == [*EARLIER, Message.user("big prompt")]
    auto, _ = make_session(
        tmp_path,
        [ProviderUnavailable("down")],
        context_window=100,
        compact_threshold=0.5,
        last_prompt_tokens=90,
    )
    events = drive(auto, "next")
    assert [type(e) for e in events] == [TurnFailed] and auto.history == EARLIER


def test_print_mode_continue_compacts_a_long_session_first(llm_server, tmp_path):
    project = tmp_path / "proj"
    project.mkdir()
    (project / "hello.txt").write_text("hello\n")
    env = {**provider_env(llm_server, "openai"), "QSHELL_CONTEXT_WINDOW": "1000"}
    big = Usage(prompt_tokens=5000, completion_tokens=20)
    llm_server.add_rule(has_tool_result("hello"), Reply.text("it says hello", usage=big))
    llm_server.add_rule(
        always(), Reply.tool_calls([ToolCallSpec("read_file", {"path": "hello.txt"}, id="c1")])
    )
    first = run_qshell("-p", "read hello", cwd=project, env=env)
    assert first.code == 0, first.stderr
    llm_server.clear_rules()
    llm_server.add_rule(last_user_text_contains("summary"), Reply.text("SUMMARY: read hello.txt"))
    llm_server.add_rule(always(), Reply.text("continued"))
    second = run_qshell("-p", "--continue", "and now?", cwd=project, env=env)
    assert (second.code, second.stdout) == (0, "continued\n"), second.stderr
    requests = llm_server.requests
    assert len(requests) == 4, "the continued turn did not compact first"
    summary_request, real_request = requests[2:]
    assert "read hello" in summary_request.all_text and "summary" in summary_request.last_user_text
    texts = [turn.text for turn in real_request.turns if turn.role != "system"]
    assert texts[0] == f"{SUMMARY_HEADER}\n\nSUMMARY: read hello.txt"
    assert texts[1:] == [ACKNOWLEDGEMENT, "and now?"]


def wait_for_requests(provider: ScriptedProvider, count: int) -> None:
    deadline = time.monotonic() + 10
    while len(provider.requests) < count and time.monotonic() < deadline:
        time.sleep(0.01)
    assert len(provider.requests) >= count


def written_ahead(tmp_path: Path, steps, *, tokens: int, window: int = 100):
    """A session at `tokens` of a `window`-token context (threshold 0.5) whose last turn has
    just started its summary ahead, that summary request already at the provider."""
    session, provider = make_session(
        tmp_path,
        steps,
        context_window=window,
        compact_threshold=0.5,
        last_prompt_tokens=tokens,
        summary_ahead=True,
    )
    assert prepare_summary(session)
    wait_for_requests(provider, 1)
    return session, provider


def takes_the_summary(session, provider, kept: list[str]) -> None:
    """The next turn compacts with the summary written ahead, sending no round of its own
    first: its request is the summary, the acknowledgement, the `kept` messages and itself."""
    events = drive(session, "next step")
    assert isinstance(events[0], HistoryCompacted)
    assert len(provider.requests) == 2
    assert [m.text for m in provider.requests[1].messages] == [
        f"{SUMMARY_HEADER}\n\nthe summary",
        ACKNOWLEDGEMENT,
        *kept,
        "next step",
    ]


def test_the_summary_written_ahead_is_what_the_turn_that_compacts_takes(tmp_path):
    """After a turn at 45 of a 50-token threshold (past 0.8 of it) the summary round goes
    out in the background; the next turn, past the threshold, takes it: no round of its
    own before the prompt, the same history after."""
    steps = [Message.assistant("the summary"), Message.assistant("answer")]
    session, provider = written_ahead(tmp_path, steps, tokens=45)
    assert not prepare_summary(session)  # one for this history already
    assert provider.requests[0].messages[:4] == EARLIER
    assert SUMMARY_REQUEST in provider.requests[0].messages[-1].text
    session.stats.last_prompt_tokens = 60
    takes_the_summary(session, provider, [])


def test_a_summary_of_a_history_that_changed_since_is_dropped(tmp_path):
    steps = [Message.assistant("old summary"), Message.assistant("new summary")]
    steps.append(Message.assistant("answer"))
    session, provider = written_ahead(tmp_path, steps, tokens=60)
    session.history[0] = Message.user("add two flags")  # /undo, a resumed edit: not the same
    events = drive(session, "next step")
    assert isinstance(events[0], HistoryCompacted)
    assert len(provider.requests) == 3  # it compacted itself
    assert provider.requests[2].messages[0].text == f"{SUMMARY_HEADER}\n\nnew summary"


@pytest.mark.parametrize(("tokens", "ahead"), [(30, True), (45, False)])
def test_nothing_is_written_ahead_below_its_point_or_where_not_asked(tmp_path, tokens, ahead):
    session, provider = make_session(
        tmp_path,
        [Message.assistant("summary")],
        context_window=100,
        compact_threshold=0.5,
        last_prompt_tokens=tokens,
        summary_ahead=ahead,
    )
    assert not prepare_summary(session)
    assert provider.requests == []


def test_a_summary_written_ahead_serves_the_turns_after_it(tmp_path):
    """A turn more, short: the summary under way still serves (no second one is written),
    and the compacted history keeps that turn whole after it."""
    steps = [Message.assistant("the summary"), Message.assistant("answer")]
    session, provider = written_ahead(tmp_path, steps, tokens=450, window=1000)
    session.append(Message.user("more"))
    session.append(Message.assistant("ok"))
    assert not prepare_summary(session)
    session.stats.last_prompt_tokens = 600
    takes_the_summary(session, provider, ["more", "ok"])
