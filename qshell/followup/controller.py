"""The follow-up suggestion controller that every front-end drives.

Owns the life of one suggestion: hidden → pending → shown, then accepted or ignored. When a
turn finishes it starts generation at once, keeps the result back until
`suggestions.delayMs` after the turn ended, and tells the front-end what ghost text to show
through `on_change`; `on_ready(text, cycle)` hears of a suggestion as soon as it is ready to
be shown (generated, or brought back by emptying the line) — the moment to start speculating
it — and `is_current(cycle)` tells later whether that suggestion is still the live one.
A generation may give up to three candidates (`candidates`, likeliest first): the first shows,
`cycle(±1)` (Alt-] / Alt-[) shows the next or previous one that starts with what is typed,
and typing that leaves the shown one but starts another switches to it; a candidate newly
shown reaches `on_ready` once it has stayed on screen for the same delay as a new
suggestion, so its speculation follows it. Outcomes carry the candidate's `index` (0 is
the first) and how many there were.
The front-end calls the imperative verbs (`user_typed`, `cycle`, `dismiss`, `fill`,
`submitted`, `cancel`) and records nothing itself. The controller knows no terminal
or UI framework, never calls a provider (the `generate` callable it is given does) and never
sleeps: time comes from an injected clock and scheduler, so tests drive it without waiting.
Every outcome goes to local telemetry, with the user's text only when `log_text` is on.
Thread-safe: one lock guards the state; `on_change`, telemetry, timer and token
cancellation all run after the lock is released, and their exceptions are logged, never
raised into the caller or the state.
"""

from __future__ import annotations

import enum
import logging
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from qshell.cancel import CancelToken
from qshell.config import DEFAULTS
from qshell.followup.outcomes import (
    SuggestionOutcome,
    candidates_of,
    ms,
    outcome_fields,
    similarity,
)
from qshell.followup.ports import Cancellable, GeneratedSuggestion, Scheduler, ThreadingScheduler
from qshell.telemetry import Telemetry

__all__ = [
    "ACCEPT_DEBOUNCE_MS",
    "SUGGESTION_DELAY_MS",
    "Cancellable",
    "GeneratedSuggestion",
    "Scheduler",
    "SuggestionController",
    "SuggestionOutcome",
    "SuggestionState",
    "ThreadingScheduler",
    "similarity",
]

log = logging.getLogger(__name__)

SUGGESTION_DELAY_MS = DEFAULTS.suggestions.delay_ms  # earliest it appears after the turn
ACCEPT_DEBOUNCE_MS = 100  # after a fill, further fills are ignored this long (no double Tab)
TELEMETRY_EVENT = "suggestion"


class SuggestionState(enum.Enum):
    HIDDEN = "hidden"  # nothing on screen (none yet, dismissed, typed over, or filled)
    PENDING = "pending"  # generated, waiting for SUGGESTION_DELAY_MS to pass
    SHOWN = "shown"  # the ghost text is on screen


@dataclass(slots=True)
class _Effects:
    """What a verb decided under the lock, carried out after the lock is released."""

    cancels: list[Cancellable | CancelToken] = field(default_factory=list)
    ready: tuple[str, int] | None = None  # a suggestion ready to show, and its cycle
    change: tuple[int, str | None] | None = None
    records: list[dict[str, Any]] = field(default_factory=list)


