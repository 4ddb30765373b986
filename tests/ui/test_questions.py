"""The permission question and how answers to it are read."""

from __future__ import annotations

from concurrent.futures import Future

import pytest

from qshell.agent.events import PermissionAnswer, PermissionReply, PermissionRequested
from qshell.ui.questions import (
    APPLY_KEYS,
    PERMISSION_KEYS,
    REASON_KEY,
    apply_question,
    exit_text,
    parse_answer,
    parse_apply,
    question_text,
)

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


@pytest.mark.parametrize(
    ("keyed", "how", "reason"),
    [(True, "press one key: ", "[t]ell the model why not"), (False, "then Enter: ", "n <reason>")],
)
def test_the_question_names_the_tool_every_answer_and_how_it_is_given(keyed, how, reason):
    request = PermissionRequested("c1", "shell", {"command": "ls"}, "runs a command", Future())
    text = question_text(request, keyed=keyed)
    assert text.startswith("Allow shell? ") and text.endswith(how) and reason in text
    assert "[y]es" in text and "[a]lways" in text and "[n]o" in text
    assert apply_question(keyed=keyed).endswith(how)


def test_each_key_of_the_keyed_questions_is_one_the_line_questions_understand_too():
    for key, (word, reply) in PERMISSION_KEYS.items():
        assert parse_answer(key) == parse_answer(word) == reply
    for key, (_word, choice) in APPLY_KEYS.items():
        assert parse_apply(key) == choice
    assert REASON_KEY not in PERMISSION_KEYS


def test_the_exit_text_says_how_to_resume():
    assert exit_text("abc") == "session abc saved; resume it with: qshell --resume abc"
