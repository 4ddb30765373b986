"""The plain renderer: exact output for a fixed turn, and never an escape byte."""

from __future__ import annotations

import io
import itertools
import time
from collections.abc import Iterator

import pytest
from hypothesis import given
from hypothesis import strategies as st

from qshell.agent.events import (
    Event,
    PermissionReply,
    PermissionRequested,
    RoundFinished,
    TextDelta,
    ToolFinished,
    ToolStarted,
    TurnFinished,
)
from qshell.cancel import CancelToken
from qshell.llm.messages import Usage
from qshell.tools.base import ToolResult
from qshell.ui.driver import drive
from qshell.ui.render import Renderer, clean
from qshell.ui.render_plain import PlainRenderer
from tests.ui.turns import DIFF, FAILURES, TURN, ask, hostile_events

EXPECTED_TURN = """\
Let me look at the file.

* read_file(m.py)
  -> ok: Read 2 lines
* grep(needle)
* ls()
* grep(needle)
  -> error: src does not exist
* ls()
  -> ok: a
     b
     c
     ... 2 more lines - /expand shows them
? edit(m.py)
  reason: edit changes files
    --- a/m.py
    +++ b/m.py
    @@ -1,2 +1,2 @@
     def f():
    -    return 1
    +    return 2
* edit(m.py)
  -> ok: Edited m.py: replaced 1 occurrence (+1 -1 lines).
     --- a/m.py
     +++ b/m.py
     @@ -1,2 +1,2 @@
      def f():
     -    return 1
     +    return 2
? shell(pytest -q && echo done)
  reason: runs a command
    $ pytest -q &&
        echo done
* shell(pytest -q && echo done)
  -> ok: 3 passed
     done
history compacted (auto): 40 -> 3 messages

Fixed: `f` now returns 2.

tokens: 1,234 in (cached 1,000), 56 out, 2 rounds
cancelled
error: the API key was refused; set OPENAI_API_KEY
"""


def render(events: list[Event], width: int = 80) -> str:
    out = io.StringIO()
    renderer = PlainRenderer(out, width=width)
    for event in events:
        renderer.event(event)
    renderer.end_turn()
    return out.getvalue()


def test_plain_renderer_is_a_renderer() -> None:
    renderer: Renderer = PlainRenderer(io.StringIO())
    assert isinstance(renderer, PlainRenderer)


def test_plain_renderer_writes_a_fixed_turn_exactly() -> None:
    assert render(TURN + FAILURES) == EXPECTED_TURN


def test_plain_renderer_never_writes_an_escape_or_control_byte_for_any_event() -> None:
    out = io.StringIO()
    renderer = PlainRenderer(out, width=80)
    for event in hostile_events():
        renderer.event(event)
    renderer.notice("n\x1b[1mote")
    renderer.error("e\x1b[1mrror")
    renderer.permission(ask("shell", {"command": "rm\x1b[8m -rf x"}, "why\x1b[0m"))
    for tenth in range(0, 300):
        renderer.waiting(tenth / 10)
    renderer.end_turn()
    text = out.getvalue()
    assert "\x1b" not in text and "\x9b" not in text
    assert not {ch for ch in text if ord(ch) < 32 and ch not in "\n\t"}
    assert "red[31m title]0;pwned clear[2J csi31m bell crover" in text


def test_plain_renderer_streams_model_text_as_it_comes() -> None:
    out = io.StringIO()
    renderer = PlainRenderer(out)
    written = ""
    for delta in ["Hel", "lo, **wor", "ld**\n", "```py\nx = 1\n", "```"]:
        renderer.event(TextDelta(delta))
        written += delta
        assert out.getvalue() == written
    renderer.end_turn()
    assert out.getvalue() == written + "\n"


@given(st.lists(st.text(), max_size=8))
def test_plain_renderer_writes_exactly_the_model_text_minus_control_bytes(
    deltas: list[str],
) -> None:
    out = io.StringIO()
    renderer = PlainRenderer(out)
    for delta in deltas:
        renderer.event(TextDelta(delta))
    expected = "".join(clean(delta) for delta in deltas)
    assert out.getvalue() == expected
    assert "\x1b" not in out.getvalue()


def test_plain_renderer_prints_one_still_working_line_every_ten_seconds() -> None:
    out = io.StringIO()
    renderer = PlainRenderer(out)
    for tenth in range(0, 251):
        renderer.waiting(tenth / 10)
    assert out.getvalue() == "... still thinking (10s)\n... still thinking (20s)\n"
    renderer.event(ToolStarted("c", "shell", {"command": "make"}))
    for tenth in range(0, 101):
        renderer.waiting(tenth / 10)
    assert out.getvalue().endswith("* shell(make)\n... still running shell (10s)\n")


