"""The REPL's questions answered by one key press, without Enter.

`ask_by_key(session, question, keys, reason=…)` shows `question` on a prompt_toolkit
prompt where each key of `keys` (either case) answers at once and leaves its word on the
line (`y` → "yes"); the `reason` key, when given, turns the prompt into a line for a reason,
which Enter sends; every other key does nothing, so a stray key can never answer. Ctrl-C
raises KeyboardInterrupt and Ctrl-D EOFError, as at any prompt. The plain front-end has no
such keys: its questions take a line (questions.py says which text fits which).

A user used to typing a line presses Enter after the key: `after_keyed_answer` takes that
one Enter out of what was typed since (prompt_toolkit's own type-ahead, read with the key,
and the bytes queued in the terminal while the turn went on), so it never submits an empty
line; the rest of the type-ahead is returned as text for the next input line. Main thread.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Generic, TypeVar

from prompt_toolkit import PromptSession
from prompt_toolkit.filters import Condition
from prompt_toolkit.input import Input
from prompt_toolkit.input.typeahead import get_typeahead, store_typeahead
from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent
from prompt_toolkit.keys import Keys

from qshell.ui.terminal import take_typeahead, typeahead_text

T = TypeVar("T")
_ENTER_KEYS = (Keys.ControlM, Keys.ControlJ)
_ENTER_BYTES = (b"\r", b"\n")


@dataclass(frozen=True, slots=True)
class Reason(Generic[T]):
    """The key that asks for a line instead (`t`: tell the model why), the prompt that line
    is read with, and the answer made of it."""

    key: str
    prompt: str
    answer: Callable[[str], T]


def ask_by_key(
    session: PromptSession[str],
    question: str,
    keys: Mapping[str, tuple[str, T]],
    *,
    reason: Reason[T] | None = None,
) -> T:
    """The answer of the first key of `keys` (key → (word shown, answer)) pressed, or the
    `reason` line's. KeyboardInterrupt on Ctrl-C, EOFError on Ctrl-D."""
    chosen: list[T] = []
    reading_reason = [False]
    by_key = Condition(lambda: not reading_reason[0])
    bindings = KeyBindings()
    for key, (word, answer) in keys.items():
        handler = _answers(word, answer, chosen)
        for variant in dict.fromkeys((key.lower(), key.upper())):
            bindings.add(variant, filter=by_key)(handler)
    if reason is not None:

        @bindings.add(reason.key, filter=by_key)
        def _ask_reason(event: KeyPressEvent) -> None:
            reading_reason[0] = True
            event.app.invalidate()

    for inert in (Keys.Any, "enter", Keys.BracketedPaste):
        bindings.add(inert, filter=by_key)(_nothing)

    def message() -> str:
        return reason.prompt if reason is not None and reading_reason[0] else question

    line = session.prompt(message, key_bindings=bindings)
    if chosen:
        return chosen[0]
    assert reason is not None  # only the reason's line ends the prompt with Enter
    return reason.answer(line)


def _answers(word: str, answer: T, chosen: list[T]) -> Callable[[KeyPressEvent], None]:
    def handler(event: KeyPressEvent) -> None:
        chosen.append(answer)
        event.app.current_buffer.text = word  # the line left on screen says what was chosen
        event.app.exit(result=word)

    return handler


def _nothing(event: KeyPressEvent) -> None:
    """A key that answers nothing here."""


def after_keyed_answer(input_obj: Input, fd: int) -> str:
    """Drop the one Enter typed right after a keyed answer; the terminal's queued type-ahead
    as text (prompt_toolkit's own stays queued as keys)."""
    keys = get_typeahead(input_obj)
    if keys and keys[0].key in _ENTER_KEYS:
        store_typeahead(input_obj, keys[1:])
        return ""
    store_typeahead(input_obj, keys)
    if keys:
        return ""  # what was read with the key comes first; the terminal's after it
    raw = take_typeahead(fd)
    if raw[:1] in _ENTER_BYTES:
        raw = raw[2:] if raw[:2] == b"\r\n" else raw[1:]
    return typeahead_text(raw)
