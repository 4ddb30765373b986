"""What the suggestion controller is given: the generation result it reads and the clock
it schedules on.

`GeneratedSuggestion` is the shape of one generation's result (followup/suggestion.py's
SuggestionResult is one); `Scheduler` runs a call later on some thread and `Cancellable`
stops it; `ThreadingScheduler` is the default, one daemon timer a call. Tests give the
controller their own scheduler and drive time by hand. No state; any thread.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Protocol


class Offered(Protocol):
    """One candidate: its words, and how likely the model said the user types them."""

    @property
    def text(self) -> str:
        """The candidate's words."""

    @property
    def confidence(self) -> float | None:
        """0–1, or None when the model gave none."""


class GeneratedSuggestion(Protocol):
    """What `generate` returns: a text to show, or None and the reason why not."""

    @property
    def text(self) -> str | None:
        """The suggestion, or None when a guard or filter rejected it."""

    @property
    def reason(self) -> str | None:
        """Why `text` is None (a filter or guard name); None when there is a text."""

    @property
    def candidates(self) -> Sequence[Offered]:
        """Every candidate to offer, `text`'s first; empty when `text` is None."""


class Cancellable(Protocol):
    def cancel(self) -> None:
        """Stop the scheduled call if it has not run yet; a no-op afterwards."""


class Scheduler(Protocol):
    def call_later(self, delay_s: float, fn: Callable[[], None]) -> Cancellable:
        """Run `fn` once on some thread after `delay_s`; never call it synchronously."""


class ThreadingScheduler:
    """The default scheduler: one daemon `threading.Timer` per call."""

    def call_later(self, delay_s: float, fn: Callable[[], None]) -> Cancellable:
        timer = threading.Timer(max(0.0, delay_s), fn)
        timer.daemon = True
        timer.start()
        return timer
