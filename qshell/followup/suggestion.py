"""Next-prompt suggestions: the suggestion prompt, the reading of a reply and one generation.

After a completed main turn, `generate_suggestion` sends one cache-safe fork of the last
main request (`CacheSafeParams.fork`: the same model unless a fast model is given, system
prompt, tools, sampling parameters and every message, then the reply and the prediction
prompt as a new user message), reads only the reply's text and keeps it only if
`filter_reason` (the quality filter, followup/suggestion_filter.py) and the never-offer
rules accept it; `screened` adds the gate plugins' rejection rules
(`qshell_filter_suggestion`) to whatever is about to be offered. It must not change the
fork in any other way (no tool removal, no history cut, no other max_tokens), must not
raise for provider failures (a suggestion fails open, reason `error`), and must not touch
the session or the terminal. The prompt (qshell/prompts/suggestion.md) asks for the words
as a prediction line with a confidence (0–1); the result carries it (`confidence`, None
when the reply gave none: a plain reply is still a suggestion), and followup/gating.py
decides from it whether to speculate. The guards live in `qshell.followup.guards` and the
filter in `qshell.followup.suggestion_filter`; both are re-exported here. Thread rule:
stateless; call it from a background thread; the CancelToken reaches the HTTP request.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from qshell.agent.prediction import CLOSE, GUESSES, MAX_GUESSES, OPEN, read_prediction
from qshell.cancel import CancelToken
from qshell.errors import Cancelled, QshellError
from qshell.followup.guards import (
    GuardInputs,
    count_assistant_turns,
    guard_reason,
)
from qshell.followup.suggestion_filter import CJK, filter_reason
from qshell.llm.base import Provider, StreamDone, StreamEvent, StreamText
from qshell.llm.fork import CacheSafeParams
from qshell.llm.messages import Usage
from qshell.plugins import PluginHost, SuggestionCheck
from qshell.prompts import fill

__all__ = [
    "CJK",
    "SUGGESTION_MARKER",
    "SUGGESTION_PROMPT",
    "Candidate",
    "GuardInputs",
    "SuggestionResult",
    "count_assistant_turns",
    "extract_suggestion",
    "filter_reason",
    "folded_suggestion",
    "generate_suggestion",
    "guard_reason",
    "read_candidates",
    "screened",
]

log = logging.getLogger(__name__)

SUGGESTION_MARKER = "[qshell: predict the user's next message]"

# Kept short on purpose: these characters are the only part of a suggestion request that
# the provider's prompt cache cannot serve (bench/suggestion_prefix.py measures the share).
SUGGESTION_PROMPT = fill(
    "suggestion",
    SUGGESTION_MARKER=SUGGESTION_MARKER,
    OPEN=OPEN,
    GUESSES=GUESSES,
    CLOSE=CLOSE,
    MAX_GUESSES=MAX_GUESSES,
)


MAX_REPLY_CHARS = 1_000  # visible reply characters after which reading stops (too_long)

NEVER_OFFERED = frozenset({"/exit", "/quit", "/q", "exit", "quit"})  # one keystroke from quitting
# slash commands that throw the session, or the last turn's changes, away (with or without
# arguments): plain mode's `.` would run them at once
DISCARDING = frozenset({"/clear", "/undo"})

_SPACE = re.compile(r"\s*")
_DECIMAL = re.compile(r"[0-9]*\.?[0-9]+")
_THINK_BLOCK = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)
_FENCE = re.compile(r"^```[\w-]*\s*\n?(.*?)\n?```$", re.DOTALL)
_QUOTE_PAIRS = {'"': '"', "'": "'", "`": "`", "“": "”", "‘": "’", "«": "»", "「": "」"}


def _normalised(text: str) -> str:
    return " ".join(text.lower().split())


def _unquote(text: str) -> str:
    text = text.strip()
    while len(text) >= 2 and _QUOTE_PAIRS.get(text[0]) == text[-1]:
        text = text[1:-1].strip()
    return text


def extract_suggestion(reply_text: str) -> str:
    """The suggestion inside a reply: reasoning blocks and code fences dropped, the
    `suggestion` field of a JSON object if the reply is one, surrounding quotes removed; a
    reply that is (or ends with) a prediction line, as the system prompt asks of answers
    (agent/prediction.py), gives what that line holds; a JSON list of guesses gives its
    first."""
    found = read_candidates(reply_text)
    return found[0].text if found else ""


@dataclass(frozen=True, slots=True)
class Candidate:
    """One guess at the user's next prompt, and how likely the model said it is (0–1;
    None: it did not say)."""

    text: str
    confidence: float | None = None


def read_candidates(reply_text: str, confidence: float | None = None) -> list[Candidate]:
    """Every guess a reply gives, in its order, unfiltered: a JSON list of guesses (each an
    object with `text` or `suggestion` and `confidence`, a `[text, confidence]` pair or a
    string), a JSON object with `suggestion`/`text` (or a `suggestions` list), or plain
    words — inside a prediction tag or not, after reasoning blocks and code fences are
    dropped. Plain words take the tag's `confidence` attribute, else `confidence`."""
    text = _THINK_BLOCK.sub("", reply_text).strip()
    _, predicted, tagged = read_prediction(text)
    if predicted is not None:
        text, confidence = predicted, tagged
    fenced = _FENCE.match(text)
    if fenced:
        text = fenced.group(1).strip()
    if text.startswith(("[", "{")):
        value = _json(text)
        if isinstance(value, dict) and isinstance(value.get("suggestions"), list):
            value = value["suggestions"]
        if isinstance(value, list):
            return [c for c in map(_guess, value) if c is not None][: MAX_GUESSES * 2]
        if isinstance(value, dict):
            return [_guess(value) or Candidate("")]
    return [Candidate(_unquote(text), confidence)]


