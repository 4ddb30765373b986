"""The Renderer protocol and what both terminal renderers show, decided once.

A renderer turns loop events into terminal output for an interactive front-end:
render_plain.py writes plain lines with no escape codes (TERM=dumb, Emacs, pipes) and
render_rich.py styles them with rich. This module owns *what* is shown: the one-argument
summary of a tool call, the excerpt of its result, the diff cap, the usage line, and
`clean()`, which strips control characters from model and tool text so a model can never
inject terminal escape sequences, and the model's reasoning folded to one dim line
(`Reasoning`) that `/expand` unfolds. *How* it looks stays in each renderer. It never reads
input or asks a question. Renderers are not thread-safe: each is used from one thread,
the front-end's main thread; workers hand events over to it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from qshell.agent.events import (
    ApplyProgress,
    ApplyRequested,
    ChangeKind,
    Event,
    FileChange,
    HistoryCompacted,
    PermissionRequested,
    SpeculationAccepted,
    ToolFinished,
    ToolStarted,
)
from qshell.llm.messages import Usage

SUMMARY_CHARS = 80
MIN_SUMMARY_CHARS = 12
EXCERPT_LINES = 3
SCREENFUL_MIN = 10  # a shell result shows at least this many lines before it is cut
# tools whose output the user reads: shown whole up to a screenful, also when they fail
WHOLE_OUTPUT_TOOLS = frozenset({"shell"})
EXPAND_HINT = "/expand shows them"
REASONING_MARK = "∴"
NOTHING_CUT = "no output was cut short"
DIFF_LINES = 40
PREVIEW_LINES = 120
APPLY_FILES = 20  # changed files listed by an apply question before "… N more"
_CHANGE_MARKS = {
    ChangeKind.CHANGED: "~",
    ChangeKind.CREATED: "+",
    ChangeKind.DELETED: "-",
    ChangeKind.MODE: "m",
    ChangeKind.ATTRS: "m",
    ChangeKind.MODE_ATTRS: "m",
}
_CHANGE_NOTES = {
    ChangeKind.DELETED: "deleted",
    ChangeKind.MODE: "permissions changed",
    ChangeKind.ATTRS: "attributes changed",
    ChangeKind.MODE_ATTRS: "permissions and attributes changed",
}
SUMMARY_KEYS = ("command", "pattern", "url", "query", "path")
# C0 controls but tab and newline, DEL and C1 (0x9b is a one-byte CSI on some terminals)
_CONTROL_RE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


class Renderer(Protocol):
    """Renders one front-end's turn output. Used from one thread only.

    For a PermissionRequested call either `event()` or `permission()`, not both; then
    ask the question the front-end's own way and resolve the request's future.
    """

    def event(self, event: Event) -> None:
        """Render one loop event; a PermissionRequested renders as `permission()` does."""

    def permission(self, request: PermissionRequested) -> None:
        """Show what a permission question is about (call, reason, preview), not the question."""

    def notice(self, text: str) -> None:
        """Show a dim informational line."""

    def say(self, text: str) -> None:
        """Show a line of the front-end's own (a slash command's output) as written: spaces
        kept, wrapped at the screen's width rather than cut."""

    def error(self, text: str) -> None:
        """Show an error line, styled apart from everything else."""

    def waiting(self, elapsed_s: float) -> None:
        """The turn has been waiting `elapsed_s` seconds; called about ten times a second."""

    def end_turn(self) -> None:
        """The turn is over: flush buffered text and clear any spinner."""

    def expand(self) -> None:
        """Show whole the output of the last tool call whose output was cut (`/expand`)."""


def clean(text: str) -> str:
    """`text` without control characters other than newline and tab (CRLF becomes LF)."""
    return _CONTROL_RE.sub("", text.replace("\r\n", "\n"))


def one_line(text: str) -> str:
    """`text` cleaned, with every run of whitespace (newlines included) made one space."""
    return " ".join(clean(text).split())


