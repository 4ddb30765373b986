"""The quality filter of suggestions: whether one guess's words are worth offering.

`filter_reason` runs a guess (as read from a reply or a prediction line) through
`FILTER_RULES` in order and names the first rule it breaks: empty, a JSON fragment, meta
text ("nothing to suggest"), an error message, a label, too few or too many words (CJK
counted in characters), too long, several sentences, formatting or control characters,
praise, or the assistant's own voice. These are rules on the words alone: what was asked
before, the never-offered commands and the plugins' rules are followup/suggestion.py's,
which applies this filter to every candidate. Pure: no I/O, no state, safe from any thread.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

MIN_WORDS = 2
MAX_WORDS = 12
MIN_CJK_CHARS = 2
MAX_CJK_CHARS = 30
MAX_CHARS = 100  # a suggestion of this many characters or more is rejected

SINGLE_WORDS_ALLOWED = frozenset(
    {"yes", "yeah", "yep", "yup", "sure", "ok", "okay"}
    | {"push", "commit", "deploy", "stop", "continue", "check", "no"}
)

CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]")
_META_SILENCE = re.compile(r"\bsilence is\b|\bstay(?:s|ing)? silent\b|^\W*silence\W*$")
_META_PREFIXES = ("nothing to suggest", "no suggestion", "nothing to predict", "no prediction")
_WRAPPED = re.compile(r"^\(.*\)$|^\[.*\]$", re.DOTALL)
_ERROR_PREFIXES = (
    "api error:",
    "prompt is too long",
    "request timed out",
    "invalid api key",
    "image was too large",
)
_LABEL = re.compile(r"^\w+:\s")
_SENTENCE_BREAK = re.compile(r"[.!?]\s+[A-Z]")
# JSON that did not parse (cut off, or broken): never words to offer
_JSON_FRAGMENT = re.compile(r"^[\[{]\s*(?:[\"\[{]|$)")
_FORMATTING = re.compile(r"[\n\r*]")
# what must never reach a terminal or the input line: C0 and C1 controls (ESC, BEL, CSI…),
# DEL, the Unicode line breaks, and the invisible marks that reorder or hide text (bidi
# overrides, zero widths)
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff]")
_EVALUATIVE = re.compile(
    r"\b(?:thanks|thank you|looks good|sounds good|that works|that worked|that's all|nice"
    r"|great|perfect|makes sense|awesome|excellent)\b"
)
_AI_VOICE = re.compile(
    r"^(?:let me|i'll|i will|i've|i'm|i can|i would|i think|i notice|here's|here is|here are"
    r"|that's|this is|this will|you can|you should|you could|sure,|of course|certainly)(?!\w)",
    re.IGNORECASE,
)


@dataclass(frozen=True, slots=True)
class _Text:
    """One candidate seen the ways the rules need it."""

    raw: str
    lower: str
    words: int
    cjk: bool

    @classmethod
    def of(cls, text: str) -> _Text:
        raw = text.strip()
        return cls(raw, raw.lower(), len(raw.split()), bool(CJK.search(raw)))

    @property
    def visible_chars(self) -> int:
        return len("".join(self.raw.split()))


def _meta_text(t: _Text) -> bool:
    return (
        t.lower in ("nothing found", "nothing found.")
        or t.lower.startswith(_META_PREFIXES)
        or bool(_META_SILENCE.search(t.lower))
    )


def _too_few(t: _Text) -> bool:
    if t.cjk:
        return t.visible_chars < MIN_CJK_CHARS
    if t.words >= MIN_WORDS or t.raw.startswith("/"):  # a slash command alone is fine
        return False
    return t.lower.rstrip(".!") not in SINGLE_WORDS_ALLOWED


def _too_many(t: _Text) -> bool:
    if t.cjk:
        return t.visible_chars > MAX_CJK_CHARS
    return t.words > MAX_WORDS


# The filter, in evaluation order: the first rule that matches names the rejection.
FILTER_RULES: tuple[tuple[str, Callable[[_Text], bool]], ...] = (
    ("empty", lambda t: not t.raw),
    ("json_fragment", lambda t: bool(_JSON_FRAGMENT.match(t.raw))),
    ("done", lambda t: t.lower.rstrip(".!") == "done"),
    ("meta_text", _meta_text),
    ("meta_wrapped", lambda t: bool(_WRAPPED.match(t.raw))),
    ("error_message", lambda t: t.lower.startswith(_ERROR_PREFIXES)),
    ("prefixed_label", lambda t: bool(_LABEL.match(t.raw))),
    ("too_few_words", _too_few),
    ("too_many_words", _too_many),
    ("too_long", lambda t: len(t.raw) >= MAX_CHARS),
    ("multiple_sentences", lambda t: bool(_SENTENCE_BREAK.search(t.raw))),
    ("has_formatting", lambda t: bool(_FORMATTING.search(t.raw))),
    ("control_chars", lambda t: bool(_CONTROL.search(t.raw))),
    ("evaluative", lambda t: bool(_EVALUATIVE.search(t.lower))),
    ("ai_voice", lambda t: bool(_AI_VOICE.match(t.raw))),
)


def filter_reason(text: str) -> str | None:
    """None when `text` is worth offering, else the name of the first rule it breaks."""
    candidate = _Text.of(text)
    for reason, rejects in FILTER_RULES:
        if rejects(candidate):
            return reason
    return None
