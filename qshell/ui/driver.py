"""Run one turn's event stream in a worker thread and hand its events to the UI thread.

The worker iterates the loop's generator (which blocks on provider reads, tools and
question futures); the calling thread — the front-end's main thread — receives each
event from a queue, renders it, answers permission questions through the front-end's
`ask` function and apply questions through its `confirm`, and ticks the renderer's spinner while nothing arrives. Ctrl-C cancels
the turn through its CancelToken (signals.py); a second Ctrl-C stops waiting at once.
`drive` must be called from the thread that owns the terminal.
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
    inbox: queue.Queue[Any] = queue.Queue()
    worker = threading.Thread(target=_pump, args=(events, inbox), name="qshell-turn", daemon=True)
    last: Event | None = None
    started = clock()
    with sigint_cancels(cancel):
        worker.start()
        try:
            while True:
                try:
                    item = inbox.get(timeout=TICK_S)
                except queue.Empty:
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
                if isinstance(item, ApplyRequested):
                    with sigint_raises():
                        choice = confirm(item) if confirm is not None else ApplyChoice.DISCARD
                    if not item.future.done():
                        item.future.set_result(choice)
                    started = clock()
                    continue
                if isinstance(item, TurnFinished | TurnFailed):
                    last = item
        except KeyboardInterrupt:
            cancel.cancel()
            last = TurnFailed(FailureKind.CANCELLED, "cancelled")
        finally:
            renderer.end_turn()
    # a cancelled turn stops promptly; waiting for it keeps two turns from ever overlapping
    worker.join(WORKER_JOIN_S)
    if worker.is_alive():
        log.warning("the cancelled turn is still finishing in the background")
    return last
