"""Unified diffs for the file-changing tools (write_file, edit).

It turns an old and a new text into a `difflib` unified diff with `a/` and `b/` headers and
counts the added and removed lines for a one-line summary. Line endings are normalised to
LF for display only; it never touches the filesystem. Pure functions: any thread.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass

CONTEXT_LINES = 3
NO_NEWLINE_MARK = "\\ No newline at end of file\n"


@dataclass(frozen=True, slots=True)
class Diff:
    """A unified diff and its line counts."""

    text: str
    added: int
    removed: int

    @property
    def summary(self) -> str:
        return f"+{self.added} -{self.removed}"


def count_lines(text: str) -> int:
    """Lines in `text`, counting a final line without a newline."""
    return text.count("\n") + (1 if text and not text.endswith("\n") else 0)


def _lines(text: str) -> list[str]:
    """`text` split on LF only (other Unicode breaks stay inside lines), ends kept."""
    parts = text.replace("\r\n", "\n").split("\n")
    lines = [part + "\n" for part in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1] + "\n" + NO_NEWLINE_MARK)
    return lines


def unified_diff(old: str, new: str, label: str) -> Diff:
    """The diff from `old` to `new` for the file shown as `label` (new files: old == "")."""
    old_label = "/dev/null" if old == "" else f"a/{label}"
    body = list(
        difflib.unified_diff(
            _lines(old), _lines(new), fromfile=old_label, tofile=f"b/{label}", n=CONTEXT_LINES
        )
    )
    added = sum(1 for line in body if line.startswith("+") and not line.startswith("+++"))
    removed = sum(1 for line in body if line.startswith("-") and not line.startswith("---"))
    return Diff("".join(body), added, removed)
