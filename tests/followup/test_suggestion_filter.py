"""The suggestion filter: every rule by name, the good and bad lists, CJK and false positives."""

from __future__ import annotations

import pytest

from qshell.followup.suggestion import SUGGESTION_MARKER, SUGGESTION_PROMPT
from qshell.followup.suggestion_filter import filter_reason

GOOD = [
    "commit this",
    "run the tests",
    "try it out",
    "push it",
    "yes",
    "/commit",
    "create a PR",
    "run nicely formatted tests",
    "fix the greatest issue",
    "create thanksgiving banner",
    "this issue needs a regression test",
    "here isn't where the bug is, check utils",
]

BAD = [
    ("done", "done"),
    ("looks good", "evaluative"),
    ("Let me check that", "ai_voice"),
    ("nothing found", "meta_text"),
    ("(silence)", "meta_text"),
    ("thanks for the help", "evaluative"),
    ("I'll run the tests", "ai_voice"),
]


@pytest.mark.parametrize("text", GOOD)
def test_good_suggestions_pass_the_filter(text):
    assert filter_reason(text) is None


@pytest.mark.parametrize(("text", "reason"), BAD)
def test_bad_suggestions_are_rejected_with_the_named_reason(text, reason):
    assert filter_reason(text) == reason


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("", "empty"),
        ("   \n ", "empty"),
        ("done", "done"),
        ("Done.", "done"),
        ("nothing found", "meta_text"),
        ("nothing found.", "meta_text"),
        ("no suggestion needed", "meta_text"),
        ("nothing to suggest here", "meta_text"),
        ("silence", "meta_text"),
        ("...silence...", "meta_text"),
        ("staying silent here", "meta_text"),
        ("silence is golden", "meta_text"),
        ("[no suggestion]", "meta_wrapped"),
        ("(waiting for the user)", "meta_wrapped"),
        ("api error: 500", "error_message"),
        ("Prompt is too long for this model", "error_message"),
        ("request timed out after a while", "error_message"),
        ("Invalid API key provided", "error_message"),
        ("image was too large to read", "error_message"),
        ("Suggestion: commit this", "prefixed_label"),
        ("User: run the tests", "prefixed_label"),
        ("hmm", "too_few_words"),
        ("maybe", "too_few_words"),
        (" ".join(["word"] * 13), "too_many_words"),
        ("refactor " + "x" * 95, "too_long"),
        ("Run the tests. Then commit.", "multiple_sentences"),
        ("fix it! Then push", "multiple_sentences"),
        ("run the **tests**", "has_formatting"),
        ("run the *unit* tests", "has_formatting"),
        ("line1\nline2", "has_formatting"),
        ("run \x1b[31mthe tests", "control_chars"),
        ("run the\x07 tests", "control_chars"),
        ("run\tthe tests", "control_chars"),
        ("run the \x9b2J tests", "control_chars"),
        ("commit \u202ethis now", "control_chars"),
        ("commit\u200bthis now", "control_chars"),
        ("commit this\u2028now", "control_chars"),
        ("looks good to me", "evaluative"),
        ("thanks for the help", "evaluative"),
        ("that works perfectly", "evaluative"),
        ("perfect, now deploy", "evaluative"),
        ("Let me check that", "ai_voice"),
        ("I'll run the tests", "ai_voice"),
        ("Here's what I found", "ai_voice"),
        ("you should run the linter", "ai_voice"),
        ("Sure, running them now", "ai_voice"),
    ],
)
def test_each_filter_rule_rejects_with_its_own_reason(text, reason):
    assert filter_reason(text) == reason


def test_a_suggestion_of_exactly_ninety_nine_characters_is_not_too_long():
    text = "refactor " + "x" * 90
    assert len(text) == 99
    assert filter_reason(text) is None
    assert filter_reason(text + "y") == "too_long"


def test_twelve_words_pass_and_thirteen_do_not():
    assert filter_reason(" ".join(["word"] * 12)) is None
    assert filter_reason(" ".join(["word"] * 13)) == "too_many_words"


@pytest.mark.parametrize(
    "word",
    [
        *("yes", "yeah", "yep", "yup", "sure", "ok", "okay"),
        *("push", "commit", "deploy", "stop", "continue", "check", "no", "Yes", "OK", "yes."),
    ],
)
def test_allowlisted_single_words_pass(word):
    assert filter_reason(word) is None


@pytest.mark.parametrize("word", ["exit", "quit", "hmm", "maybe", "tests", "yea"])
def test_single_words_outside_the_allowlist_are_too_few_words(word):
    assert filter_reason(word) == "too_few_words"


@pytest.mark.parametrize("command", ["/commit", "/review", "/compact"])
def test_a_slash_command_alone_passes_the_word_count_rule(command):
    assert filter_reason(command) is None


def test_a_slash_command_is_still_subject_to_the_later_rules():
    assert filter_reason("/" + "x" * 120) == "too_long"


@pytest.mark.parametrize(
    "text",
    [
        *("run nicely formatted tests", "fix the greatest issue", "create thanksgiving banner"),
        *("rename perfectionist flag", "add a niceness option", "check the thanksgiving date"),
    ],
)
def test_evaluative_words_inside_longer_words_are_not_evaluative(text):
    assert filter_reason(text) is None


@pytest.mark.parametrize(
    "text", ["this issue is next", "i cannot see the log, show it", "thistle theme please"]
)
def test_assistant_voice_needs_a_whole_phrase_at_the_start(text):
    assert filter_reason(text) is None


@pytest.mark.parametrize(
    "text", ["运行测试", "提交", "テストを実行して", "테스트 실행해", "run 测试"]
)
def test_cjk_suggestions_count_characters_not_words(text):
    assert filter_reason(text) is None


def test_a_single_cjk_character_is_too_few():
    assert filter_reason("好") == "too_few_words"


def test_more_than_thirty_cjk_characters_are_too_many():
    assert filter_reason("测" * 30) is None
    assert filter_reason("测" * 31) == "too_many_words"


def test_the_prompt_starts_with_its_stable_marker():
    assert SUGGESTION_PROMPT.startswith(SUGGESTION_MARKER)
    assert SUGGESTION_MARKER == "[qshell: predict the user's next message]"


def test_a_plugin_rule_rejects_what_the_filter_would_offer():
    from pathlib import Path

    from qshell.followup.suggestion import SuggestionResult, screened
    from qshell.plugins import SuggestionCheck, hookimpl
    from tests.plugins.helpers import host_of

    class NoPush:
        @hookimpl
        def qshell_filter_suggestion(self, text, context):
            return "pushes" if "push" in text and context.approval_mode == "default" else None

    host = host_of(("no_push", NoPush()))
    check = SuggestionCheck("run the tests", "default", Path("/p"))
    offered = SuggestionResult("push it", None, None, "push it")
    assert screened(offered, host, check) == SuggestionResult(
        None, "plugin:no_push", None, "push it"
    )
    kept = SuggestionResult("commit this", None, None, "commit this")
    assert screened(kept, host, check) is kept
    nothing = SuggestionResult(None, "empty", None)
    assert screened(nothing, host, check) is nothing