def _json(text: str) -> object:
    """The JSON value `text` holds; of a list cut off (or broken) before its end, the
    entries it completed; else None (plain words, or a fragment the filter rejects)."""
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return (_complete_entries(text) or None) if text.startswith("[") else None


def _complete_entries(text: str) -> list[object]:
    """The entries of the JSON list `text` opens, up to the first one that is not whole."""
    decoder = json.JSONDecoder()
    entries: list[object] = []
    at = 1
    while True:
        at = _SPACE.match(text, at).end()  # type: ignore[union-attr]  # \s* always matches
        try:
            entry, at = decoder.raw_decode(text, at)
        except (ValueError, RecursionError):
            return entries
        entries.append(entry)
        at = _SPACE.match(text, at).end()  # type: ignore[union-attr]
        if not text.startswith(",", at):
            return entries
        at += 1


def _guess(item: object) -> Candidate | None:
    """One entry of a JSON list of guesses, or None when it is not one."""
    if isinstance(item, str):
        return Candidate(_unquote(item))
    if isinstance(item, list) and len(item) == 2 and isinstance(item[0], str):
        return Candidate(_unquote(item[0]), _unit(item[1]))
    if isinstance(item, dict):
        words = item.get("text", item.get("suggestion"))
        if isinstance(words, str):
            return Candidate(_unquote(words), _unit(item.get("confidence")))
    return None


def _unit(value: object) -> float | None:
    """A number from 0 to 1 as a float, else None (booleans are not numbers here); a
    number written as a string (`"0.7"`, as the tag's attribute is) counts too."""
    if isinstance(value, str) and _DECIMAL.fullmatch(value.strip()):
        value = float(value)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if 0.0 <= value <= 1.0 else None


def _visible_length(text: str) -> int:
    """Reply characters outside reasoning blocks (an unclosed block hides the rest)."""
    visible = _THINK_BLOCK.sub("", text)
    opened = visible.lower().find("<think>")
    if opened >= 0:
        visible = visible[:opened]
    return len(visible.strip())


@dataclass(frozen=True, slots=True)
class SuggestionResult:
    """One generation's outcome. `text` is set only when a suggestion may be shown;
    otherwise `reason` names why not. `usage` is the fork request's (None if it did not
    finish); `candidate` is the extracted text before any rejection, for debug logs;
    `confidence` is how likely the model said the user types it (0–1; None: unknown);
    `alternatives` are the further guesses that passed the same rules, likeliest first (at
    most MAX_GUESSES candidates in all)."""

    text: str | None
    reason: str | None
    usage: Usage | None
    candidate: str | None = None
    confidence: float | None = None
    alternatives: tuple[Candidate, ...] = ()

    @property
    def candidates(self) -> tuple[Candidate, ...]:
        """Every suggestion to offer, the one shown first at the front."""
        if self.text is None:
            return ()
        return (Candidate(self.text, self.confidence), *self.alternatives)

    @property
    def texts(self) -> tuple[str, ...]:
        """The candidates' words (empty when there is nothing to show)."""
        return tuple(c.text for c in self.candidates)

    def narrowed(self, reject: Callable[[str], str | None]) -> SuggestionResult:
        """This result without the candidates `reject` gives a reason for; when none is
        left, rejected with the first candidate's reason."""
        kept = [c for c in self.candidates if reject(c.text) is None]
        if kept == list(self.candidates):
            return self
        if not kept:
            return _rejected(reject(self.candidates[0].text) or "empty", self.usage, self.candidate)
        return _offered(kept, self.usage)