def truncate(text: str, limit: int, ellipsis: str) -> str:
    """`text` cut to at most `limit` characters, ending in `ellipsis` when cut."""
    if len(text) <= limit:
        return text
    return text[: max(limit - len(ellipsis), 0)] + ellipsis


def summarize_args(
    args: Mapping[str, object], *, ellipsis: str = "…", limit: int = SUMMARY_CHARS
) -> str:
    """The most telling argument of a call (command, pattern, url, query, path) on one line."""
    value = next((args[key] for key in SUMMARY_KEYS if isinstance(args.get(key), str)), None)
    if value is None:
        value = next((v for v in args.values() if isinstance(v, str)), "")
    return truncate(one_line(str(value)), limit, ellipsis)


def call_label(
    name: str, args: Mapping[str, object], *, ellipsis: str = "…", width: int = 1000
) -> str:
    """`name(summary)`, the title of a tool call, fitting `width` after a 2-column marker."""
    name = one_line(name)
    limit = max(min(SUMMARY_CHARS, width - len(name) - 4), MIN_SUMMARY_CHARS)
    return f"{name}({summarize_args(args, ellipsis=ellipsis, limit=limit)})"


def is_diff(text: str) -> bool:
    """True when `text` is a unified diff (starts with `--- ` and `+++ ` header lines)."""
    lines = text.split("\n", 2)
    return len(lines) > 1 and lines[0].startswith("--- ") and lines[1].startswith("+++ ")


def screenful(screen_lines: int) -> int:
    """How many lines of output fit on a screen of `screen_lines` with room around them."""
    return max(SCREENFUL_MIN, screen_lines - 6)


def excerpt(text: str, max_lines: int) -> tuple[list[str], int]:
    """Up to `max_lines` lines of `text` (cleaned, blank ends trimmed) and how many were cut."""
    lines = [line.rstrip() for line in clean(text).split("\n")]
    while lines and not lines[-1]:
        lines.pop()
    while lines and not lines[0]:
        lines.pop(0)
    return lines[:max_lines], max(len(lines) - max_lines, 0)


@dataclass(frozen=True, slots=True)
class ToolOutcome:
    """What to show under a finished tool call: a status, a few lines, maybe a diff."""

    ok: bool
    lines: list[str]  # the first goes after "ok: " / "error: "
    more: int  # lines of the excerpt left out
    diff: list[str] = field(default_factory=list)
    diff_more: int = 0

    @property
    def cut(self) -> bool:
        return bool(self.more or self.diff_more)


def outcome(
    event: ToolFinished, *, diff_seen: bool = False, screen_lines: int = 0, whole: bool = False
) -> ToolOutcome:
    """The status of a finished call; an edit's unified diff is kept, capped at DIFF_LINES,
    unless the user saw it already in the permission question (`diff_seen`). The output
    of a tool the user reads (WHOLE_OUTPUT_TOOLS) is kept up to a screenful
    (`screen_lines`), after the error when it failed; other output is a short excerpt.
    `whole` (for `/expand`) keeps everything."""
    result = event.result

    def cut(text: str, max_lines: int) -> tuple[list[str], int]:
        return excerpt(text, len(text) + 1 if whole else max_lines)

    if event.name in WHOLE_OUTPUT_TOOLS or (whole and result.error is not None):
        text = result.display or result.llm_content
        if result.error is None:
            return ToolOutcome(True, *cut(text, screenful(screen_lines)))
        message = one_line(result.error.message)
        lines, more = cut("" if text.strip() == message else text, screenful(screen_lines))
        return ToolOutcome(False, [message, *lines], more)
    if result.error is not None:
        return ToolOutcome(False, *cut(result.error.message, EXCERPT_LINES))
    if is_diff(result.display):
        head = [] if is_diff(result.llm_content) else excerpt(result.llm_content, 1)[0]
        if diff_seen:
            return ToolOutcome(True, head or ["applied the change shown above"], 0)
        return ToolOutcome(True, head, 0, *cut(result.display, DIFF_LINES))
    return ToolOutcome(True, *cut(result.display or result.llm_content, EXCERPT_LINES))