class SuggestionController:
    """The state machine between the agent loop and a front-end's ghost text."""

    def __init__(
        self,
        *,
        generate: Callable[[CancelToken], GeneratedSuggestion],
        submit_task: Callable[[Callable[[], None]], object],
        scheduler: Scheduler,
        on_change: Callable[[str | None], None],
        telemetry: Telemetry,
        on_ready: Callable[[str, int], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
        log_text: bool = False,
        delay_s: float = SUGGESTION_DELAY_MS / 1000,
        debounce_s: float = ACCEPT_DEBOUNCE_MS / 1000,
    ) -> None:
        if delay_s < 0 or debounce_s < 0:
            raise ValueError(f"delays must not be negative, got {delay_s=!r} {debounce_s=!r}")
        self._generate = generate
        self._submit_task = submit_task
        self._scheduler = scheduler
        self._on_change = on_change
        self._on_ready = on_ready
        self._telemetry = telemetry
        self._clock = clock
        self._log_text = log_text
        self._delay_s = delay_s
        self._debounce_s = debounce_s
        self._lock = threading.Lock()
        # on_change calls are serialised and numbered so an older one never lands last
        self._emit_lock = threading.RLock()
        self._emitted_version = 0
        self._version = 0
        self._visible: str | None = None
        # one suggestion's life; `_epoch` changes whenever it ends, so late work is dropped
        self._epoch = 0
        self._state = SuggestionState.HIDDEN
        self._text: str | None = None  # the candidate shown (or to show)
        self._texts: tuple[str, ...] = ()  # every candidate, likeliest first
        self._confidences: tuple[float | None, ...] = ()  # the model's, for each
        self._index = 0  # which of them `_text` is
        self._follow: Cancellable | None = None  # a cycled-to candidate's wait to speculate
        self._typed = ""  # the input buffer as last reported
        self._token: CancelToken | None = None
        self._timer: Cancellable | None = None
        self._turn_end = 0.0
        self._seen = False  # shown or filled: the user has read it
        self._shown_at = 0.0
        self._restorable = False  # hidden by typing or a fill; an empty buffer brings it back
        self._fill_method: str | None = None
        self._fill_blocked_until = -math.inf
        self._buffer_empty = True

    @property
    def state(self) -> SuggestionState:
        with self._lock:
            return self._state

    def is_current(self, cycle: int, text: str | None = None) -> bool:
        """Whether the suggestion of `cycle` (as `on_ready` gave it) is still the live one:
        not dismissed, replaced, submitted over or cancelled since — and, given `text`,
        still the candidate shown."""
        with self._lock:
            live = cycle == self._epoch and self._text is not None
            return live and (text is None or text == self._text)

    @property
    def choices(self) -> tuple[tuple[str, ...], int]:
        """Every candidate of the live suggestion and the index of the one shown (`((), 0)`
        when there is none)."""
        with self._lock:
            return (self._texts, self._index) if self._text is not None else ((), 0)

    @property
    def visible_text(self) -> str | None:
        """The ghost text a front-end should draw now, or None."""
        with self._lock:
            return self._visible

    def turn_finished(self, suppressed_reason: str | None = None) -> None:
        """A turn ended: start generating, unless a guard (`suppressed_reason`) forbids it."""
        fx = _Effects()
        start: tuple[int, CancelToken] | None = None
        with self._lock:
            self._end_cycle(fx, ignored_reason="new_turn")
            self._turn_end = self._clock()
            if suppressed_reason is None and not self._buffer_empty:
                suppressed_reason = "typing"  # ghost text only ever sits on an empty line
            if suppressed_reason is not None:
                fx.records.append(self._suppressed(suppressed_reason, timed=False))
            else:
                self._token = CancelToken()
                start = (self._epoch, self._token)
        self._apply(fx)
        if start is not None:
            epoch, token = start
            try:
                self._submit_task(lambda: self._run_generation(epoch, token))
            except Exception:  # the pool is shutting down: no suggestion this turn
                log.debug("could not start suggestion generation", exc_info=True)
                with self._lock:
                    if self._token is token:
                        self._token = None

    def user_typed(self, buffer_text: str) -> None:
        """The input buffer changed. Text that starts the suggestion keeps it (the front-end
        shows the rest, as fish does); other text hides it; emptying the line brings it back."""
        fx = _Effects()
        with self._lock:
            was_empty, self._buffer_empty = self._buffer_empty, not buffer_text
            self._typed = buffer_text
            if buffer_text:
                if self._token is not None:  # stop the request; its result is dropped
                    fx.cancels.append(self._token)
                    self._token = None
                    fx.records.append(self._suppressed("aborted"))
                typing_it = self._text is not None and self._text.startswith(buffer_text)
                other = self._matching(buffer_text)
                if self._state is SuggestionState.SHOWN and not typing_it and other:
                    self._switch(fx, other[0])  # it starts another candidate: show that one
                elif self._state is not SuggestionState.HIDDEN and not typing_it:
                    self._cancel_timer(fx)
                    self._state = SuggestionState.HIDDEN
                    self._restorable = True
                    self._set_visible(fx, None)
            elif not was_empty and self._restorable and self._text is not None:
                self._restorable = False
                fx.ready = (self._text, self._epoch)
                self._reveal(fx)
        self._apply(fx)

    def cycle(self, step: int) -> str | None:
        """Alt-] (`step` 1) / Alt-[ (-1): show the next or previous candidate that starts
        with what is typed, wrapping around. Returns the text now shown, or None when the
        ghost is not shown or no other candidate fits."""
        fx = _Effects()
        with self._lock:
            fitting = self._matching(self._typed)
            if self._state is not SuggestionState.SHOWN or len(fitting) < 2:
                return None
            at = fitting.index(self._index) if self._index in fitting else -step
            self._switch(fx, fitting[(at + step) % len(fitting)])
            text = self._text
        self._apply(fx)
        return text

    def dismiss(self) -> None:
        """Esc: drop the suggestion for good (it does not come back on an empty line).

        A no-op when no suggestion is shown, pending or typed over.
        """
        fx = _Effects()
        with self._lock:
            if self._text is not None:
                self._end_cycle(fx, ignored_reason="dismissed")
        self._apply(fx)

    def fill(self, method: str, index: int | None = None) -> str | None:
        """Tab / Right / Enter on an empty line: the text to put in the buffer, or None.

        Works while the ghost is shown and also during the pending window (the text is
        ready, only the delay has not passed). Blocked for `debounce_s` after a fill.
        `index` fills that candidate instead of the one shown (plain mode's `.2`); one
        out of range fills nothing.
        """
        fx = _Effects()
        with self._lock:
            now = self._clock()
            if now < self._fill_blocked_until or self._state is SuggestionState.HIDDEN:
                return None
            if index is not None:
                if not 0 <= index < len(self._texts):
                    return None
                self._index, self._text = index, self._texts[index]
            text = self._text
            time_ms: int | None = None
            if self._state is SuggestionState.PENDING:
                self._cancel_timer(fx)
                self._seen, self._shown_at = True, now
            else:
                time_ms = ms(now - self._shown_at)
            self._state = SuggestionState.HIDDEN
            self._restorable = True
            self._fill_method = method
            self._fill_blocked_until = now + self._debounce_s
            self._set_visible(fx, None)
            fx.records.append(
                self._event(
                    SuggestionOutcome.FILLED, method=method, time_ms=time_ms, suggestion=text
                )
            )
        self._apply(fx)
        return text

    def submitted(self, text: str) -> str | None:
        """The user submitted `text`. Returns the suggestion they had seen, for the transcript.

        Records `accepted` when the texts match after stripping, else `ignored`, with the
        time since it was shown and the similarity. Then the suggestion is gone.
        """
        fx = _Effects()
        with self._lock:
            suggestion = self._text if self._seen else None
            if suggestion is not None:
                picked = [i for i, t in enumerate(self._texts) if t.strip() == text.strip()]
                if picked:  # a candidate the user typed (or filled) is the one accepted
                    self._index, suggestion = picked[0], self._texts[picked[0]]
                accepted = bool(picked)
                fx.records.append(
                    self._event(
                        SuggestionOutcome.ACCEPTED if accepted else SuggestionOutcome.IGNORED,
                        reason=None if accepted else "different_text",
                        method=self._fill_method or "typed",
                        time_ms=ms(self._clock() - self._shown_at),
                        similarity=similarity(suggestion, text),
                        suggestion=suggestion,
                        prompt=text,
                    )
                )
            self._end_cycle(fx, ignored_reason=None)
            self._buffer_empty, self._typed = True, ""
            self._fill_blocked_until = -math.inf
        self._apply(fx)
        return suggestion

    def cancel(self) -> None:
        """Stop everything (a turn started another way, /clear, exit); no suggestion stays."""
        fx = _Effects()
        with self._lock:
            self._end_cycle(fx, ignored_reason="cancelled")
            self._fill_blocked_until = -math.inf
        self._apply(fx)

    def _run_generation(self, epoch: int, token: CancelToken) -> None:
        """Runs on the task pool: generate, then hand the result back under the lock."""
        try:
            result = self._generate(token)
            text, reason = result.text, result.reason
            offered = [(c.text, c.confidence) for c in result.candidates]
        except Exception:
            if token.cancelled:
                return
            log.debug("suggestion generation failed", exc_info=True)
            text, reason, offered = None, "error", []
        text = text.strip() if text else None
        candidates = candidates_of(text, offered) if text else ()
        fx = _Effects()
        with self._lock:
            if epoch != self._epoch or token.cancelled or self._token is not token:
                return  # typed over, dismissed or replaced while it ran
            self._token = None
            if text is None:
                fx.records.append(self._suppressed(reason or "empty"))
            else:
                self._text, self._index = text, 0
                self._texts = tuple(words for words, _ in candidates)
                self._confidences = tuple(confidence for _, confidence in candidates)
                fx.ready = (text, self._epoch)
                self._reveal(fx)
        self._apply(fx)

    def _follow_due(self, epoch: int, index: int) -> None:
        """Runs on the scheduler's thread once a cycled-to candidate has stayed shown for
        the delay: it is ready, so its speculation may start."""
        fx = _Effects()
        with self._lock:
            shown = self._state is SuggestionState.SHOWN and self._index == index
            if epoch != self._epoch or not shown or self._text is None:
                return
            self._follow = None
            fx.ready = (self._text, epoch)
        self._apply(fx)

    def _show_due(self, epoch: int) -> None:
        """Runs on the scheduler's thread when the delay has passed."""
        fx = _Effects()
        with self._lock:
            if epoch != self._epoch or self._state is not SuggestionState.PENDING:
                return
            self._timer = None
            self._show(fx)
        self._apply(fx)

    # The helpers below run with self._lock held and only fill in `fx`.

    def _reveal(self, fx: _Effects) -> None:
        """Show `_text` now if it has waited its delay (or was seen), else schedule it."""
        remaining_s = self._turn_end + self._delay_s - self._clock()
        if self._seen or remaining_s <= 0:
            self._show(fx)
            return
        self._state = SuggestionState.PENDING
        epoch = self._epoch
        self._timer = self._scheduler.call_later(remaining_s, lambda: self._show_due(epoch))

    def _show(self, fx: _Effects) -> None:
        self._state = SuggestionState.SHOWN
        if not self._seen:
            self._seen, self._shown_at = True, self._clock()
            fx.records.append(
                self._event(
                    SuggestionOutcome.SHOWN,
                    time_ms=ms(self._shown_at - self._turn_end),
                    suggestion=self._text,
                )
            )
        self._set_visible(fx, self._text)

    def _matching(self, typed: str) -> list[int]:
        """The candidates that start with `typed`, by index."""
        return [i for i, text in enumerate(self._texts) if text.startswith(typed)]

    def _switch(self, fx: _Effects, index: int) -> None:
        """Show candidate `index` instead, and let its speculation follow after the delay."""
        if index == self._index:
            return
        self._index, self._text = index, self._texts[index]
        self._set_visible(fx, self._text)
        fx.records.append(self._event(SuggestionOutcome.CYCLED, suggestion=self._text))
        if self._follow is not None:
            fx.cancels.append(self._follow)
        epoch = self._epoch
        self._follow = self._scheduler.call_later(
            self._delay_s, lambda: self._follow_due(epoch, index)
        )

    def _set_visible(self, fx: _Effects, text: str | None) -> None:
        if self._visible != text:
            self._visible = text
            self._version += 1
            fx.change = (self._version, text)

    def _cancel_timer(self, fx: _Effects) -> None:
        if self._timer is not None:
            fx.cancels.append(self._timer)
            self._timer = None

    def _end_cycle(self, fx: _Effects, *, ignored_reason: str | None) -> None:
        """Forget the current suggestion; record `ignored` if it was seen and a reason given."""
        if self._token is not None:
            fx.cancels.append(self._token)
            self._token = None
        self._cancel_timer(fx)
        if self._follow is not None:
            fx.cancels.append(self._follow)
            self._follow = None
        if ignored_reason is not None and self._text is not None and self._seen:
            fx.records.append(
                self._event(
                    SuggestionOutcome.IGNORED,
                    reason=ignored_reason,
                    method=self._fill_method,
                    time_ms=ms(self._clock() - self._shown_at),
                    suggestion=self._text,
                )
            )
        self._epoch += 1
        self._state = SuggestionState.HIDDEN
        self._text, self._texts, self._confidences, self._index = None, (), (), 0
        self._seen = False
        self._restorable = False
        self._fill_method = None
        self._set_visible(fx, None)

    def _suppressed(self, reason: str, *, timed: bool = True) -> dict[str, Any]:
        """A `suppressed` event; `timed` adds the time since the turn ended."""
        time_ms = ms(self._clock() - self._turn_end) if timed else None
        return self._event(SuggestionOutcome.SUPPRESSED, reason=reason, time_ms=time_ms)

    def _event(self, outcome: SuggestionOutcome, **details: Any) -> dict[str, Any]:
        """An outcome's telemetry fields, with the live candidate's index and count."""
        live = self._text is not None
        return outcome_fields(
            outcome,
            index=self._index if live else None,
            candidates=len(self._texts) if live else None,
            confidence=self._confidences[self._index] if live else None,
            log_text=self._log_text,
            **details,
        )

    # Outside the lock.

    def _apply(self, fx: _Effects) -> None:
        for cancellable in fx.cancels:
            try:
                cancellable.cancel()
            except Exception:
                log.debug("cancelling a suggestion task failed", exc_info=True)
        if fx.ready is not None and self._on_ready is not None:
            try:
                self._on_ready(*fx.ready)
            except Exception:
                log.debug("on_ready failed", exc_info=True)
        if fx.change is not None:
            self._emit(*fx.change)
        for fields in fx.records:
            try:
                self._telemetry.record(TELEMETRY_EVENT, **fields)
            except Exception:
                log.debug("recording a suggestion event failed", exc_info=True)

    def _emit(self, version: int, text: str | None) -> None:
        with self._emit_lock:
            if version <= self._emitted_version:
                return  # a newer change from another thread was delivered first
            self._emitted_version = version
            try:
                self._on_change(text)
            except Exception:
                log.debug("on_change failed", exc_info=True)
