"""The next-prompt prediction folded into the answer: its instruction, and its removal.

In an interactive session whose suggestions are on, the system prompt asks the model to end
every answer that finishes its turn with one `<next-prompt>…</next-prompt>` line: the words
the user will most likely type next. The prediction then costs a few output tokens of a
request that is made anyway, instead of a separate suggestion request that reads the whole
cached history again (followup/ falls back to that request when an answer has no such
line). The line stays in the history (the model keeps to a format it sees), but no
front-end ever shows it: `PredictionFilter` holds back streamed text that could be its
start and drops it at the end of the round; `split_prediction` takes it off a whole text.
Only a line at the very end counts; the same tag anywhere else is shown as written. Pure.
"""

from __future__ import annotations

OPEN = "<next-prompt>"
CLOSE = "</next-prompt>"
MAX_CHARS = 300  # a trailer longer than this is not one: it is shown as written
PREDICTION_MARKER = "Next-prompt prediction:"
PREDICTION_PROMPT = f"""{PREDICTION_MARKER} end every reply that finishes your turn (never one that
calls tools) with one last line {OPEN}WORDS{CLOSE}, where WORDS are the exact words the user
will most likely type next: what they would send, not what you would advise. If your reply
told them what to send, that is it. Prefer concrete steps ("run the tests", "try it out",
"commit this", "yes"); never praise, thank, ask, speak as yourself or raise new ideas; 2 to
12 words, in their style. When the next step is unclear or something failed, leave it
empty: {OPEN}{CLOSE}. The user never sees this line."""


def split_prediction(text: str) -> tuple[str, str | None]:
    """`text` without a prediction line at its end, and the prediction ("" when the model
    left it empty; None when there is no such line)."""
    start = text.rfind(OPEN)
    if start < 0:
        return text, None
    words, closed, after = text[start + len(OPEN) :].partition(CLOSE)
    if not closed or after.strip() or len(words) > MAX_CHARS:
        return text, None
    return text[:start].rstrip(), words.strip()


class PredictionFilter:
    """Streamed text as the user may see it: whatever could still turn out to be the
    prediction line (trailing whitespace, a partial or whole `<next-prompt>…`) is held
    back until it is known not to be one, or dropped when the round ends with it."""

    def __init__(self) -> None:
        self._held = ""  # text after the last shown character that may be the trailer

    def feed(self, text: str) -> str:
        """The part of `text` (after what was held) that can be shown now."""
        held, shown = self._held + text, []
        while (start := held.find(OPEN)) >= 0:
            words, closed, after = held[start + len(OPEN) :].partition(CLOSE)
            if closed and after.strip():  # text goes on after it: not the last line
                end = len(held) - len(after)
            elif len(words) > MAX_CHARS:  # too long to be a prediction
                end = start + len(OPEN)
            else:
                break
            shown.append(held[:end])
            held = held[end:]
        if start >= 0:
            cut = _whitespace_start(held, start)
        else:
            cut = min(_whitespace_start(held, len(held)), _partial_open(held))
        self._held = held[cut:]
        shown.append(held[:cut])
        return "".join(shown)

    def finish(self) -> str:
        """The end of the round: what is still held and not the prediction line."""
        held, self._held = self._held, ""
        visible, prediction = split_prediction(held)
        return held if prediction is None else visible


def _whitespace_start(text: str, end: int) -> int:
    """Where the run of whitespace that ends at `end` begins."""
    index = end
    while index > 0 and text[index - 1].isspace():
        index -= 1
    return index


def _partial_open(text: str) -> int:
    """Where a suffix of `text` that could grow into OPEN begins (len(text) if none),
    with the whitespace before it."""
    for size in range(min(len(OPEN) - 1, len(text)), 0, -1):
        if OPEN.startswith(text[-size:]):
            return _whitespace_start(text, len(text) - size)
    return len(text)
