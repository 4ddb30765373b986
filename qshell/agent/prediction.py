"""The next-prompt prediction folded into the answer: its instruction, and its removal.

In an interactive session whose suggestions are on, the system prompt asks the model to end
every answer that finishes its turn with one `<next-prompt>…</next-prompt>` line: the words
the user will most likely type next. The prediction then costs a few output tokens of a
request that is made anyway, instead of a separate suggestion request that reads the whole
cached history again (followup/ falls back to that request when an answer has no such
line). The line stays in the history (the model keeps to a format it sees), but no
front-end ever shows it: `PredictionFilter` holds back streamed text that could still be
that line and drops it at the end of the round; `split_prediction` takes it off a whole
text. The prediction line is the last line when it starts with the opening tag, in any
case and spelling (`<next_prompt>`), after any Markdown emphasis or quoting, closed or not
(an answer cut off inside it, a misspelt closing tag); the tag anywhere else is shown as
written. A JSON list the model spread over lines after its tag (`<next-prompt>[` … `]`
`</next-prompt>`) is the prediction too, when it ends the text within MAX_CHARS.
The opening tag may carry the model's confidence, `<next-prompt confidence="0.72">`
(`read_prediction` gives it; a line without it, or with a value outside 0–1, has an unknown
confidence); attributes are part of the hidden line, so they never reach the screen either.
The prompt asks for a JSON list of up to MAX_GUESSES guesses, each with its confidence, in
the tag (`<next-prompt>[["run the tests", 0.7], …]</next-prompt>`; one when the model is
fairly sure, so a sure prediction costs no more tokens than a single one); this module
hands the tag's content on as written, and followup/suggestion.py reads the candidates out
of it (plain words are one candidate). Whether a session asks for the line is its own flag
(`Session.predicts_next`, kept in the transcript), never guessed from the prompt's text.
The instruction's text is qshell/prompts/prediction.md, completed with this module's tags.
Pure.
"""

from __future__ import annotations

import re

from qshell.prompts import fill

OPEN = "<next-prompt>"
OPEN_WITH = '<next-prompt confidence="C">'
CLOSE = "</next-prompt>"
MAX_GUESSES = 3  # the candidates a prediction (or a suggestion request) may give
# the JSON list of [words, confidence] pairs a prediction holds, as the prompts spell it
# (pairs, not objects: each guess is then about ten tokens)
GUESSES = '[["WORDS", C], ...]'
MAX_CHARS = 600  # a last line longer than this is prose, not a prediction
PREDICTION_PROMPT = fill(
    "prediction", OPEN=OPEN, GUESSES=GUESSES, CLOSE=CLOSE, MAX_GUESSES=MAX_GUESSES
)
_LEAD = " \t*_`>~"  # what may come before the tag on its line (emphasis, code, quote)
_OPENING = re.compile(
    rf"[{re.escape(_LEAD)}]*<next[-_ ]?prompt(?P<attrs>\s[^<>]*)?>", re.IGNORECASE
)
_CONFIDENCE = re.compile(r"""\bconfidence\s*=\s*["']?([0-9]*\.?[0-9]+)["']?""", re.IGNORECASE)
# a growing opening tag with attributes: `<next-prompt` then anything but the tag's end
_OPENING_SO_FAR = re.compile(rf"[{re.escape(_LEAD)}]*<next[-_ ]?prompt\s[^<>]*$", re.IGNORECASE)
_CLOSING = re.compile(r"</next[-_ ]?prompt\s*>?", re.IGNORECASE)
# the pieces `feed` reads: lines end at "\n" only, as for `read_prediction` (a lone "\r" or
# another separator is part of its line, so the screen and the history always agree)
_LINES = re.compile(r"[^\n]*\n|[^\n]+")
_SPELLINGS = ("<next-prompt>", "<next_prompt>", "<next prompt>", "<nextprompt>")


def split_prediction(text: str) -> tuple[str, str | None]:
    """`text` without its prediction line, and the prediction ("" when the model left it
    empty; None when the last line is not one)."""
    visible, words, _ = read_prediction(text)
    return visible, words


def read_prediction(text: str) -> tuple[str, str | None, float | None]:
    """`split_prediction`, and the confidence the line's tag gives (None: unknown)."""
    body = text.rstrip()
    start = _line_start(body)
    line = body[start:]
    opening = _OPENING.match(line)
    if len(line) > MAX_CHARS:
        return text, None, None
    if opening is None:  # cut off inside the opening tag's attributes: still hidden
        return (
            (text[:start].rstrip(), "", None) if _OPENING_SO_FAR.match(line) else (text, None, None)
        )
    words = line[opening.end() :]
    closing = _CLOSING.search(words)
    if closing is not None:
        words = words[: closing.start()]
    return (
        text[:start].rstrip(),
        words.strip().strip(_LEAD).strip(),
        confidence_in(opening["attrs"]),
    )


