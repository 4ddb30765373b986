"""The next-prompt prediction folded into the answer: taken off the end of the text, never
shown while it streams however the stream is cut, and anything else shown as written."""

from __future__ import annotations

import itertools
import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from qshell.agent.prediction import (
    CLOSE,
    OPEN,
    PredictionFilter,
    confidence_in,
    read_prediction,
    split_prediction,
)

OPEN_72 = '<next-prompt confidence="0.72">'


def shown(chunks: list[str]) -> str:
    """What a front-end shows of a round streamed in `chunks`."""
    screen = PredictionFilter()
    return "".join(screen.feed(c) for c in chunks) + screen.finish()


def cuts(text: str, points: list[int]) -> list[str]:
    edges = sorted({0, len(text), *(p % (len(text) + 1) for p in points)})
    return [text[a:b] for a, b in itertools.pairwise(edges)]


def test_a_trailing_prediction_is_split_off():
    text = f"All 12 tests pass.\n\n{OPEN}commit this{CLOSE}\n"
    assert split_prediction(text) == ("All 12 tests pass.", "commit this")
    assert split_prediction(f"Done.\n{OPEN}{CLOSE}") == ("Done.", "")
    assert split_prediction("Done.") == ("Done.", None)


@pytest.mark.parametrize(
    "line",
    [
        f"{OPEN}run the tests",  # cut off at the output limit inside it
        f"{OPEN}run the tests</next_prompt>",
        f"**{OPEN}run the tests{CLOSE}**",
        f"`{OPEN}run the tests{CLOSE}`",
        "<NEXT-PROMPT>run the tests</NEXT-PROMPT>",
        "<next_prompt>run the tests</next_prompt>",
    ],
)
def test_a_last_line_that_starts_with_the_tag_is_the_prediction_however_spelt(line):
    text = f"It works.\n\n{line}"
    assert split_prediction(text) == ("It works.", "run the tests")
    assert shown([text[i : i + 2] for i in range(0, len(text), 2)]) == "It works."


def test_long_runs_of_whitespace_cost_linear_time():
    screen = PredictionFilter()
    started = time.process_time()
    for _ in range(50_000):
        screen.feed(" ")
    screen.feed("x")
    took = time.process_time() - started
    screen.finish()
    small = PredictionFilter()
    started = time.process_time()
    for _ in range(5_000):
        small.feed(" ")
    small.feed("x")
    assert took < 50 * max(time.process_time() - started, 1e-4)  # 10x the text, not 100x


def test_the_tag_anywhere_but_the_end_is_not_a_prediction():
    quoted = f"The model writes {OPEN}x{CLOSE} at the end, like this."
    assert split_prediction(quoted) == (quoted, None)
    assert shown([quoted]) == quoted
    unclosed = f"Type {OPEN} to start"
    assert shown([unclosed]) == unclosed
    same_line = f"Done. {OPEN}x{CLOSE}"  # it must be a line of its own
    assert split_prediction(same_line) == (same_line, None)
    assert shown([same_line]) == same_line
    inside = f"Run:\n{OPEN}x{CLOSE}\nthen go on."
    assert shown([inside[i : i + 3] for i in range(0, len(inside), 3)]) == inside


def test_the_prediction_never_reaches_the_screen_while_it_streams():
    text = f"It works.\n\n{OPEN}run the tests{CLOSE}"
    chunks = [text[i : i + 3] for i in range(0, len(text), 3)]
    screen = PredictionFilter()
    seen = ""
    for chunk in chunks:
        seen += screen.feed(chunk)
        assert "<next" not in seen and "run the tests" not in seen
    assert seen + screen.finish() == "It works."


# pieces that spell the tags, parts of them and text around them, in any order
PIECES = ["a", "b", " ", "\n", "\r\n", OPEN, CLOSE, "<next", "-prompt>", "</", "x y", "<", ">"]
PIECES += ["\r", "\x85", "\u2028", "\x0b"]  # line breaks to Python, not to a prediction line
PIECES += ["**", "`", "<NEXT_PROMPT>", "</next_prompt>"]
PIECES += [OPEN_72, "<next-prompt ", 'confidence="', '0.4"', "1.5"]  # the confidence attribute
prose = st.lists(st.sampled_from(PIECES), max_size=20).map("".join)


@given(prose, st.lists(st.integers(min_value=0, max_value=200), max_size=8))
def test_the_screen_shows_what_split_keeps_however_the_stream_is_cut(text, points):
    visible, prediction = split_prediction(text)
    assert shown(cuts(text, points)) == visible
    if prediction is None:
        assert visible == text


@given(
    prose,
    st.text(alphabet=st.sampled_from("abc xyz"), max_size=30),
    st.lists(st.integers(min_value=0, max_value=300), max_size=8),
)
def test_with_a_trailer_the_screen_shows_what_split_keeps(body, words, points):
    text = f"{body}\n{OPEN}{words}{CLOSE}\n"
    visible, prediction = split_prediction(text)
    assert prediction == words.strip()
    assert shown(cuts(text, points)) == visible


def test_the_confidence_in_the_tag_is_read_and_the_words_stay_the_same():
    text = f"All 12 tests pass.\n\n{OPEN_72}commit this{CLOSE}\n"
    assert read_prediction(text) == ("All 12 tests pass.", "commit this", 0.72)
    assert split_prediction(text) == ("All 12 tests pass.", "commit this")
    single = "Done.\n<NEXT_PROMPT Confidence='.3'>yes</next_prompt>"
    assert read_prediction(single) == ("Done.", "yes", 0.3)


