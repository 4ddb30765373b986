"""The REPL's key bindings: Alt-Enter, the ghost text's keys and those of a summary or a
hidden prediction line streaming under the prompt.

Alt-Enter (ESC CR), Alt-] and Alt-[ arrive as escape sequences that prompt_toolkit would
read as Esc and a key; `recognise_alt_keys` maps them to keys of their own (F24, F23, F22)
so that a lone Esc still acts at once. `key_bindings` binds Tab / Right / Ctrl-E / Ctrl-F /
Enter-on-empty to fill the suggestion, Alt-] / Alt-[ to show its next or previous
candidate, Esc to dismiss it, and Enter, Ctrl-C and Ctrl-D to what the REPL does while a
turn ends under the prompt; every action is a method of the REPL (`KeyTarget`).
`key_hint` is the hint naming those keys beside the ghost, shortened to fit the line. Main
thread; `recognise_alt_keys` changes prompt_toolkit's table for the whole process.
"""

from __future__ import annotations

from typing import Any, Protocol

from prompt_toolkit.buffer import Buffer
from prompt_toolkit.filters import Condition
from prompt_toolkit.input.ansi_escape_sequences import ANSI_SEQUENCES
from prompt_toolkit.key_binding import KeyBindings
from prompt_toolkit.keys import Keys
from prompt_toolkit.utils import get_cwidth

ALT_ENTER = Keys.F24  # what the terminal's Alt-Enter (ESC CR in one write) is read as
ALT_NEXT = Keys.F23  # Alt-] (ESC ] in one write): the next suggestion candidate
ALT_PREVIOUS = Keys.F22  # Alt-[ (ESC [ with nothing after it): the previous one


def key_hint(at: int, count: int, free_columns: int) -> str:
    """The key hint beside a ghost: the longest of its forms that fits in `free_columns`
    (the terminal's width less the prompt, the typed text and the ghost), down to the bare
    keys; "" when not even they fit. `at` of `count` is the candidate shown (Alt-] cycles
    when there is more than one)."""
    cycle = f" · Alt-] {at}/{count}" if count > 1 else ""
    forms = (
        f"⇥ Tab fills{cycle} · Esc dismisses",
        f"⇥ Tab{cycle} · Esc",
        "⇥ Tab · Esc",
        "⇥ Tab",
    )
    return next((form for form in forms if get_cwidth(form) < free_columns), "")


class KeyTarget(Protocol):
    """What the keys act on: the REPL."""

    def ghost_visible(self) -> bool: ...
    def line_empty(self) -> bool: ...
    def fill_suggestion(self, buffer: Buffer, method: str) -> None: ...
    def cycle_suggestion(self, step: int) -> None: ...
    def dismiss_suggestion(self, buffer: Buffer) -> None: ...
    def summarizing(self) -> bool: ...
    def submit_during_summary(self, text: str) -> None: ...
    def cancel_summary(self) -> None: ...
    def leave_after_summary(self) -> None: ...


def recognise_alt_keys() -> None:
    """Read ESC CR arriving together (Alt-Enter) as one key, so that a lone Esc can act at
    once and never pairs up with an Enter typed later; and Alt-] / Alt-[ likewise, which
    would otherwise be an Esc (dismissing the suggestion) and a bracket typed. ESC [ is
    also how arrow keys begin: it is Alt-[ only when nothing follows it in time."""
    for sequence in ("\x1b\r", "\x1b\n"):
        ANSI_SEQUENCES[sequence] = ALT_ENTER
    ANSI_SEQUENCES["\x1b]"] = ALT_NEXT
    ANSI_SEQUENCES["\x1b["] = ALT_PREVIOUS


def key_bindings(repl: KeyTarget) -> KeyBindings:
    """The REPL's own keys, on top of prompt_toolkit's."""
    bindings = KeyBindings()

    @bindings.add(ALT_ENTER)
    def _newline(event: Any) -> None:
        event.current_buffer.insert_text("\n")

    ghost = Condition(repl.ghost_visible)
    ghost_alone = Condition(lambda: repl.ghost_visible() and repl.line_empty())

    @bindings.add("tab", filter=ghost)
    @bindings.add("right", filter=ghost)
    @bindings.add("c-e", filter=ghost)
    @bindings.add("c-f", filter=ghost)
    @bindings.add("enter", filter=ghost_alone)  # Enter fills, never submits unseen text
    def _fill(event: Any) -> None:
        key = event.key_sequence[0].key
        method = {"c-i": "tab", "c-m": "enter"}.get(getattr(key, "value", key), "right")
        repl.fill_suggestion(event.current_buffer, method)

    @bindings.add(ALT_NEXT, filter=ghost)
    @bindings.add(ALT_PREVIOUS, filter=ghost)
    def _cycle(event: Any) -> None:
        repl.cycle_suggestion(1 if event.key_sequence[0].key == ALT_NEXT else -1)

    @bindings.add("escape", filter=ghost, eager=True)  # no wait for a longer key sequence
    def _dismiss(event: Any) -> None:
        repl.dismiss_suggestion(event.current_buffer)

    summarizing = Condition(repl.summarizing)
    empty = Condition(repl.line_empty)

    @bindings.add("enter", filter=summarizing)
    def _submit(event: Any) -> None:
        repl.submit_during_summary(event.current_buffer.text)

    @bindings.add("c-c", filter=summarizing)
    @bindings.add("<sigint>", filter=summarizing)  # a SIGINT while the summary is drawn
    def _cancel_summary(event: Any) -> None:
        repl.cancel_summary()

    @bindings.add("c-d", filter=summarizing & empty)
    def _exit(event: Any) -> None:
        repl.leave_after_summary()

    return bindings