def _line_start(body: str) -> int:
    """Where the prediction line of `body` (right-stripped) would start: its last line, or
    the line whose opening tag begins a JSON list the model spread over the lines below
    (closed at the very end, or not closed), within MAX_CHARS of the end."""
    last = body.rfind("\n") + 1
    if _OPENING.match(body, last) or _OPENING_SO_FAR.match(body, last):
        return last
    at = last
    while at > 0:
        at = body.rfind("\n", 0, at - 1) + 1
        if len(body) - at > MAX_CHARS:
            break
        opening = _OPENING.match(body, at)
        if opening is not None:  # the nearest opening tag decides
            words = body[opening.end() :].lstrip()
            closing = _CLOSING.search(words)
            ends = closing is None or not words[closing.end() :].strip()
            return at if words.startswith(("[", "{")) and ends else last
    return last


def _json_block(line: str) -> bool:
    """Whether `line` opens with the tag and, after it, only (the start of) a JSON value."""
    opening = _OPENING.match(line)
    return opening is not None and line[opening.end() :].lstrip()[:1] in ("", "[", "{")


def _continues(line: str) -> bool:
    """Whether a prediction line that has ended may go on over the next lines: its tag
    opens a JSON value (or nothing yet) and is not closed."""
    return _json_block(line) and _CLOSING.search(line) is None


def confidence_in(attrs: str | None) -> float | None:
    """The `confidence="0.72"` an opening tag's attributes hold, if it is within 0–1."""
    found = _CONFIDENCE.search(attrs or "")
    if found is None:
        return None
    value = float(found.group(1))
    return value if 0.0 <= value <= 1.0 else None


def could_open(line: str) -> bool:
    """Whether `line` (no newline in it, possibly still growing) is, or may still become,
    the start of a prediction line."""
    if len(line) > MAX_CHARS:
        return False
    if _OPENING.match(line) or _OPENING_SO_FAR.match(line):
        return True
    rest = line.lstrip(_LEAD).lower()
    return any(spelling.startswith(rest) for spelling in _SPELLINGS)


class PredictionFilter:
    """Streamed text as the user may see it. Held back is the whitespace after what was
    shown, then at most one line that is, or may become, the prediction line (and the
    whitespace after it; a JSON list after its tag may go on over more lines, up to
    MAX_CHARS in all); all of it is shown once text follows that a last line cannot have.
    Linear in the text: what is held is rescanned at most MAX_CHARS long."""

    def __init__(self) -> None:
        self._held: list[str] = []  # not shown yet: whitespace, then maybe a candidate
        self._line = ""  # the candidate line so far ("" when there is none)
        self._line_done = False  # the candidate line has ended (only whitespace after it)
        self._newline = True  # the next text starts a line (nothing shown yet, or a \n held)

    @property
    def predicting(self) -> bool:
        """Whether the line held back is the prediction line: its opening tag is whole (so
        nothing shown is still to come unless the model writes on after it)."""
        return bool(self._line) and _OPENING.match(self._line) is not None

    def feed(self, text: str) -> str:
        """The part of the text so far that can be shown now."""
        return "".join(self._add(piece) for piece in _LINES.findall(text))

    def _add(self, piece: str) -> str:
        """One piece of text with at most one line break, at its end."""
        going_on = self._line and (not self._line_done or _continues(self._line))
        if going_on:  # the candidate line goes on (a JSON list may span lines), or ends
            more = self._line_done
            grown = self._line + ("\n" if more else "") + piece.rstrip("\r\n")
            if could_open(grown) and ("\n" not in grown or _json_block(grown)):
                self._line = grown
                self._held.append(piece)
                self._line_done = piece.endswith("\n")
                return ""
            if more or "\n" in self._line:
                return self._restart(piece)
            return self._release(piece)
        if not piece.strip():
            self._hold_space(piece)
            return ""
        shown = self._release("") if self._line else ""  # text after a whole candidate line
        lead = len(piece) - len(piece.lstrip())
        self._hold_space(piece[:lead])
        rest = piece[lead:]
        if self._newline and could_open(rest.rstrip("\r\n")):
            self._line = rest.rstrip("\r\n")
            self._line_done = rest.endswith("\n")
            self._held.append(rest)
            return shown
        return shown + self._release(rest)

    def _restart(self, piece: str) -> str:
        """The candidate went on past its line and is no prediction after all: show it up
        to the line now growing (which `piece` starts or goes on), and read that line
        afresh, since it may open the prediction itself."""
        held = "".join(self._held)
        if self._line_done:
            prefix, line = held, piece
        else:
            cut = held.rfind("\n") + 1
            prefix, line = held[:cut], held[cut:] + piece
        self._held = [prefix]
        return self._release("") + self._add(line)

    def _hold_space(self, space: str) -> None:
        if space:
            self._held.append(space)
            self._newline = self._newline or "\n" in space

    def _release(self, piece: str) -> str:
        """Show what is held and `piece`, but for the whitespace they end with."""
        out = "".join(self._held) + piece
        kept = out.rstrip()
        self._held = [out[len(kept) :]] if len(kept) < len(out) else []
        self._line, self._line_done = "", False
        self._newline = "\n" in out[len(kept) :]
        return kept

    def finish(self) -> str:
        """The end of the round: what is still held and not the prediction line."""
        held = "".join(self._held)
        self._held, self._line, self._line_done, self._newline = [], "", False, True
        visible, prediction = split_prediction(held)
        return held if prediction is None else visible
