"""Over real HTTP: a Followup sends one suggestion request per context, an accepted
speculation's round still streaming is taken over rather than asked for again, and nothing
streams once the conversation closes.

A real Conversation (sessions.open_session: settings, tools, transcripts) and a real Followup
(its pool, controller, Speculator and real overlays) talk to the scripted server. Holds
keep a request in flight where a test needs it to be; every wait is bounded and nothing
asserts on elapsed time.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path

import pytest

from qshell import sessions
from qshell.agent.conversation import Conversation
from qshell.agent.events import (
    Event,
    FailureKind,
    SpeculationAccepted,
    TextDelta,
    ToolFinished,
    TurnFailed,
    TurnFinished,
)
from qshell.agent.session import SessionRequest
from qshell.config import load_settings
from qshell.followup.followup import Followup
from qshell.followup.suggestion import SUGGESTION_MARKER
from qshell.telemetry import Telemetry
from tests.agent.test_conversation import consume
from tests.fakes.llm_server import (
    RecordedRequest,
    Reply,
    Rule,
    ScriptedLLMServer,
    ToolCallSpec,
    has_tool_result,
    last_user_text_contains,
)

WAIT_S = 10.0
FIRST = "list the files"
SUGGESTED = "run the tests"
ANSWER = "all 12 tests pass"
NEXT = "commit this"


class Shown:
    """Collects on_change values; `wait_for(text)` until that text was shown."""

    def __init__(self) -> None:
        self.values: list[str | None] = []
        self._changed = threading.Condition()

    def __call__(self, text: str | None) -> None:
        with self._changed:
            self.values.append(text)
            self._changed.notify_all()

    def wait_for(self, text: str) -> bool:
        with self._changed:
            return self._changed.wait_for(lambda: text in self.values, WAIT_S)


@dataclass
class Rig:
    server: ScriptedLLMServer
    conversation: Conversation
    followup: Followup
    shown: Shown

    def first_turn(self) -> None:
        events = consume(self.conversation.turn(FIRST))
        assert isinstance(events[-1], TurnFinished), events[-1]
        self.followup.turn_ended(events[-1])

    def accept(self, text: str) -> list[Event]:
        """Tab then Enter on the ghost text, as the REPL does, and the turn's end."""
        assert self.followup.fill("tab") == text
        self.followup.user_typed(text)
        self.followup.submitted(text)
        prepared = self.followup.prepared()
        assert prepared is not None, "the suggestion had no speculation to accept"
        events = consume(prepared)
        self.followup.turn_ended(events[-1])
        return events


def suggestions_after(server: ScriptedLLMServer, text: str) -> list[RecordedRequest]:
    """The suggestion requests whose context ends with a reply containing `text`."""
    return [
        r
        for r in server.requests
        if SUGGESTION_MARKER in r.last_user_text
        and [t.text for t in r.turns if t.role == "assistant"][-1:] == [text]
    ]


def speculations_of(server: ScriptedLLMServer, prompt: str) -> list[RecordedRequest]:
    return [r for r in server.requests if r.turns and r.turns[-1].text == prompt]


def suggestion_rule(after: str, text: str) -> Rule:
    def test(request: RecordedRequest) -> bool:
        return SUGGESTION_MARKER in request.last_user_text and after in request.all_text

    return Rule(test, Reply.text(text))