def test_a_line_without_a_usable_confidence_is_still_a_prediction_of_unknown_confidence():
    assert read_prediction(f"Done.\n{OPEN}commit this{CLOSE}") == ("Done.", "commit this", None)
    outside = 'Done.\n<next-prompt confidence="1.5">commit this</next-prompt>'
    assert read_prediction(outside) == ("Done.", "commit this", None)
    other = 'Done.\n<next-prompt tone="dry">commit this</next-prompt>'
    assert read_prediction(other) == ("Done.", "commit this", None)
    assert confidence_in(' confidence="0"') == 0.0 and confidence_in(None) is None


@pytest.mark.parametrize("size", [1, 2, 5])
def test_the_confidence_attribute_never_reaches_the_screen_while_it_streams(size):
    text = f"It works.\n\n{OPEN_72}run the tests{CLOSE}"
    screen = PredictionFilter()
    seen = ""
    for i in range(0, len(text), size):
        seen += screen.feed(text[i : i + size])
        assert "<next" not in seen and "confidence" not in seen and "0.72" not in seen
    assert seen + screen.finish() == "It works."


def test_an_answer_cut_off_inside_the_attribute_shows_nothing_of_the_tag():
    text = 'It works.\n\n<next-prompt confidence="0.'
    assert split_prediction(text) == ("It works.", "")
    assert shown([text[i : i + 4] for i in range(0, len(text), 4)]) == "It works."


@given(st.text(alphabet="ab .\n*", max_size=30), st.lists(st.integers(1, 60), max_size=6))
def test_once_the_prediction_line_is_known_nothing_more_is_shown(body, cuts):
    """`predicting` turns on only when the opening tag is whole, and from then on the screen
    gets nothing: the answer as shown is already complete (the prompt may come back)."""
    text = f"{body}\n\n{OPEN_72}run the tests{CLOSE}"
    points = sorted({c % len(text) for c in cuts} | {0, len(text)})
    screen = PredictionFilter()
    seen, known_at = "", None
    for start, end in itertools.pairwise(points):
        seen += screen.feed(text[start:end])
        if screen.predicting and known_at is None:
            known_at = seen
    seen += screen.finish()
    assert known_at is not None and known_at == seen == split_prediction(text)[0]


def test_a_tag_not_yet_whole_or_text_after_the_line_is_not_predicting():
    screen = PredictionFilter()
    screen.feed("Done.\n\n<next-prompt confid")
    assert not screen.predicting
    screen.feed('ence="0.5">run it')
    assert screen.predicting
    assert screen.feed("</next-prompt>\nMore words follow.") != ""
    assert not screen.predicting  # not the last line after all: shown as written


SPREAD = '{OPEN}\n[\n  {{"text": "run the tests", "confidence": 0.9}},\n  "commit this"\n]\n{CLOSE}'


@pytest.mark.parametrize("size", [1, 2, 5, 1000])
def test_a_json_list_spread_over_lines_is_the_prediction_and_never_reaches_the_screen(size):
    text = "It works.\n\n" + SPREAD.format(OPEN=OPEN, CLOSE=CLOSE) + "\n"
    visible, words, _ = read_prediction(text)
    assert visible == "It works."
    assert words is not None and words.startswith("[") and words.endswith("]")
    screen = PredictionFilter()
    seen = ""
    for at in range(0, len(text), size):
        seen += screen.feed(text[at : at + size])
        assert "<next" not in seen and "run the tests" not in seen
    assert seen + screen.finish() == "It works."


@pytest.mark.parametrize(
    "text",
    [
        f"Use it so:\n{OPEN}\nthen write prose here\n",  # no JSON after the tag
        f"Start:\n{OPEN}[1, 2]{CLOSE}\nand text after it",  # the tag is not at the end
        f"Long:\n{OPEN}[\n" + "  1,\n" * 200 + f"]{CLOSE}",  # longer than MAX_CHARS
    ],
)
def test_a_tag_line_that_does_not_open_a_json_list_ending_the_text_is_shown(text):
    assert split_prediction(text) == (text, None)
    assert shown([text[i : i + 3] for i in range(0, len(text), 3)]) == text


SPREAD_PIECES = [
    *PIECES,
    "[",
    "]",
    "{",
    "}",
    ", ",
    '"text": "a b"',
    "\n  ",
    f"{OPEN}[",
    f"{OPEN}\n[",
]
spread_prose = st.lists(st.sampled_from(SPREAD_PIECES), max_size=24).map("".join)


@given(spread_prose, st.lists(st.integers(min_value=0, max_value=300), max_size=8))
def test_a_list_spread_over_lines_is_shown_as_split_keeps_however_the_stream_is_cut(text, points):
    visible, prediction = split_prediction(text)
    assert shown(cuts(text, points)) == visible
    if prediction is None:
        assert visible == text


@pytest.mark.parametrize(
    "text",
    [
        f"{OPEN}\n  {OPEN}\n[",  # a tag line, then the tag again opening the list
        f"<NEXT_PROMPT>\n{OPEN}[1]{CLOSE}\n",
        f"ok\n{OPEN}\n\n[\n 1,\n]\nnot the end",
        f"ok\n{OPEN}[\n{OPEN}[2]{CLOSE}",
    ],
)
def test_a_list_that_turns_out_not_to_be_the_prediction_is_shown_however_it_is_cut(text):
    visible, _ = split_prediction(text)
    for at in range(len(text) + 1):
        assert shown([text[:at], text[at:]]) == visible


@pytest.mark.parametrize("brk", ["\r", "\x85", "\u2028", "\x0c"])
def test_a_lone_carriage_return_or_other_separator_in_the_line_is_hidden_while_it_streams(brk):
    text = f"Done.\n\n<NEXT_PROMPT>{brk}run the tests{CLOSE}"
    assert split_prediction(text)[0] == "Done."
    for size in (1, 2, 3, 7):
        assert shown([text[i : i + size] for i in range(0, len(text), size)]) == "Done."
