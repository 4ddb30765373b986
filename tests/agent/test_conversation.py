"""The Conversation controller: turns, notes, cancel, settings, sessions, compaction, undo.

Sessions are opened the way the CLI opens them (sessions.open_session with real settings,
tools and transcripts) with an in-process ScriptedProvider in place of the network.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import pytest

from qshell import sessions
from qshell.agent.conversation import Conversation, on_screen_line
from qshell.agent.events import (
    Event,
    FailureKind,
    HistoryCompacted,
    PermissionAnswer,
    PermissionReply,
    PermissionRequested,
    ToolFinished,
    TurnFailed,
    TurnFinished,
)
from qshell.agent.prediction import PREDICTION_PROMPT
from qshell.agent.session import SessionRequest, check_history
from qshell.config import ApprovalMode, load_settings
from qshell.errors import InputError
from qshell.llm.messages import Message
from tests.agent.scripted import ScriptedProvider, Step, call


@dataclass
class Setup:
    conversation: Conversation
    provider: ScriptedProvider
    root: Path

    def script(self, *steps: Step) -> None:
        self.provider.steps.extend(steps)


def make_conversation(
    tmp_path: Path, steps: Iterable[Step] = (), request: SessionRequest | None = None
) -> Setup:
    """A Conversation over real settings, tools and transcripts, and a scripted model."""
    root = (tmp_path / "project").resolve()
    root.mkdir()
    environ = {
        "QSHELL_HOME": str(tmp_path / "qshell-home"),
        "HOME": str(tmp_path / "home"),
        "OPENAI_API_KEY": "k",
    }
    settings = load_settings(project_root=root, environ=environ)
    provider = ScriptedProvider(list(steps))

    def open_session(request: SessionRequest):
        return sessions.open_session(
            settings, request, root=root, environ=environ, provider=provider
        )

    return Setup(Conversation(open_session, request or SessionRequest()), provider, root)


def consume(events: Iterable[Event], answer: PermissionReply | None = None) -> list[Event]:
    """Every event of a turn; permission questions get `answer` (default: allow once)."""
    seen = []
    for event in events:
        seen.append(event)
        if isinstance(event, PermissionRequested):
            event.future.set_result(answer or PermissionReply(PermissionAnswer.ALLOW_ONCE))
    return seen


def write_call(path: str, content: str, id_: str = "w1") -> Message:
    args = json.dumps({"path": path, "content": content})
    return Message.assistant("", [call("write_file", args, id_)])


def read_call(path: str, id_: str = "r1") -> Message:
    return Message.assistant("", [call("read_file", json.dumps({"path": path}), id_)])


def test_a_mention_sends_the_file_content_with_the_prompt(tmp_path):
    setup = make_conversation(tmp_path, [Message.assistant("read it")])
    (setup.root / "notes.txt").write_text("alpha beta gamma\n")
    events = consume(setup.conversation.turn("summarize @notes.txt please"))
    assert isinstance(events[-1], TurnFinished)
    sent = setup.provider.requests[0].messages[-1].text
    assert sent.startswith("summarize @notes.txt please\n\n")
    assert '<file path="notes.txt">\nalpha beta gamma\n</file>' in sent
    assert setup.conversation.last_expansion is not None
    assert setup.conversation.last_expansion.attached == ["notes.txt"]


def test_a_mention_of_a_missing_file_is_a_problem_and_the_text_is_sent_as_typed(tmp_path):
    setup = make_conversation(tmp_path, [Message.assistant("ok")])
    consume(setup.conversation.turn("look at @nope.txt"))
    assert setup.provider.requests[0].messages[-1].text == "look at @nope.txt"
    assert setup.conversation.last_expansion is not None
    assert "nope.txt" in setup.conversation.last_expansion.problems[0]


def test_undo_after_an_edit_turn_restores_the_file(tmp_path):
    setup = make_conversation(
        tmp_path, [read_call("a.txt"), write_call("a.txt", "new\n"), Message.assistant("written")]
    )
    target = setup.root / "a.txt"
    target.write_text("old\n")
    events = consume(setup.conversation.turn("rewrite a.txt"))
    assert any(isinstance(e, PermissionRequested) for e in events)
    assert target.read_text() == "new\n"
    report = setup.conversation.undo()
    assert report.restored == ["a.txt"] and report.skipped == []
    assert target.read_text() == "old\n"
    assert setup.conversation.undo().empty


def test_no_question_is_asked_about_overwriting_a_file_the_model_has_not_read(tmp_path):
    setup = make_conversation(
        tmp_path, [write_call("a.txt", "new\n"), Message.assistant("I will read it first")]
    )
    (setup.root / "a.txt").write_text("old\n")
    events = consume(setup.conversation.turn("rewrite a.txt"))
    assert not any(isinstance(e, PermissionRequested) for e in events)
    (finished,) = [e for e in events if isinstance(e, ToolFinished)]
    assert finished.result.error is not None and "has not been read" in finished.result.display
    assert (setup.root / "a.txt").read_text() == "old\n"


def test_undo_of_a_created_file_removes_it(tmp_path):
    setup = make_conversation(tmp_path, [write_call("b.txt", "x\n"), Message.assistant("ok")])
    consume(setup.conversation.turn("create b.txt"))
    assert (setup.root / "b.txt").exists()
    assert setup.conversation.undo().deleted == ["b.txt"]
    assert not (setup.root / "b.txt").exists()


def test_the_undo_note_is_prepended_to_the_next_prompt_exactly_once(tmp_path):
    setup = make_conversation(
        tmp_path,
        [
            read_call("a.txt"),
            write_call("a.txt", "new\n"),
            Message.assistant("written"),
            Message.assistant("noted"),
            Message.assistant("again"),
        ],
    )
    (setup.root / "a.txt").write_text("old\n")
    consume(setup.conversation.turn("rewrite a.txt"))
    setup.conversation.undo()
    consume(setup.conversation.turn("next"))
    consume(setup.conversation.turn("and then"))
    noted = setup.provider.requests[3].messages[-1].text
    assert noted.startswith("[The user undid your file changes")
    assert "a.txt" in noted and noted.endswith("]\n\nnext")
    assert setup.provider.requests[4].messages[-1].text == "and then"


def test_undo_with_nothing_to_undo_leaves_no_note(tmp_path):
    setup = make_conversation(tmp_path, [Message.assistant("ok")])
    assert setup.conversation.undo().empty
    consume(setup.conversation.turn("hello"))
    assert setup.provider.requests[0].messages[-1].text == "hello"


def test_cancel_before_the_turn_generator_first_runs_is_not_lost(tmp_path):
    setup = make_conversation(tmp_path, [Message.assistant("never sent")])
    events = setup.conversation.turn("hi")
    setup.conversation.cancel()
    seen = consume(events)
    assert isinstance(seen[-1], TurnFailed) and seen[-1].kind is FailureKind.CANCELLED
    assert setup.provider.requests == []
    assert check_history(setup.conversation.session.history) == []


def test_each_turn_gets_a_fresh_cancel_token(tmp_path):
    setup = make_conversation(tmp_path, [Message.assistant("ok"), Message.assistant("ok")])
    consume(setup.conversation.turn("first"))
    setup.conversation.cancel()
    events = consume(setup.conversation.turn("second"))
    assert isinstance(events[-1], TurnFinished)
    assert not setup.conversation.cancel_token.cancelled


def test_set_model_takes_effect_on_the_next_request(tmp_path):
    setup = make_conversation(tmp_path, [Message.assistant("one"), Message.assistant("two")])
    consume(setup.conversation.turn("a"))
    setup.conversation.set_model("other-model")
    consume(setup.conversation.turn("b"))
    assert setup.provider.requests[0].model != "other-model"
    assert setup.provider.requests[1].model == "other-model"
    assert setup.conversation.model == "other-model"


def test_set_approval_mode_takes_effect_on_the_next_decision(tmp_path):
    setup = make_conversation(
        tmp_path,
        [
            write_call("a.txt", "plan\n", "w1"),
            Message.assistant("denied"),
            write_call("a.txt", "yolo\n", "w2"),
            Message.assistant("written"),
        ],
    )
    setup.conversation.set_approval_mode(ApprovalMode.PLAN)
    events = consume(setup.conversation.turn("write"))
    assert not any(isinstance(e, PermissionRequested) for e in events)
    finished = next(e for e in events if isinstance(e, ToolFinished))
    assert finished.result.error is not None and "plan mode" in finished.result.error.message
    assert not (setup.root / "a.txt").exists()

    setup.conversation.set_approval_mode(ApprovalMode.YOLO)
    events = consume(setup.conversation.turn("write again"))
    assert not any(isinstance(e, PermissionRequested) for e in events)
    assert (setup.root / "a.txt").read_text() == "yolo\n"
    assert setup.conversation.approval_mode is ApprovalMode.YOLO
    assert setup.conversation.session.approval_mode is ApprovalMode.YOLO


def test_clear_starts_a_new_empty_session_and_the_old_one_is_listed(tmp_path):
    setup = make_conversation(tmp_path, [Message.assistant("hello back")])
    consume(setup.conversation.turn("first   prompt\nhere"))
    old = setup.conversation.clear()
    new = setup.conversation.session.id
    assert new != old and setup.conversation.session.history == []
    listed = {s.session_id: s for s in setup.conversation.sessions()}
    assert set(listed) == {old, new}
    assert listed[old].first_prompt == "first prompt here" and not listed[old].current
    assert listed[new].current and listed[new].first_prompt == ""


def test_clear_keeps_what_the_session_request_asked_of_the_system_prompt(tmp_path):
    request = SessionRequest(append_system_prompt="Answer in French.", predict_next=True)
    setup = make_conversation(tmp_path, request=request)
    first = setup.conversation.session
    setup.conversation.clear()
    for session in (first, setup.conversation.session):
        assert "Answer in French." in session.system_prompt
        assert PREDICTION_PROMPT in session.system_prompt and session.options.predicts_next


def test_clear_keeps_the_model_and_approval_mode_and_drops_pending_notes(tmp_path):
    setup = make_conversation(
        tmp_path,
        [write_call("a.txt", "x\n"), Message.assistant("ok"), Message.assistant("fresh")],
    )
    consume(setup.conversation.turn("write"))
    setup.conversation.undo()
    setup.conversation.set_model("kept")
    setup.conversation.set_approval_mode(ApprovalMode.AUTO_EDIT)
    setup.conversation.clear()
    assert setup.conversation.model == "kept"
    assert setup.conversation.approval_mode is ApprovalMode.AUTO_EDIT
    assert setup.conversation.session.approval_mode is ApprovalMode.AUTO_EDIT
    consume(setup.conversation.turn("start over"))
    assert setup.provider.requests[-1].messages[-1].text == "start over"
    assert setup.provider.requests[-1].model == "kept"


def test_resume_restores_the_history_of_an_earlier_session(tmp_path):
    setup = make_conversation(
        tmp_path, [Message.assistant("first answer"), Message.assistant("continued")]
    )
    consume(setup.conversation.turn("first question"))
    old = setup.conversation.clear()
    setup.conversation.resume(old)
    assert setup.conversation.session.id == old
    assert [m.text for m in setup.conversation.session.history] == [
        "first question",
        "first answer",
    ]
    consume(setup.conversation.turn("go on"))
    assert [m.text for m in setup.provider.requests[-1].messages] == [
        "first question",
        "first answer",
        "go on",
    ]


def test_resume_of_an_unknown_id_raises_and_keeps_the_current_session(tmp_path):
    setup = make_conversation(tmp_path, [Message.assistant("ok"), Message.assistant("still")])
    consume(setup.conversation.turn("hi"))
    current = setup.conversation.session.id
    with pytest.raises(InputError):
        setup.conversation.resume("no-such-session")
    assert setup.conversation.session.id == current
    consume(setup.conversation.turn("still here"))
    assert len(setup.conversation.session.history) == 4


def test_compact_replaces_the_history_with_the_summary(tmp_path):
    setup = make_conversation(
        tmp_path,
        [Message.assistant("answer"), Message.assistant("THE SUMMARY"), Message.assistant("ok")],
    )
    consume(setup.conversation.turn("question"))
    events = consume(setup.conversation.compact("focus on tests"))
    assert len(events) == 1 and isinstance(events[0], HistoryCompacted)
    assert (events[0].messages_before, events[0].messages_after) == (2, 2)
    history = setup.conversation.session.history
    assert len(history) == 2 and "THE SUMMARY" in history[0].text
    assert "focus on tests" in setup.provider.requests[1].messages[-1].text
    consume(setup.conversation.turn("next"))
    assert "THE SUMMARY" in setup.provider.requests[2].messages[0].text


def test_compact_with_an_empty_history_fails_as_input(tmp_path):
    setup = make_conversation(tmp_path)
    events = consume(setup.conversation.compact())
    assert len(events) == 1 and isinstance(events[0], TurnFailed)
    assert events[0].kind is FailureKind.INPUT
    assert setup.provider.requests == []


def test_close_returns_the_session_id(tmp_path):
    setup = make_conversation(tmp_path)
    assert setup.conversation.close() == setup.conversation.session.id


def test_close_first_ends_what_registered_with_on_close_and_only_once(tmp_path, monkeypatch):
    setup = make_conversation(tmp_path)
    seen: list[str] = []
    close_session = setup.conversation.session.close

    def close() -> None:
        seen.append("session")
        close_session()

    monkeypatch.setattr(setup.conversation.session, "close", close)
    setup.conversation.on_close(lambda: seen.append("followup"))
    setup.conversation.on_close(lambda: seen.append("unregistered"))()
    setup.conversation.close()
    assert seen == ["followup", "session"]
    setup.conversation.close()
    assert seen == ["followup", "session", "session"]  # what registered ran once
    setup.conversation.on_close(lambda: seen.append("late"))  # already closed: runs at once
    assert seen[-1] == "late"


def test_always_allow_answers_do_not_survive_clear(tmp_path):
    from qshell.agent.events import PermissionAnswer as Answer

    setup = make_conversation(tmp_path, [write_call("a.txt", "1"), Message.assistant("ok")])
    seen = consume(setup.conversation.turn("write"), PermissionReply(Answer.ALLOW_ALWAYS))
    assert sum(isinstance(e, PermissionRequested) for e in seen) == 1
    setup.conversation.clear()
    setup.script(write_call("b.txt", "2", "w2"), Message.assistant("ok"))
    seen = consume(setup.conversation.turn("write again"))
    assert sum(isinstance(e, PermissionRequested) for e in seen) == 1


@pytest.mark.parametrize(
    ("text", "shown", "noted"),
    [
        ("no", "run the tests", True),
        ("yes please do", "run the tests", True),
        ("not now, thanks", "commit the fix", True),
        ("no, explain the failing assertion first", "run the tests", False),  # > 4 words
        ("supercalifragilistic_expialidocious", "run the tests", False),  # > 30 characters
        ("no\nwait", "run the tests", False),
        ("run the tests", "run the tests", False),  # accepted
        ("  Run the tests  ", "run the tests", False),
        ("run the tests now", "run the tests", False),  # filled and extended
        ("/stats", "run the tests", False),
        ("no", None, False),
        ("no", "  ", False),
    ],
)
def test_only_a_short_reply_to_a_shown_suggestion_gets_the_on_screen_line(text, shown, noted):
    line = on_screen_line(text, shown)
    assert (line is not None) is noted
    if line is not None:
        assert (
            line
            == f"[qshell note, not the user's words: the suggestion on screen was {json.dumps(shown)}]"
        )


def test_the_on_screen_line_quotes_the_suggestion_on_one_line():
    line = on_screen_line("no", 'say "hi"\nthen leave')
    assert line is not None and "\n" not in line
    assert '"say \\"hi\\" then leave"' in line