@dataclass(frozen=True, slots=True)
class PermissionView:
    """The context of a permission question: the call, why it is asked, what it would do."""

    label: str
    reason: str
    preview: list[str]
    preview_is_diff: bool
    more: int


def permission_view(
    request: PermissionRequested, *, ellipsis: str = "…", width: int = 1000
) -> PermissionView:
    """The tool's preview (an edit's diff, capped), else the whole shell command, else nothing."""
    command = request.args.get("command")
    if request.preview.strip() or not isinstance(command, str):
        lines, more = excerpt(request.preview, PREVIEW_LINES)
    else:  # a command is shown whole: a cut could hide what the user agrees to run
        lines, more = command_lines(command), 0
    return PermissionView(
        label=call_label(request.name, request.args, ellipsis=ellipsis, width=width),
        reason=one_line(request.reason),
        preview=lines,
        preview_is_diff=is_diff(request.preview),
        more=more,
    )


def command_lines(command: str) -> list[str]:
    """A shell command whole, cleaned, as `$ first line` and indented continuation lines."""
    lines, _ = excerpt(command, len(command) + 1)
    return [("$ " if i == 0 else "  ") + line for i, line in enumerate(lines)]


@dataclass(frozen=True, slots=True)
class ApplyView:
    """An apply question's context: the commands that ran (whole), then the file changes."""

    title: str
    commands: list[str]
    summary: str
    files: list[str]  # `~ changed`, `+ created`, `- deleted (deleted)`, `… (protected: …)`
    more: int
    warnings: list[str] = field(default_factory=list)  # deletions, protected paths: stand out
    marked: int = 0  # how many of the first `files` are deletions or touch protected paths


def apply_view(request: ApplyRequested) -> ApplyView:
    count = len(request.commands) + len(request.calls)
    title = (
        f"The prepared answer ran {count} {'command' if count == 1 else 'commands'} "
        "you were not asked about, on a copy of your files:"
    )
    commands = [line for command in request.commands for line in command_lines(command)]
    commands += [one_line(c) for c in request.calls]
    n = len(request.changes)
    summary = (
        f"Applying it changes {n} {'file' if n == 1 else 'files'} in the project:"
        if n
        else "It changed no file of the project."
    )
    # the changes that stand out come first, so a long list never hides them; a build
    # cache's files (compiled bytecode, a test runner's cache) are one line at the end
    folded = [bool(c.cache) and not _stands_out(c) for c in request.changes]
    caches = [c for c, fold in zip(request.changes, folded, strict=True) if fold]
    kept = (c for c, fold in zip(request.changes, folded, strict=True) if not fold)
    listed = sorted(kept, key=lambda c: not _stands_out(c))
    files = [_change_line(c) for c in listed[:APPLY_FILES]]
    if caches:
        files.append(_caches_line(caches))
    return ApplyView(
        title,
        commands,
        summary,
        files,
        max(0, len(listed) - APPLY_FILES),
        _apply_warnings(request.changes),
        sum(_stands_out(c) for c in request.changes),
    )


def _caches_line(caches: Sequence[FileChange]) -> str:
    """`+ 12 files in build caches (__pycache__, .pytest_cache)`."""
    names = sorted({c.cache for c in caches})
    plural = "file" if len(caches) == 1 else "files"
    return f"+ {len(caches)} {plural} in build caches ({', '.join(clean(n) for n in names)})"


def _stands_out(change: FileChange) -> bool:
    return change.kind is ChangeKind.DELETED or bool(change.protected)


def _change_line(change: FileChange) -> str:
    """`- notes.txt (deleted)`, `- pkg (deleted; protected: pkg/.husky)`, `~ a.py`,
    `m keys/ (permissions changed)`."""
    notes = [_CHANGE_NOTES[change.kind]] if change.kind in _CHANGE_NOTES else []
    if change.protected:
        notes.append(f"protected: {', '.join(clean(p) for p in change.protected)}")
    note = f" ({'; '.join(notes)})" if notes else ""
    return f"{_CHANGE_MARKS[change.kind]} {clean(change.path)}{note}"


