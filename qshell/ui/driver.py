"""Run one turn's event stream in a worker thread and hand its events to the UI thread.

The worker iterates the loop's generator (which blocks on provider reads, tools and
question futures); the calling thread — the front-end's main thread — receives each
event from a queue, renders it, answers permission questions through the front-end's
`ask` function and apply questions through its `confirm`, and ticks the renderer's
spinner while nothing arrives. Ctrl-C cancels the turn through its CancelToken
(signals.py); a second Ctrl-C stops waiting at once, and Ctrl-C at a question cancels the
turn at once too (either said, "cancelled", as a cancel during a stream is).
A front-end that gives its prompt back while a summary streams (D3), or while only the
hidden prediction line is left to stream, has `drive` return the `RunningTurn` at its
`SummaryStarted` or `PredictionStarted`. `drive` and `follow` must be called from the
thread that owns the terminal.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from qshell.agent.events import (
    ApplyChoice,
    ApplyRequested,
    Event,
    FailureKind,
    PermissionReply,
    PermissionRequested,
    PredictionStarted,
    SummaryStarted,
    TurnFailed,
    TurnFinished,
)
from qshell.cancel import CancelToken
from qshell.ui.render import Renderer
from qshell.ui.signals import sigint_cancels, sigint_raises

log = logging.getLogger(__name__)

TICK_S = 0.1
WORKER_JOIN_S = 10.0
_DONE = object()

Ask = Callable[[PermissionRequested], PermissionReply]
Confirm = Callable[[ApplyRequested], ApplyChoice]


def _pump(events: Iterator[Event], out: queue.Queue[Any]) -> None:
    try:
        for event in events:
            out.put(event)
    except Exception as exc:  # a bug must surface as a failed turn, not a dead worker
        log.exception("turn crashed")
        out.put(TurnFailed(FailureKind.ERROR, f"internal error: {exc}"))
    finally:
        out.put(_DONE)


class RunningTurn:
    """A turn's worker and the queue its events arrive in. `drive` follows it to its end;
    with `detach_on_summary` it hands it back at the turn's `SummaryStarted` (D3) or
    `PredictionStarted` (only the hidden prediction line is left to stream), and the
    front-end then takes what arrives (`take`, without blocking) while its prompt runs,
    or follows the rest in the foreground again (`follow`). Main thread only, but for
    `cancel`."""

    def __init__(self, events: Iterator[Event], cancel: CancelToken) -> None:
        self.cancel = cancel
        self._inbox: queue.Queue[Any] = queue.Queue()
        self._back: list[Event] = []  # taken but not handled yet: the first ones again
        self.ended = False  # the last event has been taken
        # what handed it back: a summary (a message cancels it) or the hidden prediction
        # line (a message waits for it)
        self.detached_by: SummaryStarted | PredictionStarted | None = None
        self.worker = threading.Thread(
            target=_pump, args=(events, self._inbox), name="qshell-turn", daemon=True
        )

    def get(self, timeout_s: float) -> Any:
        """The next event, or `_DONE` at the end; queue.Empty after `timeout_s` of nothing."""
        if self._back:
            return self._back.pop(0)
        if self.ended:
            return _DONE
        item = self._inbox.get(timeout=timeout_s)
        self.ended = self.ended or item is _DONE
        return item

    def take(self) -> list[Event]:
        """Every event that has arrived, in order, without waiting."""
        items: list[Event] = []
        while not self.ended or self._back:
            try:
                item = self.get(0)
            except queue.Empty:
                break
            if item is _DONE:
                break
            items.append(item)
        return items

    def put_back(self, items: list[Event]) -> None:
        """Events taken but not handled: `get` and `take` give them first."""
        self._back[:0] = items

    def join(self, timeout_s: float = 0.0) -> bool:
        """Wait up to `timeout_s` for the worker; whether it has finished."""
        self.worker.join(timeout_s)
        return not self.worker.is_alive()


def start(events: Iterator[Event], cancel: CancelToken) -> RunningTurn:
    """Start the worker that iterates `events`."""
    running = RunningTurn(events, cancel)
    running.worker.start()
    return running


def drive(
    events: Iterator[Event],
    renderer: Renderer,
    ask: Ask,
    cancel: CancelToken,
    *,
    confirm: Confirm | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> Event | None:
    """Render `events` until the stream ends; returns the final TurnFinished/TurnFailed.
    `ask` answers permission questions, `confirm` whether to apply an accepted speculation
    (without it, the answer is discard)."""
    last = follow(start(events, cancel), renderer, ask, confirm=confirm, clock=clock)
    assert not isinstance(last, RunningTurn)  # it never detaches
    return last


def follow(
    running: RunningTurn,
    renderer: Renderer,
    ask: Ask,
    *,
    confirm: Confirm | None = None,
    clock: Callable[[], float] = time.monotonic,
    detach_on_summary: bool = False,
) -> Event | RunningTurn | None:
    """`drive` for a turn already running: render what it yields until it ends. With
    `detach_on_summary`, a `SummaryStarted` or `PredictionStarted` (rendered) returns the
    still running turn."""
    last: Event | None = None
    started = clock()
    cancel = running.cancel
    detached = False
    with sigint_cancels(cancel):
        try:
            while True:
                try:
                    item = running.get(TICK_S)
                except queue.Empty:
                    if last is None:  # after the turn's end nothing is waited for any more
                        renderer.waiting(clock() - started)
                    continue
                if item is _DONE:
                    break
                if isinstance(item, PermissionRequested):
                    renderer.permission(item)
                    with sigint_raises():
                        reply = ask(item)
                    if not item.future.done():
                        item.future.set_result(reply)
                    started = clock()
                    continue
                renderer.event(item)
                if isinstance(item, SummaryStarted | PredictionStarted) and detach_on_summary:
                    detached = True
                    running.detached_by = item
                    return running
                if isinstance(item, ApplyRequested):
                    with sigint_raises():
                        choice = confirm(item) if confirm is not None else ApplyChoice.DISCARD
                    if not item.future.done():
                        item.future.set_result(choice)
                    started = clock()
                    continue
                if isinstance(item, TurnFinished | TurnFailed):
                    last = item
        except KeyboardInterrupt:  # at a question, or a second Ctrl-C: stop waiting now
            cancel.cancel()
            if last is None:  # said as a cancel during a stream says it, once
                last = TurnFailed(FailureKind.CANCELLED, "cancelled")
                renderer.event(last)
        finally:
            if not detached:
                renderer.end_turn()
    # a cancelled turn stops promptly; waiting for it keeps two turns from ever overlapping
    if not running.join(WORKER_JOIN_S):
        log.warning("the cancelled turn is still finishing in the background")
    return last