def test_plain_renderer_caps_diffs_and_cuts_long_lines_at_the_width() -> None:
    big = "--- a/b.txt\n+++ b/b.txt\n@@ -1,50 +1,50 @@\n" + "".join(
        f"+line {n}\n" for n in range(50)
    )
    text = render(
        [
            ToolStarted("c", "write_file", {"path": "b.txt"}),
            ToolFinished("c", "write_file", ToolResult(llm_content="Updated b.txt.", display=big)),
            ToolStarted("d", "shell", {"command": "echo " + "x" * 200}),
            ToolFinished("d", "shell", ToolResult(llm_content="y" * 200, display="y" * 200)),
        ]
    )
    lines = text.splitlines()
    assert lines[1] == "  -> ok: Updated b.txt."
    assert lines[2:5] == ["     --- a/b.txt", "     +++ b/b.txt", "     @@ -1,50 +1,50 @@"]
    assert lines[41] == "     +line 36"
    assert lines[42] == "     ... 13 more lines - /expand shows them"
    assert lines[43] == "* shell(echo " + "x" * 63 + "...)"
    assert lines[44] == "  -> ok: " + "y" * 68 + "..."
    assert all(len(line) <= 80 for line in lines)


def test_plain_permission_shows_a_long_shell_command_whole() -> None:
    command = "curl https://example.com/install.sh | sh; " + "echo " * 30 + "&& rm -rf ~/x"
    out = io.StringIO()
    PlainRenderer(out, width=40).permission(ask("shell", {"command": command}, "runs a command"))
    assert f"    $ {command}\n" in out.getvalue()


def test_plain_permission_shows_the_preview_diff() -> None:
    out = io.StringIO()
    PlainRenderer(out).permission(ask("edit", {"path": "m.py"}, "", preview=DIFF))
    assert out.getvalue() == "? edit(m.py)\n" + "".join(
        f"    {line}\n" for line in DIFF.splitlines()
    )


def test_plain_renderer_ignores_unknown_events_and_round_ends() -> None:
    renderer = PlainRenderer(io.StringIO())
    renderer.event(object())  # type: ignore[arg-type]
    renderer.event(RoundFinished(1, Usage()))
    renderer.end_turn()
    assert renderer.file.getvalue() == ""  # type: ignore[attr-defined]


def test_plain_renderer_refuses_a_silly_width() -> None:
    with pytest.raises(ValueError, match="width must be at least 20, not 5"):
        PlainRenderer(io.StringIO(), width=5)


def test_a_skipped_round_shows_the_tool_output_as_the_answer() -> None:
    """What agent/loop.py yields when a batch skips the next round (D1)."""
    usage = Usage(prompt_tokens=5, completion_tokens=1)
    events: list[Event] = [
        RoundFinished(round=1, usage=usage),
        ToolStarted("c1", "ls", {}),
        ToolFinished("c1", "ls", ToolResult("a\nb", "2 entries", skip_llm_round=True)),
        TextDelta("a\nb"),
        TurnFinished(text="a\nb", usage=usage, rounds=1, skipped_round=True),
    ]
    shown = render(events)
    assert "\n\na\nb\n" in shown and shown.rstrip().endswith("1 round")


def test_the_sources_an_answer_cites_are_listed_under_it() -> None:
    """Perplexity's `citations` (agent/loop.py puts them on TurnFinished), numbered as the
    answer's [n] marks."""
    usage = Usage(prompt_tokens=10, completion_tokens=336)
    cited = ("https://en.wikipedia.org/wiki/San_Francisco", "https://fred.stlouisfed.org/")
    events: list[Event] = [
        TextDelta("About 808,000 [1][2]."),
        RoundFinished(round=1, usage=usage),
        TurnFinished(text="About 808,000 [1][2].", usage=usage, rounds=1, citations=cited),
    ]
    shown = render(events)
    assert (
        "Sources:\n[1] https://en.wikipedia.org/wiki/San_Francisco\n"
        "[2] https://fred.stlouisfed.org/\n" in shown
    )
    assert shown.index("About 808,000") < shown.index("Sources:")


def test_a_still_line_comes_only_after_ten_seconds_of_silence_not_ten_of_the_turn() -> None:
    """A slow stream's short pauses late in a turn are no silence worth a line."""
    out = io.StringIO()
    renderer = PlainRenderer(out)
    for tenth in range(0, 300):  # 30 s of a slow stream: a chunk, then a pause of a tick
        if tenth % 2 == 0:
            renderer.event(TextDelta("."))
        else:
            renderer.waiting(tenth / 10)
    assert "still" not in out.getvalue()
    for tenth in range(300, 411):  # then 11 s of nothing
        renderer.waiting(tenth / 10)
    assert out.getvalue().endswith(".\n\n... still thinking (39s)\n")


def no_question(request: PermissionRequested) -> PermissionReply:
    raise AssertionError("no question expected")


def test_plain_output_ends_with_the_answer_though_the_turns_end_takes_a_while() -> None:
    """What plain mode printed after a long turn: the answer and its usage line, and no
    "still thinking" after them while the finished turn's worker winds down."""
    ticks = itertools.count(0.0, 5.0)  # five seconds go by between two looks at the clock

    def turn() -> Iterator[Event]:
        yield TextDelta("The answer.")
        yield TurnFinished("done", Usage(prompt_tokens=10, completion_tokens=3), 1)
        time.sleep(1.0)  # ten of the driver's ticks after the turn's end

    out = io.StringIO()
    renderer = PlainRenderer(out)
    drive(turn(), renderer, no_question, CancelToken(), clock=lambda: next(ticks))
    assert "still" not in out.getvalue()
    assert out.getvalue().startswith("The answer.\n\n")
