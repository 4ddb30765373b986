"""D3 at the Conversation, over the scripted server and the real providers: a summary
cancelled while it streams leaves no trace — no assistant message in the history or the
transcript, the tool results kept — and the next turn is a valid request for OpenAI
(a `tool` message, then the prompt) and Anthropic (strict alternation: the results and the
prompt in one user message). The race — the cancel arriving together with the last
chunk — keeps the whole summary or drops the whole of it, decided deterministically by a
provider wrapper that cancels at a chosen chunk."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from qshell import compose, sessions
from qshell.agent.conversation import Conversation
from qshell.agent.events import (
    Event,
    FailureKind,
    SummaryStarted,
    TextDelta,
    TurnFailed,
    TurnFinished,
)
from qshell.agent.session import SessionRequest, check_history
from qshell.cancel import CancelToken
from qshell.config import load_settings
from qshell.llm.base import Provider, StreamDone, StreamEvent, StreamText
from qshell.llm.messages import ChatRequest
from tests.e2e.helpers import provider_env
from tests.fakes.llm_server import Reply, ToolCallSpec, has_tool_result, last_user_text_contains

SUMMARY = "The file says hello world, and nothing else."
PROTOCOLS = ["openai", "anthropic"]


def open_conversation(server, protocol: str, tmp_path: Path) -> Conversation:
    """An interactive conversation opened the way the CLI opens one, D3 on."""
    root = (tmp_path / "project").resolve()
    root.mkdir()
    (root / "hello.txt").write_text("hello world\n")
    environ = {
        "QSHELL_HOME": str(tmp_path / "qshell-home"),
        "HOME": str(tmp_path / "home"),
        "QSHELL_MAX_RETRIES": "0",
        "QSHELL_SUMMARIZE_IN_BACKGROUND": "1",
        **provider_env(server, protocol),
    }
    settings = load_settings(project_root=root, environ=environ)
    opener = sessions.SessionOpener(settings, root=root, environ=environ)
    request = SessionRequest()
    return compose.open_interactive(
        settings, request, open_session=opener, environ=environ
    ).conversation


def script(server) -> None:
    server.add_rule(last_user_text_contains("second"), Reply.text("second answer"))
    server.add_rule(has_tool_result(), Reply.text(SUMMARY))
    server.add_rule(
        last_user_text_contains("read"),
        Reply.tool_calls([ToolCallSpec("read_file", {"path": "hello.txt"})]),
    )


def transcript_records(conversation: Conversation) -> list[dict]:
    transcript = conversation.session.transcript
    assert transcript is not None
    return [json.loads(line) for line in transcript.path.read_text().splitlines()]


def assistant_texts(conversation: Conversation) -> list[str]:
    """The text of every assistant message, in the history and in the transcript."""
    texts = [m.text for m in conversation.session.history if m.role == "assistant"]
    for record in transcript_records(conversation):
        message = record["message"] if record.get("type") == "message" else {}
        if message.get("role") == "assistant":
            texts += [b.get("text", "") for b in message.get("content", [])]
    return [t for t in texts if t]


def assert_next_turn_is_valid(server, conversation: Conversation, protocol: str) -> None:
    end = list(conversation.turn("second question"))[-1]
    assert isinstance(end, TurnFinished) and end.text == "second answer"
    messages = server.requests[-1].body["messages"]
    if protocol == "openai":
        roles = [m["role"] for m in messages]
        assert roles == ["system", "user", "assistant", "tool", "user"]
        assert "hello world" in messages[3]["content"]
    else:
        assert [m["role"] for m in messages] == ["user", "assistant", "user"]
        last = messages[-1]["content"]
        assert [b["type"] for b in last] == ["tool_result", "text"]
        assert last[-1]["text"] == "second question"
    assert all(SUMMARY[:8] not in json.dumps(m) for m in messages)
    assert server.violations == []
    assert check_history(conversation.session.history) == []


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_summary_cancelled_while_it_streams_is_dropped_everywhere(llm_server, tmp_path, protocol):
    script(llm_server)
    summary_rule = next(r for r in llm_server.rules if "tool result" in repr(r))
    hold = llm_server.hold(summary_rule, after_first_chunk=True)
    conversation = open_conversation(llm_server, protocol, tmp_path)
    events: list[Event] = []
    streaming = threading.Event()

    def consume() -> None:
        for event in conversation.turn("read hello.txt"):
            events.append(event)
            if isinstance(event, TextDelta) and any(isinstance(e, SummaryStarted) for e in events):
                streaming.set()

    worker = threading.Thread(target=consume)
    worker.start()
    assert streaming.wait(20)  # the summary's first chunk has arrived
    conversation.cancel()
    worker.join(20)
    assert not worker.is_alive()
    hold.release()
    end = events[-1]
    assert isinstance(end, TurnFailed) and end.kind is FailureKind.CANCELLED
    assert [m.role for m in conversation.session.history] == ["user", "assistant", "user"]
    assert conversation.session.history[-1].tool_results  # the tool results stay
    assert assistant_texts(conversation) == []  # no partial summary, anywhere
    assert_next_turn_is_valid(llm_server, conversation, protocol)
    conversation.close()


class CancelAt:
    """The real provider, but the summary round's cancel token is cancelled the moment a
    chosen chunk arrives: the StreamDone (the cancel comes with the last chunk, after it was
    read) or the last text chunk (just before the stream's end is read)."""

    def __init__(self, inner: Provider, *, on_done: bool) -> None:
        self.inner = inner
        self.name = inner.name
        self.on_done = on_done

    def stream(self, request: ChatRequest, cancel: CancelToken) -> Iterator[StreamEvent]:
        summary_round = bool(request.messages[-1].tool_results)
        text = ""
        for event in self.inner.stream(request, cancel):
            if isinstance(event, StreamText):
                text += event.text
            last_text = isinstance(event, StreamText) and text == SUMMARY
            if summary_round and (isinstance(event, StreamDone) if self.on_done else last_text):
                cancel.cancel()
            yield event


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_cancel_with_the_last_chunk_keeps_the_whole_summary(llm_server, tmp_path, protocol):
    script(llm_server)
    conversation = open_conversation(llm_server, protocol, tmp_path)
    conversation.session.provider = CancelAt(conversation.session.provider, on_done=True)
    events = list(conversation.turn("read hello.txt"))
    end = events[-1]
    assert isinstance(end, TurnFinished) and end.text == SUMMARY  # the turn had finished
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == SUMMARY
    assert [m.role for m in conversation.session.history] == [
        "user",
        "assistant",
        "user",
        "assistant",
    ]
    assert assistant_texts(conversation) == [SUMMARY, SUMMARY]  # history, transcript: whole
    conversation.close()


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_cancel_before_the_end_is_read_drops_the_whole_summary(llm_server, tmp_path, protocol):
    script(llm_server)
    conversation = open_conversation(llm_server, protocol, tmp_path)
    conversation.session.provider = CancelAt(conversation.session.provider, on_done=False)
    end = list(conversation.turn("read hello.txt"))[-1]
    assert isinstance(end, TurnFailed) and end.kind is FailureKind.CANCELLED
    assert [m.role for m in conversation.session.history] == ["user", "assistant", "user"]
    assert assistant_texts(conversation) == []  # every character arrived, none was kept
    conversation.session.provider = conversation.session.provider.inner
    assert_next_turn_is_valid(llm_server, conversation, protocol)
    conversation.close()


def test_t_user_idle_is_noted_once_a_turn(llm_server, tmp_path):
    script(llm_server)
    conversation = open_conversation(llm_server, "openai", tmp_path)
    events = conversation.turn("read hello.txt")
    assert conversation.t_user_idle is None
    for event in events:
        if isinstance(event, SummaryStarted):
            conversation.user_idle()  # what the REPL does when it gives the prompt back
            idle = conversation.t_user_idle
    assert idle is not None and idle >= 0
    conversation.user_idle()  # the turn's end: the first moment stands
    assert conversation.t_user_idle == idle
    list(conversation.turn("second question"))
    assert conversation.t_user_idle is None  # a new turn, not yet idle
    conversation.close()
