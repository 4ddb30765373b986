"""The permission question and how answers to it are read."""

from __future__ import annotations

from concurrent.futures import Future

import pytest

from qshell.agent.events import PermissionAnswer, PermissionReply, PermissionRequested
from qshell.ui.questions import exit_text, parse_answer, question_text

ONCE = PermissionReply(PermissionAnswer.ALLOW_ONCE)
ALWAYS = PermissionReply(PermissionAnswer.ALLOW_ALWAYS)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("y", ONCE),
        ("yes", ONCE),
        (" Y \n", ONCE),
        ("YES.", ONCE),
        ("ok", ONCE),
        ("a", ALWAYS),
        ("always", ALWAYS),
        ("Always", ALWAYS),
        ("n", PermissionReply(PermissionAnswer.DENY, "")),
        ("no", PermissionReply(PermissionAnswer.DENY, "")),
        ("deny", PermissionReply(PermissionAnswer.DENY, "")),
        ("n too risky", PermissionReply(PermissionAnswer.DENY, "too risky")),
        ("no, use the other file ", PermissionReply(PermissionAnswer.DENY, "use the other file")),
        ("N:  not now", PermissionReply(PermissionAnswer.DENY, "not now")),
    ],
)
def test_parse_answer_understands_yes_always_and_no_with_a_reason(text, expected):
    assert parse_answer(text) == expected


@pytest.mark.parametrize(
    "text", ["", "   ", "\n", "maybe", "yep", "y please", "a lot", "nope", "never", "1"]
)
def test_parse_answer_returns_none_for_what_it_does_not_understand(text):
    assert parse_answer(text) is None


def test_the_question_names_the_tool_and_every_answer():
    request = PermissionRequested("c1", "shell", {"command": "ls"}, "runs a command", Future())
    text = question_text(request)
    assert text.startswith("Allow shell? ")
    assert "[y]es" in text and "[a]lways" in text and "[n]o" in text


def test_the_exit_text_says_how_to_resume():
    assert exit_text("abc") == "session abc saved; resume it with: qshell --resume abc"
