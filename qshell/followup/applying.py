"""Accept of a large prepared answer, with its progress on screen while the files go in.

Applying thousands of files takes seconds, and the turn's event stream is a generator the
driver iterates in its worker thread: while `Overlay.apply` runs in it, no event could reach
the screen. `beside(work)` runs `work` (the accept, which calls the apply with a progress
callback) in a thread of its own and, from the generator's side, yields an `ApplyProgress`
event at most every `EVERY_S` until it returns, then returns its result (or raises what
it raised). The generator's thread only waits meanwhile, so `work` is the one code touching
the session until it returns; a cancel reaches the apply through the turn's CancelToken,
which `work` passes on. Closing the generator early still waits for the apply to end, so
the tree is never left mid-apply by a caller that stopped listening.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Generator
from typing import TypeVar

from qshell.agent.events import ApplyProgress

T = TypeVar("T")
Progress = Callable[[int, int], None]
EVERY_S = 0.25  # between two progress events: the driver's spinner ticks in the gaps


_DONE = object()


def beside(
    work: Callable[[Progress], T], *, clock: Callable[[], float] = time.monotonic
) -> Generator[ApplyProgress, None, T]:
    """Run `work(progress)` in a thread; yield its progress now and then; return its result."""
    updates: queue.SimpleQueue[object] = queue.SimpleQueue()
    results: list[T] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            results.append(work(lambda done, total: updates.put((done, total))))
        except BaseException as exc:  # re-raised on the generator's side
            errors.append(exc)
        finally:
            updates.put(_DONE)

    thread = threading.Thread(target=run, name="qshell-accept-apply", daemon=True)
    thread.start()
    shown_at = clock()
    try:
        while (item := updates.get()) is not _DONE:
            assert isinstance(item, tuple)
            if clock() - shown_at >= EVERY_S:
                shown_at = clock()
                yield ApplyProgress(*item)
    finally:
        thread.join()
    if errors:
        raise errors[0]
    return results[0]
