"""generate_suggestion with an in-process scripted provider: parsing, rejections, failures."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from qshell.cancel import CancelToken
from qshell.errors import Cancelled, ProviderUnavailable, RateLimited
from qshell.followup.suggestion import (
    MAX_REPLY_CHARS,
    SUGGESTION_PROMPT,
    extract_suggestion,
    folded_suggestion,
    generate_suggestion,
)
from qshell.llm.base import StreamDone, StreamEvent, StreamText
from qshell.llm.fork import CacheSafeParams
from qshell.llm.messages import ChatRequest, Message, ToolCall, ToolResultBlock, ToolSpec, Usage
from tests.agent.scripted import ScriptedProvider, Step

TOOLS = [ToolSpec(name="ls", description="list", parameters={"type": "object"})]


def main_params() -> CacheSafeParams:
    """A finished two-round turn: the captured request is the second round's."""
    call = ToolCall(id="c1", name="ls")
    request = ChatRequest(
        model="main-model",
        system="sys",
        messages=[
            Message.user("fix the bug and run tests"),
            Message.assistant("", [call]),
            Message(role="user", content=[ToolResultBlock(tool_call_id="c1", content="a.py")]),
        ],
        tools=TOOLS,
        max_tokens=4096,
        temperature=0.2,
    )
    return CacheSafeParams.capture(request, Message.assistant("Fixed the bug in a.py."))


def run(reply: Step, **kw) -> tuple:
    provider = ScriptedProvider([reply])
    result = generate_suggestion(provider, main_params(), CancelToken(), **kw)
    return result, provider


def test_a_plain_text_reply_becomes_the_suggestion():
    result, _ = run(Message.assistant("run the tests"))
    assert (result.text, result.reason) == ("run the tests", None)
    assert result.usage == Usage(prompt_tokens=10, completion_tokens=2, cached_tokens=4)


def test_a_json_reply_is_read_from_its_suggestion_field():
    result, _ = run(Message.assistant('{"suggestion": "commit this"}'))
    assert result.text == "commit this"


def test_an_empty_json_suggestion_is_empty():
    result, _ = run(Message.assistant('{"suggestion": ""}'))
    assert (result.text, result.reason) == (None, "empty")


def test_surrounding_quotes_and_whitespace_are_stripped():
    result, _ = run(Message.assistant('  "push it"\n'))
    assert result.text == "push it"


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ("“try it out”", "try it out"),
        ('```json\n{"suggestion": "run the tests"}\n```', "run the tests"),
        ("<think>they asked for tests</think>run the tests", "run the tests"),
        ("{not json", "{not json"),
        ('[{"text": "run the tests", "confidence": 0.9}, {"text": "comm', "run the tests"),
        ('["run the tests", "commit this",]', "run the tests"),
        ("[WIP] commit this", "[WIP] commit this"),
        ('{"other": 1}', ""),
    ],
)
def test_extraction_handles_quotes_fences_reasoning_and_bad_json(reply, expected):
    assert extract_suggestion(reply) == expected


def test_a_tool_call_in_the_reply_is_ignored_and_its_text_kept():
    reply = Message.assistant("run the tests", [ToolCall(id="x", name="ls")])
    result, _ = run(reply)
    assert result.text == "run the tests"


def test_a_reply_with_only_a_tool_call_is_empty():
    result, _ = run(Message.assistant("", [ToolCall(id="x", name="ls")]))
    assert (result.text, result.reason) == (None, "empty")


def test_a_filtered_reply_is_rejected_with_the_filter_reason():
    result, _ = run(Message.assistant("Looks good to me"))
    assert (result.text, result.reason, result.candidate) == (
        None,
        "evaluative",
        "Looks good to me",
    )
    assert result.usage is not None


def test_a_suggestion_equal_to_the_previous_prompt_is_suppressed():
    result, _ = run(Message.assistant("Run  the Tests"), previous_prompt="run the tests ")
    assert (result.text, result.reason) == (None, "same_as_previous")


def test_a_different_previous_prompt_does_not_suppress():
    result, _ = run(Message.assistant("run the tests"), previous_prompt="fix the bug")
    assert result.text == "run the tests"


@pytest.mark.parametrize(
    "word", ["exit", "quit", "/exit", "/quit", "Quit.", "/EXIT", "/q", "/exit now", "/quit!"]
)
def test_exit_words_are_never_offered(word):
    result, _ = run(Message.assistant(word))
    assert (result.text, result.reason) == (None, "exit_word")


@pytest.mark.parametrize("command", ["/clear", "/undo", "/CLEAR", "/clear and start over"])
def test_commands_that_throw_work_away_are_never_offered(command):
    result, _ = run(Message.assistant(command))
    assert (result.text, result.reason) == (None, "discards_work")