def _apply_warnings(changes: Sequence[FileChange]) -> list[str]:
    """`! deletes 2 files: a.txt, b.txt`, `! touches protected paths: .github/workflows`."""
    deleted = [clean(c.path) for c in changes if c.kind is ChangeKind.DELETED]
    protected = [clean(p) for c in changes for p in c.protected]
    found = []
    if deleted:
        plural = "file" if len(deleted) == 1 else "files"
        found.append(f"! deletes {len(deleted)} {plural}: {_some(deleted)}")
    if protected:
        found.append(f"! touches protected paths (git, tool configuration): {_some(protected)}")
    return found


def _some(paths: Sequence[str]) -> str:
    shown = ", ".join(paths[:APPLY_FILES])
    return shown if len(paths) <= APPLY_FILES else f"{shown}, … {len(paths) - APPLY_FILES} more"


def sources_lines(citations: tuple[str, ...]) -> list[str]:
    """`Sources:` and one `[n] url` line for each source an answer cites (its `[n]` marks
    count from 1); none when it cites none. A server's text, so cleaned to one line each."""
    if not citations:
        return []
    return ["Sources:"] + [f"[{n}] {one_line(url)}" for n, url in enumerate(citations, 1)]


def usage_line(usage: Usage, rounds: int, *, sep: str) -> str:
    """`tokens: 1,234 in (cached 1,000) · 56 out · 2 rounds`, with `sep` between parts."""
    cached = "unknown" if usage.cached_tokens is None else f"{usage.cached_tokens:,}"
    plural = "round" if rounds == 1 else "rounds"
    if not usage.known and not usage.prompt_tokens:
        return f"tokens: not reported by the server{sep}{rounds} {plural}"
    return (
        f"tokens: {usage.prompt_tokens:,} in (cached {cached}){sep}"
        f"{usage.completion_tokens:,} out{sep}{rounds} {plural}"
    )


def compaction_line(event: HistoryCompacted, *, arrow: str) -> str:
    """`history compacted (reason): 40 → 3 messages`."""
    return (
        f"history compacted ({one_line(event.reason)}): "
        f"{event.messages_before} {arrow} {event.messages_after} messages"
    )


@dataclass(frozen=True, slots=True)
class Folded:
    """Reasoning shown folded to one line; `/expand` shows it whole."""

    text: str

    def lines(self) -> list[str]:
        return excerpt(self.text, len(self.text) + 1)[0]

    def line(self, *, width: int, ellipsis: str) -> str:
        """`∴ first line of the reasoning… · 12 lines · /expand shows them`, fitting `width`."""
        lines = self.lines()
        count = f" · {len(lines)} line{'s' if len(lines) != 1 else ''} · {EXPAND_HINT}"
        head = one_line(lines[0]) if lines else ""
        room = max(width - len(count) - len(REASONING_MARK) - 2, MIN_SUMMARY_CHARS)
        return f"{REASONING_MARK} {truncate(head, room, ellipsis)}{count}"


class Reasoning:
    """The reasoning streamed since the last fold; `fold()` ends it (None: there was none,
    or it is not to be shown)."""

    def __init__(self, *, shown: bool) -> None:
        self.shown = shown
        self._parts: list[str] = []

    def add(self, text: str) -> None:
        if self.shown:
            self._parts.append(text)

    @property
    def words(self) -> int:
        """Words streamed since the last fold (0 when reasoning is not shown)."""
        return len("".join(self._parts).split())

    def fold(self) -> Folded | None:
        text, self._parts = "".join(self._parts), []
        return Folded(text) if text.strip() else None