def _rejected(reason: str, usage: Usage | None, candidate: str | None) -> SuggestionResult:
    return SuggestionResult(None, reason, usage, candidate)


def _offered(kept: list[Candidate], usage: Usage | None) -> SuggestionResult:
    first, *rest = kept
    return SuggestionResult(first.text, None, usage, first.text, first.confidence, tuple(rest))


def _read(events: Iterator[StreamEvent]) -> tuple[StreamDone | None, bool]:
    """Consume a fork's stream: its StreamDone, and whether reading stopped because the
    visible text grew past MAX_REPLY_CHARS (the stream is then closed early)."""
    parts: list[str] = []
    length = 0
    done: StreamDone | None = None
    try:
        for event in events:  # read to the end after StreamDone so the connection is reused
            if isinstance(event, StreamDone):
                done = event
                continue
            if not isinstance(event, StreamText):
                continue  # reasoning is not part of the suggestion
            parts.append(event.text)
            length += len(event.text)
            if length > MAX_REPLY_CHARS and _visible_length("".join(parts)) > MAX_REPLY_CHARS:
                return None, True
        return done, False
    finally:
        close = getattr(events, "close", None)
        if close is not None:
            close()


def generate_suggestion(
    provider: Provider,
    params: CacheSafeParams,
    cancel: CancelToken,
    *,
    model: str | None = None,
    previous_prompt: str = "",
) -> SuggestionResult:
    """Predict the user's next prompt with one cache-safe fork of the last main request.

    `model` (the fast model) replaces the request's model when set. Reasons: `aborted`
    (cancelled, before or during the request), `pending_tool_calls` (the captured reply
    still waits for tool results, so no valid fork exists), `error` (the provider failed),
    `too_long` (the reply ran on and was cut), `empty`, `exit_word`, `discards_work` (/clear,
    /undo), any `filter_reason`,
    `same_as_previous` (equal to the user's previous prompt, ignoring case and spacing).
    """
    if cancel.cancelled:
        return _rejected("aborted", None, None)
    if params.reply.tool_calls:
        return _rejected("pending_tool_calls", None, None)
    request = params.fork(SUGGESTION_PROMPT, model=model or None)
    try:
        done, overflowed = _read(iter(provider.stream(request, cancel)))
    except Cancelled:
        return _rejected("aborted", None, None)
    except QshellError as exc:
        log.debug("suggestion request failed: %s", exc)
        return _rejected("error", None, None)
    if cancel.cancelled:
        return _rejected("aborted", None, None)
    if overflowed:
        return _rejected("too_long", None, None)
    if done is None:
        return _rejected("error", None, None)
    # tool calls in the reply are ignored
    return _judged(read_candidates(done.message.text), previous_prompt, done.usage)


def folded_suggestion(
    prediction: str, previous_prompt: str = "", confidence: float | None = None
) -> SuggestionResult:
    """The suggestions an answer predicted itself (agent/prediction.py: its tag's content),
    under the same rules as generated ones; no request, so no usage. `confidence` is the
    one its prediction tag gave, for plain words."""
    return _judged(read_candidates(prediction, confidence), previous_prompt, None)


def _judged(found: list[Candidate], previous_prompt: str, usage: Usage | None) -> SuggestionResult:
    """The candidates that pass the rules, without repeats, at most MAX_GUESSES; when none
    does, rejected with the first one's reason."""
    kept: list[Candidate] = []
    seen: set[str] = set()
    for candidate in found:
        key = _normalised(candidate.text)
        if key not in seen and _reason(candidate.text, previous_prompt) is None:
            seen.add(key)
            kept.append(candidate)
    if kept:
        return _offered(kept[:MAX_GUESSES], usage)
    first = found[0].text if found else ""
    return _rejected(_reason(first, previous_prompt) or "empty", usage, first)


def screened(
    result: SuggestionResult, plugins: PluginHost, check: SuggestionCheck
) -> SuggestionResult:
    """`result` without the candidates a plugin's rule rejects; rejected (reason
    `plugin:<name>`) when that leaves none."""
    return result.narrowed(lambda text: plugins.filter_suggestion(text, check))


def _reason(text: str, previous_prompt: str) -> str | None:
    if not text:
        return "empty"
    words = _normalised(text).rstrip(".!")
    command = words.split()[0] if words.startswith("/") else ""
    if words in NEVER_OFFERED or command in NEVER_OFFERED:
        return "exit_word"
    if command in DISCARDING:
        return "discards_work"
    reason = filter_reason(text)
    if reason is not None:
        return reason
    if previous_prompt and _normalised(text) == _normalised(previous_prompt):
        return "same_as_previous"
    return None