@pytest.mark.parametrize("text", ["exit the loop early", "clear the cache", "/compact", "/stats"])
def test_the_same_words_outside_those_commands_are_offered(text):
    result, _ = run(Message.assistant(text))
    assert result.text == text


@pytest.mark.parametrize("error", [ProviderUnavailable("down"), RateLimited("slow down")])
def test_a_provider_error_fails_open_with_reason_error(error):
    result, _ = run(error)
    assert result == type(result)(None, "error", None)


def test_a_cancelled_stream_is_aborted():
    def cancelled(request: ChatRequest, cancel: CancelToken) -> Iterator[StreamEvent]:
        yield StreamText("run the")
        raise Cancelled("cancelled")

    provider = ScriptedProvider([cancelled])
    result = generate_suggestion(provider, main_params(), CancelToken())
    assert (result.text, result.reason) == (None, "aborted")


def test_the_cancel_token_is_passed_to_the_provider_and_stops_the_stream():
    seen: list[CancelToken] = []
    started = threading.Event()

    def blocking(request: ChatRequest, cancel: CancelToken) -> Iterator[StreamEvent]:
        seen.append(cancel)
        started.set()
        cancel.wait(30)
        cancel.raise_if_cancelled()
        yield StreamDone(Message.assistant("run the tests"), Usage(), "end_turn")

    token = CancelToken()
    results = []
    provider = ScriptedProvider([blocking])
    worker = threading.Thread(
        target=lambda: results.append(generate_suggestion(provider, main_params(), token))
    )
    worker.start()
    assert started.wait(10)
    token.cancel()
    worker.join(30)
    assert seen == [token]
    assert (results[0].text, results[0].reason) == (None, "aborted")


def test_an_already_cancelled_token_sends_no_request():
    token = CancelToken()
    token.cancel()
    provider = ScriptedProvider([Message.assistant("run the tests")])
    result = generate_suggestion(provider, main_params(), token)
    assert result.reason == "aborted" and provider.requests == []


def test_a_reply_that_runs_on_is_cut_and_its_stream_closed():
    closed = threading.Event()

    def rambling(request: ChatRequest, cancel: CancelToken) -> Iterator[StreamEvent]:
        try:
            while True:
                yield StreamText("and then some more words ")
        finally:
            closed.set()

    provider = ScriptedProvider([rambling])
    result = generate_suggestion(provider, main_params(), CancelToken())
    assert (result.text, result.reason) == (None, "too_long")
    assert closed.is_set()


