"""Both renderers fold the model's reasoning to one dim line when it ends, `/expand` shows it
whole, `showReasoning: false` hides it, and an answer that did not finish says why."""

from __future__ import annotations

import io

import pytest

from qshell.agent.events import (
    Event,
    ReasoningDelta,
    RoundFinished,
    TextDelta,
    ToolFinished,
    ToolStarted,
    TurnFinished,
)
from qshell.llm.messages import Usage
from qshell.tools.base import ToolResult
from qshell.ui.live import FRAME_S
from qshell.ui.render_plain import PlainRenderer
from qshell.ui.render_rich import RichRenderer
from tests.ui.test_live import live_renderer

THOUGHT = ["The user wants ", "a greeting.\nI will say hello", " back.\nShort is best."]
TURN: list[Event] = [
    *(ReasoningDelta(t) for t in THOUGHT),
    TextDelta("Hello!"),
    RoundFinished(1, Usage()),
    TurnFinished("Hello!", Usage(), 1),
]


def plain(events: list[Event], **kw: bool) -> tuple[PlainRenderer, io.StringIO]:
    out = io.StringIO()
    renderer = PlainRenderer(out, width=80, **kw)
    for event in events:
        renderer.event(event)
    renderer.end_turn()
    return renderer, out


def rich(events: list[Event], show_reasoning: bool = True) -> tuple[RichRenderer, io.StringIO]:
    out = io.StringIO()
    renderer = RichRenderer(file=out, width=80, environ={}, show_reasoning=show_reasoning)
    for event in events:
        renderer.event(event)
    renderer.end_turn()
    return renderer, out


@pytest.mark.parametrize("make", [plain, rich], ids=["plain", "rich"])
def test_reasoning_is_one_folded_line_before_the_answer_and_expand_shows_it(make) -> None:
    renderer, out = make(TURN)
    lines = out.getvalue().splitlines()
    fold = next(i for i, line in enumerate(lines) if line.startswith("∴ "))
    assert lines[fold] == "∴ The user wants a greeting. · 3 lines · /expand shows them"
    assert fold < next(i for i, line in enumerate(lines) if "Hello!" in line)
    assert "I will say hello" not in out.getvalue()
    renderer.expand()
    shown = out.getvalue().splitlines()[len(lines) :]
    assert [line.strip() for line in shown] == [
        shown[0].strip(),
        "The user wants a greeting.",
        "I will say hello back.",
        "Short is best.",
    ]
    assert "reasoning" in shown[0]


@pytest.mark.parametrize("make", [plain, rich], ids=["plain", "rich"])
def test_show_reasoning_off_hides_it(make) -> None:
    renderer, out = make(TURN, show_reasoning=False)
    assert "∴" not in out.getvalue() and "greeting" not in out.getvalue()
    renderer.expand()
    assert "no output was cut short" in out.getvalue()


@pytest.mark.parametrize("make", [plain, rich], ids=["plain", "rich"])
def test_an_unfinished_answer_says_why_above_the_usage_line(make) -> None:
    note = "the answer was cut off at the output limit (8,192 tokens a round)"
    end = TurnFinished("Writ", Usage(), 1, stop_reason="max_tokens", note=note)
    _, out = make([TextDelta("Writ"), end])
    lines = out.getvalue().splitlines()
    at = next(i for i, line in enumerate(lines) if line == f"! {note}")
    assert lines[at + 1].startswith("tokens:")


def test_on_a_terminal_the_spinner_counts_reasoning_words_while_it_streams() -> None:
    renderer, term, clock = live_renderer(rows=10)
    for _ in range(10):
        clock.now += 2 * FRAME_S  # each delta a frame or more after the last
        renderer.event(ReasoningDelta("one two three "))
    assert "thinking · 30 words of reasoning" in term.read()[-1]
    renderer.event(TextDelta("Hi"))
    renderer.end_turn()
    screen = term.read()
    assert "words of reasoning" not in "\n".join(screen)
    assert screen[0].startswith("∴ one two three") and screen[-1] == "Hi"


