"""HTML to readable text for web_fetch, built on the stdlib `html.parser`.

It drops scripts, styles and other non-content elements, keeps link text (with the link
target in Markdown form), marks headings and list items, preserves `<pre>` blocks and
collapses all other whitespace. It does no network or file access and executes nothing.
Each call builds its own parser, so `html_to_text` is safe from any thread.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser
from urllib.parse import urljoin, urlsplit

SKIP_TAGS = frozenset(
    {"script", "style", "noscript", "template", "svg", "iframe", "object", "canvas"}
)
BLOCK_TAGS = frozenset(
    [
        "address",
        "article",
        "aside",
        "blockquote",
        "dd",
        "details",
        "div",
        "dl",
        "dt",
        "fieldset",
        "figcaption",
        "figure",
        "footer",
        "form",
        "header",
        "hr",
        "main",
        "nav",
        "ol",
        "p",
        "section",
        "summary",
        "table",
        "tbody",
        "thead",
        "tfoot",
        "ul",
    ]
)
LINE_TAGS = frozenset({"br", "li", "tr"})
HEADING_LEVELS = {f"h{n}": n for n in range(1, 7)}
LINK_SCHEMES = frozenset({"http", "https"})
_SPACES_RE = re.compile(r"[ \t\r\n\f\v]+")
_AROUND_NEWLINE_RE = re.compile(r" *\n *")
_MANY_NEWLINES_RE = re.compile(r"\n{3,}")


class _TextBuilder(HTMLParser):
    def __init__(self, base_url: str) -> None:
        super().__init__(convert_charrefs=True)
        self._base_url = base_url
        self._parts: list[tuple[str, bool]] = []  # (text, is_preformatted)
        self._skip_depth = 0
        self._pre_depth = 0
        self._in_title = False
        self.title = ""
        self._links: list[tuple[int, str | None]] = []  # (part index at <a>, target)

    def _emit(self, text: str, pre: bool = False) -> None:
        self._parts.append((text, pre))

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in SKIP_TAGS:
            self._skip_depth += 1
        elif tag == "title":
            self._in_title = True
        elif tag == "pre":
            self._pre_depth += 1
            self._emit("\n\n")
        elif tag in HEADING_LEVELS:
            self._emit("\n\n" + "#" * HEADING_LEVELS[tag] + " ")
        elif tag == "li":
            self._emit("\n- ")
        elif tag in LINE_TAGS:
            self._emit("\n")
        elif tag in BLOCK_TAGS:
            self._emit("\n\n")
        elif tag == "a":
            self._links.append((len(self._parts), self._link_target(dict(attrs).get("href"))))

    def handle_endtag(self, tag: str) -> None:
        if tag in SKIP_TAGS:
            self._skip_depth = max(self._skip_depth - 1, 0)
        elif tag == "title":
            self._in_title = False
        elif tag == "pre":
            self._pre_depth = max(self._pre_depth - 1, 0)
            self._emit("\n\n")
        elif tag in HEADING_LEVELS or tag in BLOCK_TAGS:
            self._emit("\n\n")
        elif tag == "a" and self._links:
            start, target = self._links.pop()
            label = "".join(text for text, _ in self._parts[start:]).strip()
            if target and label:
                self._parts.insert(start, ("[", False))
                self._emit(f"]({target})")

    def handle_data(self, data: str) -> None:
        if self._skip_depth:
            return
        if self._in_title:
            self.title += data
        elif self._pre_depth:
            self._emit(data, pre=True)
        else:
            self._emit(_SPACES_RE.sub(" ", data))

    def _link_target(self, href: str | None) -> str | None:
        if not href or href.startswith("#"):
            return None
        target = urljoin(self._base_url, href.strip())
        return target if urlsplit(target).scheme in LINK_SCHEMES else None

    def text(self) -> str:
        chunks: list[str] = []
        flowing: list[str] = []
        for text, pre in self._parts:
            if pre:
                chunks.append(_tidy("".join(flowing)))
                flowing.clear()
                chunks.append(text)
            else:
                flowing.append(text)
        chunks.append(_tidy("".join(flowing)))
        body = "".join(chunks).strip()
        title = _SPACES_RE.sub(" ", self.title).strip()
        return f"Title: {title}\n\n{body}" if title else body


def _tidy(text: str) -> str:
    """Drop spaces around line breaks and keep at most one blank line in flowing text."""
    return _MANY_NEWLINES_RE.sub("\n\n", _AROUND_NEWLINE_RE.sub("\n", text))


def html_to_text(html: str, base_url: str = "") -> str:
    """Readable text for an HTML document; relative links resolve against `base_url`."""
    builder = _TextBuilder(base_url)
    builder.feed(html)
    builder.close()
    return builder.text()
