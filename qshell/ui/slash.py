"""Slash commands shared by the REPL and the plain line mode.

`run_slash(line, conversation)` parses one `/command args` line and performs it through
the Conversation's verbs, returning what the front-end should show or do next: lines of
text, an event stream to drive like a turn (`/compact`), the last cut output shown whole
(`/expand`, by the front-end's renderer), or exit. Unknown commands get a
clear message and never reach the model. `COMMANDS` feeds help and Tab completion. Runs
in the front-end's main thread.
"""

from __future__ import annotations

import difflib
import enum
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field

from qshell.agent.conversation import Conversation
from qshell.agent.events import Event, RoundPosition
from qshell.config import ApprovalMode
from qshell.errors import InputError
from qshell.llm.messages import Usage


class Next(enum.Enum):
    SHOW = "show"  # print `lines`
    DRIVE = "drive"  # drive `events` like a turn, then print `lines`
    EXPAND = "expand"  # the renderer shows the last output it cut short
    EXIT = "exit"


@dataclass
class SlashResult:
    next: Next = Next.SHOW
    lines: list[str] = field(default_factory=list)
    events: Iterator[Event] | None = None
    error: bool = False


@dataclass(frozen=True, slots=True)
class Command:
    name: str
    usage: str
    help: str
    run: Callable[[Conversation, str], SlashResult]
    arguments: tuple[str, ...] = ()  # completions for the first argument


def _help(conversation: Conversation, rest: str) -> SlashResult:
    lines = ["Commands:"]
    lines += [f"  {c.usage:<28} {c.help}" for c in COMMANDS.values()]
    lines += ["Input: @path attaches a file · Ctrl-C cancels a turn · Ctrl-D exits"]
    return SlashResult(lines=lines)


def _model(conversation: Conversation, rest: str) -> SlashResult:
    words = rest.split()
    if words[:1] == ["--fast"]:
        if len(words) == 1:
            current = conversation.fast_model or f"(same as main: {conversation.model})"
            return SlashResult(lines=[f"fast model: {current}"])
        conversation.set_fast_model(words[1])
        return SlashResult(lines=[f"fast model set to {words[1]}"])
    if not words:
        return SlashResult(lines=[f"model: {conversation.model}"])
    if len(words) > 1:
        return _error("usage: /model [name] or /model --fast [name]")
    conversation.set_model(words[0])
    return SlashResult(lines=[f"model set to {words[0]}"])


def _approval_mode(conversation: Conversation, rest: str) -> SlashResult:
    value = rest.strip()
    if not value:
        return SlashResult(lines=[f"approval mode: {conversation.approval_mode}"])
    try:
        mode = ApprovalMode(value)
    except ValueError:
        choices = ", ".join(m.value for m in ApprovalMode)
        return _error(f"unknown approval mode '{value}'; choose one of: {choices}")
    conversation.set_approval_mode(mode)
    return SlashResult(lines=[f"approval mode set to {mode}"])


def _clear(conversation: Conversation, rest: str) -> SlashResult:
    old = conversation.clear()
    return SlashResult(
        lines=[f"started a new session {conversation.session.id} (the old one: /resume {old})"]
    )


def _compact(conversation: Conversation, rest: str) -> SlashResult:
    return SlashResult(next=Next.DRIVE, events=conversation.compact(rest.strip()))


def _undo(conversation: Conversation, rest: str) -> SlashResult:
    report = conversation.undo()
    lines = [f"restored {name}" for name in report.restored]
    lines += [f"removed {name} (the turn had created it)" for name in report.deleted]
    lines += [f"left {name} alone: {why}" for name, why in report.skipped]
    if not lines and conversation.checkpoints.undone:
        lines = ["nothing more to undo: every turn that changed files is undone already"]
    return SlashResult(lines=lines or ["nothing to undo: no turn has changed files yet"])


def _expand(conversation: Conversation, rest: str) -> SlashResult:
    if rest.strip():
        return _error("usage: /expand")
    return SlashResult(next=Next.EXPAND)


def _hit_rates(by_position: Mapping[str, Usage]) -> str:
    """The cache hit rate (cached / prompt tokens) of first, middle and summary rounds."""
    shown = []
    for position in RoundPosition:
        usage = by_position.get(position)
        rate = usage.cache_hit_rate if usage is not None else None
        shown.append(f"{position} {'n/a' if rate is None else f'{100 * rate:.0f}%'}")
    return "cache hit rate by round: " + " · ".join(shown)


