"""The plain line front-end over text streams, and when it is chosen over the REPL."""

from __future__ import annotations

import argparse
import io
from dataclasses import replace

import pytest

from qshell.llm.messages import Message
from qshell.ui.interactive import wants_plain
from qshell.ui.simple import PROMPT, SimpleFrontEnd
from tests.agent.test_conversation import Setup, make_conversation, read_call, write_call


def run(setup: Setup, typed: str) -> str:
    stdout = io.StringIO()
    front = SimpleFrontEnd(setup.conversation, stdin=io.StringIO(typed), stdout=stdout)
    assert front.run() == 0
    return stdout.getvalue()


def call_for_edit():
    return write_call("a.txt", "new\n").tool_calls[0]


def test_a_full_session_with_a_denied_edit_and_stats_is_plain_text(tmp_path):
    setup = make_conversation(
        tmp_path,
        [
            read_call("a.txt"),
            Message.assistant("I will update it.", [call_for_edit()]),
            Message.assistant("Understood, leaving a.txt alone."),
        ],
    )
    (setup.root / "a.txt").write_text("old\n")
    out = run(setup, "please update a.txt\nn because it is generated\n/stats\n/exit\n")
    session_id = setup.conversation.session.id

    assert (setup.root / "a.txt").read_text() == "old\n"
    result = setup.provider.requests[2].messages[-1].tool_results[0]
    assert result.is_error and result.content.endswith(": because it is generated")

    assert "\x1b" not in out and "\r" not in out
    assert out.startswith("qshell ") and "/help for commands" in out.splitlines()[0]
    assert "I will update it." in out
    assert "? write_file(a.txt)" in out and "+new" in out
    assert "Allow write_file? [y]es" in out
    assert "  -> error: the user denied this tool call: because it is generated" in out
    assert "Understood, leaving a.txt alone." in out
    assert "model rounds: 3\n" in out and "messages in history: 6\n" in out
    assert out.endswith(
        f"session {session_id} saved; resume it with: qshell --resume {session_id}\n"
    )


def test_an_allowed_edit_is_written_and_slash_errors_are_marked(tmp_path):
    setup = make_conversation(tmp_path, [write_call("b.txt", "hi\n"), Message.assistant("made it")])
    out = run(setup, "make b.txt\nmaybe\ny\n/bogus\n")
    assert (setup.root / "b.txt").read_text() == "hi\n"
    assert "please answer y, a or n (optionally followed by a reason)" in out
    assert out.count("Allow write_file?") == 2
    assert "error: unknown command /bogus. Type /help for the list." in out
    assert "\x1b" not in out


def test_end_of_input_exits_cleanly_with_the_resume_hint(tmp_path):
    setup = make_conversation(tmp_path)
    out = run(setup, "")
    session_id = setup.conversation.session.id
    assert out.endswith(
        f"{PROMPT}\nsession {session_id} saved; resume it with: qshell --resume {session_id}\n"
    )
    assert setup.provider.requests == []


def test_a_question_left_unanswered_at_end_of_input_is_denied(tmp_path):
    setup = make_conversation(tmp_path, [write_call("c.txt", "x\n"), Message.assistant("ok")])
    out = run(setup, "write c.txt\n")
    assert not (setup.root / "c.txt").exists()
    result = setup.provider.requests[1].messages[-1].tool_results[0]
    assert result.is_error and "no answer (end of input)" in result.content
    assert "resume it with: qshell --resume" in out


def test_blank_lines_are_skipped_and_mention_problems_are_shown(tmp_path):
    setup = make_conversation(tmp_path, [Message.assistant("ok")])
    out = run(setup, "\n   \nread @missing.txt\n")
    assert len(setup.provider.requests) == 1
    assert setup.provider.requests[0].messages[-1].text == "read @missing.txt"
    assert "no file 'missing.txt'; @missing.txt was sent as plain text" in out


def test_compact_runs_through_the_driver(tmp_path):
    setup = make_conversation(tmp_path, [Message.assistant("hi"), Message.assistant("summary")])
    out = run(setup, "hello\n/compact\n/compact\n")
    assert "history compacted (requested with /compact): 2 -> 2 messages" in out
    assert len(setup.provider.requests) == 3


class TTY(io.StringIO):
    def isatty(self) -> bool:
        return True


class NoIsatty:
    pass


def args(simple_prompt: bool = False) -> argparse.Namespace:
    return argparse.Namespace(simple_prompt=simple_prompt)


def test_a_real_terminal_gets_the_repl():
    assert not wants_plain(args(), {"TERM": "xterm-256color"}, TTY())


@pytest.mark.parametrize(
    ("simple_prompt", "environ", "stdout"),
    [
        (True, {"TERM": "xterm-256color"}, TTY()),
        (False, {"TERM": "xterm-256color", "INSIDE_EMACS": "29.1,comint"}, TTY()),
        (False, {"TERM": "dumb"}, TTY()),
        (False, {"TERM": "DUMB"}, TTY()),
        (False, {"TERM": "unknown"}, TTY()),
        (False, {"TERM": ""}, TTY()),
        (False, {}, TTY()),
        (False, {"TERM": "xterm-256color"}, io.StringIO()),
        (False, {"TERM": "xterm-256color"}, NoIsatty()),
    ],
    ids=[
        "simple-prompt",
        "emacs",
        "dumb",
        "dumb-upper",
        "unknown",
        "empty-term",
        "no-term",
        "not-a-tty",
        "no-isatty",
    ],
)
def test_the_plain_mode_is_chosen(simple_prompt, environ, stdout):
    assert wants_plain(args(simple_prompt), environ, stdout)


def test_a_closed_stdout_gets_the_plain_mode():
    closed = io.StringIO()
    closed.close()
    assert wants_plain(args(), {"TERM": "xterm"}, closed)


def test_a_machine_without_a_sandbox_is_said_once_under_the_banner(tmp_path):
    setup = make_conversation(tmp_path, [Message.assistant("hi")])
    session = setup.conversation.session
    note = "no sandbox here, shell commands are checked by the proof alone: bwrap is missing"
    session.tool_context = replace(session.tool_context, sandbox=None, sandbox_note=note)
    lines = run(setup, "hello\n/exit\n").splitlines()
    assert lines[1] == note and lines.count(note) == 1
