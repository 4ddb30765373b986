"""The rich renderer: key lines, colour vs NO_COLOR, Markdown blocks, spinner, injection."""

from __future__ import annotations

import io
import re
from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from rich.console import Console
from rich.markdown import Markdown

from qshell.agent.events import Event, RoundFinished, TextDelta, ToolFinished, ToolStarted
from qshell.llm.messages import Usage
from qshell.tools.base import ToolResult
from qshell.ui.model_markdown import finished_blocks
from qshell.ui.render import Renderer
from qshell.ui.render_rich import RichRenderer
from tests.ui.turns import FAILURES, TURN, ask, hostile_events

COLOUR = {"TERM": "xterm-256color", "FORCE_COLOR": "1"}
NO_COLOUR = {**COLOUR, "NO_COLOR": "1"}
SGR_RE = re.compile(r"\x1b\[([0-9;]*)m")
COLOUR_PARAMS = {str(n) for n in [*range(30, 39), *range(40, 49), *range(90, 98), *range(100, 108)]}


class SpyConsole(Console):
    """A console that also records the source of every Markdown block it prints."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.markups: list[str] = []

    def print(self, *objects: Any, **kwargs: Any) -> None:
        self.markups += [obj.markup for obj in objects if isinstance(obj, Markdown)]
        super().print(*objects, **kwargs)


def renderer(environ: dict[str, str] | None = None) -> tuple[RichRenderer, io.StringIO]:
    out = io.StringIO()
    return RichRenderer(file=out, width=80, environ=environ or {}), out


def render(events: list[Event], environ: dict[str, str] | None = None) -> str:
    r, out = renderer(environ)
    for event in events:
        r.event(event)
    r.end_turn()
    return out.getvalue()


def spy() -> tuple[RichRenderer, SpyConsole]:
    console = SpyConsole(file=io.StringIO(), width=80, _environ={})
    return RichRenderer(console), console


def test_rich_renderer_is_a_renderer_and_uses_a_given_console() -> None:
    r, console = spy()
    checked: Renderer = r
    assert checked.console is console  # type: ignore[attr-defined]


def test_rich_renderer_shows_the_turn_as_compact_tool_groups_and_a_usage_line() -> None:
    lines = [line.rstrip() for line in render(TURN + FAILURES).splitlines()]
    expected = [
        "Let me look at the file.",
        "● read_file(m.py)",
        "  ⎿ ok: Read 2 lines",
        "● grep(needle)",
        "● ls()",
        "● grep(needle)",
        "  ⎿ error: src does not exist",
        "● ls()",
        "  ⎿ ok: a",
        "    b",
        "    c",
        "    … 2 more lines · /expand shows them",
        "? edit(m.py)",
        "  edit changes files",
        "    --- a/m.py",
        "    -    return 1",
        "    +    return 2",
        "● edit(m.py)",
        "  ⎿ ok: Edited m.py: replaced 1 occurrence (+1 -1 lines).",
        "    @@ -1,2 +1,2 @@",
        "? shell(pytest -q && echo done)",
        "    $ pytest -q &&",
        "        echo done",
        "  ⎿ ok: 3 passed",
        "history compacted (auto): 40 → 3 messages",
        "Fixed: f now returns 2.",
        "tokens: 1,234 in (cached 1,000) · 56 out · 2 rounds",
        "cancelled",
        "error: the API key was refused; set OPENAI_API_KEY",
    ]
    remaining = iter(lines)
    assert [line for line in expected if line in remaining] == expected  # in this order


def test_rich_renderer_colours_diffs_and_errors() -> None:
    text = render(TURN + FAILURES, COLOUR)
    assert "\x1b[32m    +    return 2\x1b[0m" in text
    assert "\x1b[31m    -    return 1\x1b[0m" in text
    assert "\x1b[36m    @@ -1,2 +1,2 @@\x1b[0m" in text
    assert "\x1b[1;31merror: the API key was refused" in text


def test_no_color_keeps_formatting_but_writes_no_colour_code() -> None:
    text = render(TURN + FAILURES, NO_COLOUR)
    params = {p for group in SGR_RE.findall(text) for p in group.split(";")}
    assert "1" in params  # bold is formatting, not colour
    assert not params & COLOUR_PARAMS
    assert not re.search(r"(^|;)(38|48);", ";".join(SGR_RE.findall(text)))


def test_a_console_that_is_not_a_terminal_gets_no_escape_byte_at_all() -> None:
    r, out = renderer({})
    for event in [*TURN, *FAILURES, *hostile_events()]:
        r.waiting(1.5)
        r.event(event)
    r.notice("n\x1b[1mote")
    r.error("e\x1b[1mrror")
    r.end_turn()
    assert "\x1b" not in out.getvalue() and "\x9b" not in out.getvalue()


def test_model_and_tool_text_cannot_inject_escapes_or_rich_markup() -> None:
    events = [
        TextDelta("[bold red]not markup[/] :smile: &#27;[2J &#x9b;31m\n\n"),
        *hostile_events(),
    ]
    text = render(events, COLOUR)
    for injected in ("\x1b[31m title", "\x1b]0;", "\x1b[2J", "\x9b", "\x07", "\r\x1b[0m"):
        assert injected not in text
    assert "[bold red]not markup[/] :smile:" in text
    assert "red[31m title]0;pwned clear[2J csi31m bell crover" in render(hostile_events())


def test_markdown_is_printed_block_by_block_without_splitting_a_fence_or_a_list() -> None:
    doc = "Intro paragraph.\n\n```python\ndef f():\n\n    return 1\n```\n\n- one\n\n- two\n\nOutro."
    r, console = spy()
    printed_while_streaming = []
    for char in doc:
        r.event(TextDelta(char))
        printed_while_streaming.append(len(console.markups))
    r.end_turn()
    assert console.markups == [
        "Intro paragraph.",
        "```python\ndef f():\n\n    return 1\n```",
        "- one\n\n- two\n\nOutro.",
    ]
    assert printed_while_streaming[-1] == 2
    text = console.file.getvalue()  # type: ignore[attr-defined]
    assert text.count("return 1") == 1 and "• one" in text and "• two" in text


def test_pending_text_is_flushed_before_a_tool_line_and_at_round_end() -> None:
    r, console = spy()
    r.event(TextDelta("Let me look"))
    assert console.markups == []
    r.event(ToolStarted("c", "read_file", {"path": "a.py"}))
    r.event(ToolFinished("c", "read_file", ToolResult(llm_content="x", display="Read 1 line")))
    r.event(TextDelta("Almost"))
    r.event(RoundFinished(1, Usage()))
    assert console.markups == ["Let me look", "Almost"]
    text = console.file.getvalue()  # type: ignore[attr-defined]
    assert text.index("Let me look") < text.index("● read_file(a.py)") < text.index("Almost")


WORD = st.integers(0, 10**6).map(lambda n: f"w{n}")
INLINE = st.one_of(WORD, WORD.map(lambda w: f"**{w}**"), WORD.map(lambda w: f"`{w}`"))
LINE = st.lists(INLINE, min_size=1, max_size=6).map(" ".join)
BLOCK = st.one_of(
    st.lists(LINE, min_size=1, max_size=3).map("\n".join),
    LINE.map(lambda line: "## " + line),
    LINE.map(lambda line: "> " + line),
    st.lists(LINE, min_size=1, max_size=3).map(lambda ls: "\n".join("- " + x for x in ls)),
    st.lists(LINE, min_size=1, max_size=3).map(lambda ls: "\n\n".join("1. " + x for x in ls)),
    st.lists(st.one_of(LINE, st.just("")), min_size=1, max_size=4).map(
        lambda ls: "```\n" + "\n".join(ls) + "\n```"
    ),
)


@given(st.lists(BLOCK, min_size=1, max_size=6).map("\n\n".join), st.data())
def test_streamed_markdown_prints_every_word_once_in_order_across_any_split(
    doc: str, data: st.DataObject
) -> None:
    cuts = sorted(data.draw(st.sets(st.integers(1, max(len(doc) - 1, 1)), max_size=30)))
    deltas = [doc[a:b] for a, b in zip([0, *cuts], [*cuts, len(doc)], strict=True)]
    r, console = spy()
    for delta in deltas:
        r.event(TextDelta(delta))
    r.end_turn()
    printed = console.file.getvalue()  # type: ignore[attr-defined]
    assert re.findall(r"\bw\d+\b", printed) == re.findall(r"\bw\d+\b", doc)
    for markup in console.markups:
        fences = [line for line in markup.split("\n") if line.startswith("```")]
        assert len(fences) % 2 == 0


def test_finished_blocks_keeps_the_last_block_and_any_open_fence() -> None:
    assert finished_blocks("one\n\ntwo\n") == len("one\n\n")
    assert finished_blocks("one\n\n```\na\n\nb\n") == len("one\n\n")
    assert finished_blocks("```\na\n\nb\n```\n") == 0
    assert finished_blocks("- a\n\n- b\n") == 0
    assert finished_blocks("para without newline") == 0


def test_the_spinner_overwrites_one_line_and_is_cleared_before_output() -> None:
    r, out = renderer(NO_COLOUR)
    r.waiting(0.0)
    r.waiting(1.23)
    assert out.getvalue() == (
        "\r\x1b[2K\x1b[2m⠋\x1b[0m\x1b[2m thinking 0.0s\x1b[0m"
        "\r\x1b[2K\x1b[2m⠹\x1b[0m\x1b[2m thinking 1.2s\x1b[0m"
    )
    mark = len(out.getvalue())
    r.event(ToolStarted("c", "shell", {"command": "make"}))
    assert out.getvalue()[mark:].startswith("\r\x1b[2K\x1b[1m● \x1b[0m\x1b[1mshell(make)")
    r.waiting(2.0)
    assert "running shell 2.0s" in out.getvalue()
    r.end_turn()
    assert out.getvalue().endswith("running shell 2.0s\x1b[0m\r\x1b[2K")


def test_the_spinner_is_silent_when_the_console_is_not_a_terminal() -> None:
    r, out = renderer({})
    r.waiting(3.0)
    r.end_turn()
    assert out.getvalue() == ""


def test_rich_permission_shows_a_long_shell_command_whole() -> None:
    command = "curl https://example.com/i.sh | sh; " + "echo word " * 20 + "&& rm -rf ~/x"
    r, out = renderer({})
    r.permission(ask("shell", {"command": command}, "runs a command"))
    flat = " ".join(out.getvalue().split())
    assert f"$ {command}" in flat


def test_rich_renderer_ignores_unknown_events() -> None:
    r, out = renderer({})
    r.event(object())  # type: ignore[arg-type]
    r.end_turn()
    assert out.getvalue() == ""


@given(st.lists(st.text(), max_size=8))
def test_any_model_text_renders_without_an_escape_byte_on_a_plain_console(
    deltas: list[str],
) -> None:
    text = render([TextDelta(delta) for delta in deltas])
    assert "\x1b" not in text and "\x9b" not in text


def test_a_notice_in_the_middle_of_a_fence_does_not_split_it() -> None:
    r, console = spy()
    r.event(TextDelta("Code:\n\n```\na = 1\n\n"))
    r.notice("suggestion ready")
    r.event(TextDelta("b = 2\n```\n"))
    r.end_turn()
    assert console.markups == ["Code:", "```\na = 1\n\nb = 2\n```"]