def test_long_reasoning_before_a_short_answer_is_not_cut():
    reasoning = "<think>" + "they want tests " * (MAX_REPLY_CHARS // 8) + "</think>"

    def thinking(request: ChatRequest, cancel: CancelToken) -> Iterator[StreamEvent]:
        for start in range(0, len(reasoning), 50):
            yield StreamText(reasoning[start : start + 50])
        yield StreamText("run the tests")
        yield StreamDone(Message.assistant(reasoning + "run the tests"), Usage(), "end_turn")

    result = generate_suggestion(ScriptedProvider([thinking]), main_params(), CancelToken())
    assert result.text == "run the tests"


def test_the_fork_request_is_the_main_request_plus_reply_plus_prompt():
    params = main_params()
    _, provider = run(Message.assistant("run the tests"))
    (sent,) = provider.requests
    # `background` never reaches the wire; `reasoning_off` is what forks do by default
    same = {"messages", "background", "reasoning_off"}
    assert sent.model_dump(exclude=same) == params.request.model_dump(exclude=same)
    assert sent.background and not params.request.background
    assert sent.reasoning_off and not params.request.reasoning_off
    assert sent.messages == [
        *params.request.messages,
        params.reply,
        Message.user(SUGGESTION_PROMPT),
    ]


def test_the_fast_model_replaces_only_the_model():
    params = main_params()
    _, provider = run(Message.assistant("run the tests"), model="fast-model")
    (sent,) = provider.requests
    assert sent.model == "fast-model"
    assert sent.model_dump(exclude={"model"}) == params.fork(SUGGESTION_PROMPT).model_dump(
        exclude={"model"}
    )


def test_without_a_fast_model_the_main_model_is_used():
    _, provider = run(Message.assistant("run the tests"), model="")
    assert provider.requests[0].model == "main-model"


def test_a_captured_reply_still_waiting_for_tool_results_makes_no_request():
    params = main_params()
    waiting = CacheSafeParams.capture(
        params.request, Message.assistant("", [ToolCall(id="z", name="ls")])
    )
    provider = ScriptedProvider([Message.assistant("run the tests")])
    result = generate_suggestion(provider, waiting, CancelToken())
    assert result.reason == "pending_tool_calls" and provider.requests == []


def test_the_confidence_a_reply_gives_is_carried_with_the_suggestion():
    tagged, _ = run(Message.assistant('<next-prompt confidence="0.8">run the tests</next-prompt>'))
    assert (tagged.text, tagged.confidence) == ("run the tests", 0.8)
    as_json, _ = run(Message.assistant('{"suggestion": "commit this", "confidence": 0.35}'))
    assert (as_json.text, as_json.confidence) == ("commit this", 0.35)
    plain, _ = run(Message.assistant("run the tests"))
    assert (plain.text, plain.confidence) == ("run the tests", None)  # unknown, still shown


def test_a_confidence_outside_0_to_1_or_not_a_number_is_unknown():
    for reply in (
        '{"suggestion": "commit this", "confidence": 3}',
        '{"suggestion": "commit this", "confidence": true}',
    ):
        result, _ = run(Message.assistant(reply))
        assert (result.text, result.confidence) == ("commit this", None)


def test_the_suggestion_prompt_asks_for_a_list_of_guesses_each_with_its_confidence():
    assert '<next-prompt>[["WORDS", C], ...]</next-prompt>' in SUGGESTION_PROMPT
    assert "up to 3 different ones" in SUGGESTION_PROMPT


def test_a_list_of_guesses_gives_the_first_and_its_alternatives_in_order():
    reply = (
        '<next-prompt>[{"text": "run the tests", "confidence": 0.7},'
        ' {"text": "commit this", "confidence": 0.2}, ["show the diff", 0.1]]</next-prompt>'
    )
    result, _ = run(Message.assistant(reply))
    assert result.texts == ("run the tests", "commit this", "show the diff")
    assert [c.confidence for c in result.candidates] == [0.7, 0.2, 0.1]


def test_rejected_and_repeated_guesses_are_dropped_and_the_next_one_leads():
    reply = (
        '[{"text": "Looks good!", "confidence": 0.9}, {"text": "run the tests", "confidence": 0.5},'
        ' {"text": "Run the  tests", "confidence": 0.4}, "commit this", "push it",'
        ' "show the diff", 7]'
    )
    result, _ = run(Message.assistant(reply))
    assert (result.text, result.confidence) == ("run the tests", 0.5)
    assert result.texts == ("run the tests", "commit this", "push it")  # at most three


def test_a_list_whose_guesses_all_fail_is_rejected_with_the_first_ones_reason():
    for reply, reason in (('["Looks good!", "great"]', "evaluative"), ("[]", "empty")):
        result, _ = run(Message.assistant(reply))
        assert (result.text, result.reason, result.texts) == (None, reason, ())


def test_a_folded_list_of_guesses_keeps_each_confidence():
    result = folded_suggestion('[{"text": "yes", "confidence": 0.8}, ["no", 0.1]]', confidence=0.3)
    assert [(c.text, c.confidence) for c in result.candidates] == [("yes", 0.8), ("no", 0.1)]


def test_a_folded_prediction_keeps_its_confidence_and_a_rejected_one_drops_it():
    assert folded_suggestion("run the tests", confidence=0.6).confidence == 0.6
    rejected = folded_suggestion("", confidence=0.9)
    assert (rejected.text, rejected.reason, rejected.confidence) == (None, "empty", None)


@pytest.mark.parametrize(
    "reply",
    ['{"suggestion": "run the te', '[{"text": "run the', '["run the', "[" * 5000],
)
def test_json_cut_off_before_any_whole_guess_is_never_offered_as_words(reply):
    assert folded_suggestion(reply).text is None
    assert folded_suggestion(reply).reason == "json_fragment"


def test_a_cut_off_list_keeps_the_confidence_of_each_guess_it_completed():
    cut = '[{"text": "run the tests", "confidence": 0.9}, {"text": "commit this", "confid'
    assert [(c.text, c.confidence) for c in folded_suggestion(cut).candidates] == [
        ("run the tests", 0.9)
    ]


@pytest.mark.parametrize(
    ("confidence", "expected"),
    [
        *[('"0.7"', 0.7), ('" 0.25 "', 0.25), ('"1"', 1.0), ('"nan"', None), ('"1.5"', None)],
        *[('"high"', None), ("NaN", None), ("Infinity", None), ("-0.2", None), ("[0.5]", None)],
    ],
)
def test_a_guess_confidence_is_a_number_from_0_to_1_or_a_string_holding_one(confidence, expected):
    guesses = f'[{{"text": "run the tests", "confidence": {confidence}}}]'
    result = folded_suggestion(guesses)
    assert (result.text, result.confidence) == ("run the tests", expected)