@pytest.fixture
def rig(llm_server: ScriptedLLMServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path / "tmp"))  # the overlays' base
    (tmp_path / "tmp").mkdir()
    root = (tmp_path / "project").resolve()
    root.mkdir()
    environ = {
        "HOME": str(tmp_path / "home"),
        "QSHELL_HOME": str(tmp_path / "qshell-home"),
        "QSHELL_MAX_RETRIES": "0",
        "QSHELL_SUGGESTIONS": "1",
        "QSHELL_SPECULATION": "1",
        "QSHELL_SUGGESTIONS__DELAY_MS": "0",
        "OPENAI_BASE_URL": llm_server.openai_base_url,
        "OPENAI_API_KEY": llm_server.api_key or "",
        "OPENAI_MODEL": "m1",
    }
    settings = load_settings(project_root=root, environ=environ)

    def open_session(request: SessionRequest):
        return sessions.open_session(settings, request, root=root, environ=environ)

    conversation = Conversation(open_session, SessionRequest())
    shown = Shown()
    telemetry = Telemetry(tmp_path / "events.jsonl")
    followup = Followup(conversation, settings, on_change=shown, telemetry=telemetry)
    llm_server.add_rule(has_tool_result(), Reply.text("two files"))
    llm_server.add_rule(
        last_user_text_contains(FIRST), Reply.tool_calls([ToolCallSpec("ls", {}, id="ls1")])
    )
    yield Rig(llm_server, conversation, followup, shown)
    followup.close()
    conversation.close()
    llm_server.release_all()


def test_accepting_a_completed_speculation_sends_one_suggestion_request_for_its_context(rig):
    """The speculation's pipelined suggestion is still in flight when the accepted turn ends:
    the turn's end joins it instead of sending the same request again."""
    server = rig.server
    pipelined = server.hold(server.add_rule(suggestion_rule(ANSWER, NEXT), first=True))
    server.add_rule(suggestion_rule("two files", SUGGESTED))
    server.add_rule(last_user_text_contains(SUGGESTED), Reply.text(ANSWER))
    rig.first_turn()
    assert rig.shown.wait_for(SUGGESTED)
    pipelined.wait_arrived(WAIT_S)  # the speculation completed and asked for the next one
    assert isinstance(rig.accept(SUGGESTED)[-1], TurnFinished)
    pipelined.release()
    assert rig.shown.wait_for(NEXT)
    assert len(suggestions_after(server, ANSWER)) == 1
    assert len(speculations_of(server, SUGGESTED)) == 1


def test_a_suggestion_pipelined_by_a_speculation_that_conflicted_is_asked_again_live(rig):
    """The speculation read a.txt, the user changed it, so its accept is a conflict and the
    prompt runs live: what it pipelined belongs to a context that never came, so the
    suggestion after the live turn is asked for that turn's context."""
    server, file = rig.server, rig.conversation.session.project_root / "a.txt"
    file.write_text("version 1\n")
    server.add_rule(has_tool_result("version"), Reply.text(ANSWER), first=True)
    pipelined = server.hold(server.add_rule(suggestion_rule(ANSWER, NEXT), first=True))
    server.add_rule(suggestion_rule("two files", SUGGESTED))
    read = ToolCallSpec("read_file", {"path": "a.txt"})
    server.add_rule(last_user_text_contains(SUGGESTED), Reply.tool_calls([read]))
    rig.first_turn()
    assert rig.shown.wait_for(SUGGESTED)
    ahead = pipelined.wait_arrived(WAIT_S)
    pipelined.release()
    assert ahead.completed.wait(WAIT_S)
    file.write_text("version 2\n")
    assert isinstance(rig.accept(SUGGESTED)[-1], TurnFinished)
    assert rig.shown.wait_for(NEXT)
    live = [r for r in suggestions_after(server, ANSWER) if "version 2" in r.all_text]
    assert len(live) == 1
    assert len(speculations_of(server, SUGGESTED)) == 2  # the speculation, then the live turn


LONG_ANSWER = "the suite ran and every one of the twelve tests passed " * 4
READ_A = ToolCallSpec("read_file", {"path": "a.txt"})


def text_of(events: list[Event]) -> str:
    return "".join(e.text for e in events if isinstance(e, TextDelta))


def answer_rounds(server: ScriptedLLMServer) -> list[RecordedRequest]:
    return [r for r in server.requests if r.last_tool_results and "version" in r.all_text]