@pytest.mark.parametrize("make", [plain, rich], ids=["plain", "rich"])
def test_reasoning_that_comes_after_some_text_is_folded_after_that_text(make) -> None:
    events: list[Event] = [
        TextDelta("First I read the file.\n\nThen "),
        ReasoningDelta("Wait, the file may be missing."),
        TextDelta("I check that it exists."),
        TurnFinished("", Usage(), 1),
    ]
    _, out = make(events)
    text = out.getvalue()
    first, fold, then = (
        text.index("First I read"),
        text.index("∴ Wait, the file"),
        text.index("I check that"),
    )
    assert first < fold < then


def test_on_a_terminal_reasoning_after_text_is_folded_below_it() -> None:
    renderer, term, clock = live_renderer(rows=10)
    events: list[Event] = [
        TextDelta("First I read the file.\n\nThen "),
        ReasoningDelta("Wait, the file may be missing."),
        TextDelta("I check that it exists."),
    ]
    for event in events:
        clock.now += 2 * FRAME_S
        renderer.event(event)
    renderer.end_turn()
    screen = [line for line in term.read() if line]
    assert screen[0] == "First I read the file."
    assert screen[1] == "Then"
    assert screen[2].startswith("∴ Wait, the file")
    assert screen[3] == "I check that it exists."


@pytest.mark.parametrize("make", [plain, rich], ids=["plain", "rich"])
def test_expand_still_shows_a_cut_call_whole_when_the_next_round_reasoned(make) -> None:
    """A reasoning model reasons at the start of every round, so the round after a cut
    call always folds some: the call's "/expand shows them" must still hold."""
    output = "\n".join(f"row {n}" for n in range(100))
    events: list[Event] = [
        ToolStarted("s", "shell", {"command": "seq 100"}),
        ToolFinished("s", "shell", ToolResult(llm_content=output, display=output)),
        RoundFinished(1, Usage()),
        ReasoningDelta("The rows go on to 99."),
        TextDelta("There are 100 rows."),
        TurnFinished("There are 100 rows.", Usage(), 2),
    ]
    renderer, out = make(events)
    before = out.getvalue()
    assert "row 99" not in before and before.count("/expand shows them") == 2
    renderer.expand()
    shown = out.getvalue()[len(before) :]
    assert "row 99\n" in shown and "row 17\n" in shown  # the call's output, whole
    assert shown.index("row 99") < shown.index("The rows go on to 99.")  # then the reasoning


def test_expand_shows_only_the_newer_of_a_cut_call_and_reasoning_from_another_turn() -> None:
    output = "\n".join(f"row {n}" for n in range(100))
    call: list[Event] = [
        ToolStarted("s", "shell", {"command": "seq 100"}),
        ToolFinished("s", "shell", ToolResult(llm_content=output, display=output)),
    ]
    thought: list[Event] = [
        ReasoningDelta("Only a greeting."),
        TextDelta("Hi"),
        TurnFinished("Hi", Usage(), 1),
    ]
    for first, then, kept, gone in (
        (call, thought, "Only a", "row 99"),
        (thought, call, "row 99", "Only a"),
    ):
        out = io.StringIO()
        renderer = PlainRenderer(out, width=80)
        for turn in (first, then):
            for event in turn:
                renderer.event(event)
            renderer.end_turn()
        before = len(out.getvalue())
        renderer.expand()
        shown = out.getvalue()[before:]
        assert kept in shown and gone not in shown


def test_the_reasoning_spinner_starts_with_the_first_delta_whatever_the_clock_reads() -> None:
    """A fast server's reasoning may begin before the driver ever reported a wait; the
    spinner must not depend on how the clock's float rounds."""
    renderer, term, clock = live_renderer(rows=10)
    clock.now = 12345.678  # a monotonic clock is far from zero
    for _ in range(10):
        clock.now += 2 * FRAME_S
        renderer.event(ReasoningDelta("one two three "))
    assert "thinking · 30 words of reasoning" in term.read()[-1]
