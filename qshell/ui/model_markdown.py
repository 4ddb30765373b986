"""Markdown from the model, as the rich renderer shows it: one parser, the renderable, block ends.

The model's text is parsed with rich's own Markdown parser (commonmark with tables and
strikethrough) but with raw HTML off, so an HTML block is shown as text rather than
vanishing; links show with their URL, code blocks in `CODE_THEME`, and a rendering starts
at its first visible line. `model_markdown` is the renderable for a piece of text, parsed
once however often a live block draws it again; `finished_blocks` says how much of a
growing text is made of finished top-level blocks, so the renderer settles only those (a
fenced code block or a list is never split). It knows nothing of turns, events or the
screen (render_rich.py and live.py do). No state of its own: any thread.
"""

from __future__ import annotations

from markdown_it import MarkdownIt
from rich.console import Console, ConsoleOptions, RenderResult
from rich.markdown import Markdown
from rich.segment import Segment

CODE_THEME = "ansi_dark"
# rich's own Markdown parser, but with raw HTML off: HTML blocks would otherwise vanish
_PARSER = MarkdownIt("commonmark", {"html": False}).enable("strikethrough").enable("table")


class _ModelMarkdown(Markdown):
    """Markdown from the model: raw HTML shown as text, links shown with their URL."""

    def __init__(self, markup: str) -> None:
        # rich parses what it is given with its own parser: given nothing, the markup is
        # parsed once (a live block is rendered again on every frame)
        super().__init__("", code_theme=CODE_THEME, hyperlinks=False)
        self.markup, self.parsed = markup, _PARSER.parse(markup)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        """The rendering without leading blank lines (a list starts with one of its own)."""
        started = False
        for segment in super().__rich_console__(console, options):
            started = started or not (isinstance(segment, Segment) and segment.text == "\n")
            if started:
                yield segment


def model_markdown(markup: str) -> _ModelMarkdown:
    """The renderable for `markup`, without the blank lines around it."""
    return _ModelMarkdown(markup.strip("\n"))


def finished_blocks(text: str) -> int:
    """Length of the start of `text` made of finished top-level Markdown blocks."""
    end = text.rfind("\n") + 1
    tokens = _PARSER.parse(text[:end]) if end else []
    starts = [t.map[0] for t in tokens if t.level == 0 and t.nesting >= 0 and t.map]
    if len(starts) < 2:
        return 0
    lines = text[:end].split("\n")
    return sum(len(line) + 1 for line in lines[: starts[-1]])