class ToolCalls:
    """The calls in flight: their labels, and whose header is the last line printed.

    Parallel calls start together and finish later, so a status line may not sit under
    its own header; `needs_header` says when to print the header again first.
    """

    def __init__(self, *, ellipsis: str) -> None:
        self._ellipsis = ellipsis
        self._labels: dict[str, tuple[str, str]] = {}  # call_id -> (name, label)
        self._diff_asked: set[str] = set()  # calls whose diff a permission question showed
        self.header_shown: str | None = None  # call_id of the header just printed, if any
        # what /expand shows: the last call whose output was cut (label, call, turn), the
        # last reasoning folded (it, turn), and whether the reasoning came later
        self._cut: tuple[str, ToolFinished, int] | None = None
        self._folded: tuple[Folded, int] | None = None
        self._folded_last = False
        self._turn = 0  # turns ended so far
        self.applying: ApplyProgress | None = None  # a large accept's apply, while it runs

    def asked(self, request: PermissionRequested, view: PermissionView) -> None:
        """A permission question showed `view`: its diff, when shown whole, need not be
        shown again under the finished call."""
        if view.preview_is_diff and not view.more:
            self._diff_asked.add(request.call_id)

    def finished(self, event: ToolFinished, *, screen_lines: int) -> tuple[str | None, ToolOutcome]:
        """The header to print again (None when it is the last line printed) and what to
        show under a finished call; forgets the call."""
        needs_header, label = self.finish(event)
        return (label if needs_header else None), self.outcome(event, label, screen_lines)

    def outcome(self, event: ToolFinished, label: str, screen_lines: int) -> ToolOutcome:
        """What to show under the finished call `label` (without a diff the question
        showed); remembers its whole output for `/expand` when part of it is left out."""
        seen = event.call_id in self._diff_asked
        self._diff_asked.discard(event.call_id)
        shown = outcome(event, diff_seen=seen, screen_lines=screen_lines)
        if shown.cut:
            self._cut = (label, event, self._turn)
            self._folded_last = False
        return shown

    def folded(self, reasoning: Folded) -> None:
        """Reasoning was shown folded to one line: `/expand` shows it whole."""
        self._folded = (reasoning, self._turn)
        self._folded_last = True

    def turn_ended(self) -> None:
        self._turn += 1
        self.applying = None

    def expanded(self) -> list[tuple[str, ToolOutcome] | Folded]:
        """What `/expand` shows, in the order it came: the label and whole outcome of the
        last call whose output was cut, unless reasoning folded in a later turn came after
        it, and the last reasoning folded, unless a call was cut after it (a reasoning
        model reasons in every round, so the round after a cut call always folds some).
        Empty when nothing was cut."""
        shown: list[tuple[str, ToolOutcome] | Folded] = []
        cut, folded = self._cut, self._folded
        if cut is not None and not (self._folded_last and folded and folded[1] > cut[2]):
            shown.append((cut[0], outcome(cut[1], whole=True)))
        if folded is not None and (self._folded_last or cut is None):
            shown.append(folded[0])
        return shown

    def start(self, event: ToolStarted, *, width: int) -> str:
        label = call_label(event.name, event.args, ellipsis=self._ellipsis, width=width)
        self._labels[event.call_id] = (event.name, label)
        return label

    def finish(self, event: ToolFinished) -> tuple[bool, str]:
        """(needs_header, label) for a finished call; forgets the call."""
        _, label = self._labels.pop(event.call_id, (event.name, f"{one_line(event.name)}()"))
        return self.header_shown != event.call_id, label

    def waiting_label(self) -> str:
        """`running <tool>` while a call is in flight, `applying … %` while a large accept
        applies, else `thinking`."""
        if self.applying is not None:
            return f"applying the prepared answer {self.applying.percent} %"
        if not self._labels:
            return "thinking"
        name, _ = next(reversed(self._labels.values()))
        return f"running {one_line(name)}"


def speculation_line(event: SpeculationAccepted) -> str:
    """`⚡ 3.2 s saved`, with what was applied and whether the turn goes on live."""
    files = (
        f" · applied {len(event.files)} file{'s' if len(event.files) != 1 else ''}"
        if event.files
        else ""
    )
    more = "" if event.completed else " · continuing from where it stopped"
    return f"⚡ {event.saved_s:.1f} s saved{files}{more}"