def _stats(conversation: Conversation, rest: str) -> SlashResult:
    session = conversation.session
    stats = session.stats
    usage = stats.usage
    cached = "unknown" if usage.cached_tokens is None else f"{usage.cached_tokens:,}"
    share = ""
    if usage.cached_tokens is not None and usage.prompt_tokens:
        share = f" ({100 * usage.cached_tokens / usage.prompt_tokens:.0f}%)"
    written = ""
    if usage.cache_creation_tokens is not None:
        written = f" · written to the cache: {usage.cache_creation_tokens:,}"
    reasoning = ""
    if usage.reasoning_tokens is not None:
        reasoning = f" (reasoning: {usage.reasoning_tokens:,})"
    return SlashResult(
        lines=[
            f"session {session.id}",
            f"model rounds: {stats.rounds}",
            f"prompt tokens: {usage.prompt_tokens:,} · cached: {cached}{share}{written}",
            f"completion tokens: {usage.completion_tokens:,}{reasoning}",
            _hit_rates(stats.position_usage),
            f"messages in history: {len(session.history)}",
            f"speculations accepted: {stats.speculations_accepted} · "
            f"time saved: {stats.time_saved_s:.1f} s",
            f"sandbox: {session.tool_context.sandbox_mode}",
        ]
    )


def _resume(conversation: Conversation, rest: str) -> SlashResult:
    target = rest.strip()
    if not target:
        sessions = conversation.sessions()
        if not sessions:
            return SlashResult(lines=["no sessions in this directory yet"])
        lines = ["Sessions here (newest first); resume one with /resume ID:"]
        for summary in sessions[:20]:
            mark = "*" if summary.current else " "
            when = summary.modified.strftime("%Y-%m-%d %H:%M")
            lines.append(f" {mark} {summary.session_id}  {when}  {summary.first_prompt}")
        return SlashResult(lines=lines)
    try:
        conversation.resume(target)
    except InputError as exc:
        return _error(str(exc))
    count = len(conversation.session.history)
    return SlashResult(lines=[f"resumed session {target} ({count} messages)"])


def _exit(conversation: Conversation, rest: str) -> SlashResult:
    return SlashResult(next=Next.EXIT)


def _error(message: str) -> SlashResult:
    return SlashResult(lines=[message], error=True)


COMMANDS: dict[str, Command] = {
    c.name: c
    for c in [
        Command("/help", "/help", "this list", _help),
        Command(
            "/model",
            "/model [--fast] [name]",
            "show or switch the (fast) model",
            _model,
            ("--fast",),
        ),
        Command(
            "/approval-mode",
            "/approval-mode [mode]",
            "show or set: default, auto-edit, plan, yolo",
            _approval_mode,
            tuple(m.value for m in ApprovalMode),
        ),
        Command("/clear", "/clear", "start a new session with an empty history", _clear),
        Command("/compact", "/compact [focus]", "replace the history by a summary", _compact),
        Command("/undo", "/undo", "restore the files the last turn changed", _undo),
        Command("/expand", "/expand", "show whole the last tool output cut short", _expand),
        Command("/stats", "/stats", "tokens, cached tokens and rounds of this session", _stats),
        Command(
            "/resume", "/resume [id]", "list this directory's sessions, or switch to one", _resume
        ),
        Command("/exit", "/exit", "leave qshell (also /quit, Ctrl-D)", _exit),
    ]
}
ALIASES = {"/quit": "/exit", "/q": "/exit", "/?": "/help"}


def is_slash(line: str) -> bool:
    """A slash command is a line starting with `/` followed by a letter (not a path), or
    an alias such as `/?`."""
    stripped = line.strip()
    if stripped and stripped.split()[0] in ALIASES:
        return True
    return (
        len(stripped) > 1
        and stripped[0] == "/"
        and stripped[1].isalpha()
        and "/" not in stripped.split()[0][1:]
    )


def run_slash(line: str, conversation: Conversation, *, keys_help: str = "") -> SlashResult:
    """Perform one slash command; `keys_help` is the front-end's own key line for /help."""
    name, *rest = line.strip().split(maxsplit=1)
    name = ALIASES.get(name, name)
    command = COMMANDS.get(name)
    if command is None:
        close = difflib.get_close_matches(name, [*COMMANDS, *ALIASES], n=1, cutoff=0.6)
        hint = f" Did you mean {ALIASES.get(close[0], close[0])}?" if close else ""
        return _error(f"unknown command {name}.{hint} Type /help for the list.")
    result = command.run(conversation, rest[0] if rest else "")
    if command.name == "/help" and keys_help:
        result.lines.append(keys_help)
    return result