@pytest.fixture
def reading(rig):
    """The suggestion's speculation reads a.txt, then answers LONG_ANSWER."""
    (rig.conversation.session.project_root / "a.txt").write_text("version 1\n")
    answer = rig.server.add_rule(has_tool_result("version"), Reply.text(LONG_ANSWER), first=True)
    rig.server.add_rule(suggestion_rule("two files", SUGGESTED))
    prompt = rig.server.add_rule(last_user_text_contains(SUGGESTED), Reply.tool_calls([READ_A]))
    return answer, prompt


def accepted_mid_stream(rig, rule):
    """Accept the suggestion while the speculation's request for `rule` streams (held after
    its first chunk, released 0.2 s into the accept): that request and the turn's events."""
    held = rig.server.hold(rule, after_first_chunk=True)
    rig.first_turn()
    assert rig.shown.wait_for(SUGGESTED)
    streaming = held.wait_arrived(WAIT_S)
    threading.Timer(0.2, held.release).start()
    events = rig.accept(SUGGESTED)
    assert isinstance(events[-1], TurnFinished), events[-1]
    return streaming, events


def test_accepting_while_the_answer_streams_takes_that_stream_over(rig, reading):
    """Accepted after the speculation's read, mid-answer: the answer goes on streaming into
    the accepted turn, shown once, and is not asked for again."""
    answer, _ = reading
    streaming, events = accepted_mid_stream(rig, answer)
    assert text_of(events) == LONG_ANSWER
    assert any(isinstance(e, SpeculationAccepted) for e in events)
    assert answer_rounds(rig.server) == [streaming]
    assert not streaming.disconnected.is_set()


def test_accepting_while_a_tool_call_streams_takes_it_over_and_runs_the_call_live(rig, reading):
    """The first round (the read) is still streaming at accept: it is finished, not asked for
    again; the read runs in the accepted turn, then the answer comes live."""
    _, prompt = reading
    streaming, events = accepted_mid_stream(rig, prompt)
    assert speculations_of(rig.server, SUGGESTED) == [streaming]
    assert [e.name for e in events if isinstance(e, ToolFinished)] == ["read_file"]
    assert text_of(events) == LONG_ANSWER


def test_cancelling_a_turn_that_took_over_a_stream_closes_it(rig, reading):
    answer, _ = reading
    held = rig.server.hold(answer, after_first_chunk=True)
    rig.first_turn()
    assert rig.shown.wait_for(SUGGESTED)
    streaming = held.wait_arrived(WAIT_S)
    assert rig.followup.fill("tab") == SUGGESTED
    rig.followup.submitted(SUGGESTED)
    prepared = rig.followup.prepared()
    assert prepared is not None
    threading.Timer(0.2, rig.conversation.cancel).start()  # Ctrl-C while it streams
    events = consume(prepared)
    assert streaming.disconnected.wait(WAIT_S)
    assert isinstance(events[-1], TurnFailed) and events[-1].kind is FailureKind.CANCELLED


def test_closing_the_conversation_closes_a_streaming_speculation(rig):
    server = rig.server
    server.add_rule(suggestion_rule("two files", SUGGESTED))
    slow = server.add_rule(last_user_text_contains(SUGGESTED), Reply.text(ANSWER))
    held = server.hold(slow, after_first_chunk=True)  # streaming, and billed, until closed
    rig.first_turn()
    request = held.wait_arrived(WAIT_S)
    rig.conversation.close()
    assert request.disconnected.wait(WAIT_S)


def test_closing_the_conversation_closes_a_pipelined_suggestion_request(rig):
    server = rig.server
    pipelined = server.add_rule(suggestion_rule(ANSWER, NEXT), first=True)
    held = server.hold(pipelined, after_first_chunk=True)
    server.add_rule(suggestion_rule("two files", SUGGESTED))
    server.add_rule(last_user_text_contains(SUGGESTED), Reply.text(ANSWER))
    rig.first_turn()
    request = held.wait_arrived(WAIT_S)
    rig.conversation.close()
    assert request.disconnected.wait(WAIT_S)
