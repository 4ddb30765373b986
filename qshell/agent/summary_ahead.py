"""The summary ahead: compaction's summary, written in the background before a turn needs it.

Compacting when a turn's history nears the context window sends one extra round, about as
long as a turn, before the user's prompt starts (compaction.py). So once a turn has ended
with the history past `PREPARE_AT` of the compaction threshold, `SummaryAhead.after_turn`
starts that same summary round (once: later turns keep it while what came after its
snapshot stays small, compaction.py's `prepare_summary`, and the compacted history keeps
those turns whole after the summary) — the session's last request with the summary request
appended, so it extends the cached prefix as a suggestion does — on a thread of its own,
over a snapshot of the history. The turn that then crosses the threshold `take`s it: when
the history still begins with the snapshot (and what came since starts with the user's
message), its finished round stands for the summary round that turn would have sent —
waited for if still streaming, which costs only what is left of it; otherwise (the history
changed under it, the round failed) it is dropped and the turn compacts as before. The
summary never changes the history by itself. Thread-safe: one lock guards the job; the
round runs on its own daemon thread with its own cancel token, cancelled by `cancel` (the
session's close) or when a newer snapshot replaces it.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from qshell.cancel import CancelToken
from qshell.errors import Cancelled, QshellError
from qshell.llm.base import StreamDone
from qshell.llm.messages import ChatRequest, Message

if TYPE_CHECKING:
    from qshell.llm.base import Provider

PREPARE_AT = 0.8  # of the compaction threshold: where the summary starts ahead
WAIT_SLICE_S = 0.1  # how often a turn waiting on the summary looks at its cancel token


@dataclass(frozen=True, slots=True)
class WrittenAhead:
    """A finished summary round and the messages that came after its snapshot."""

    done: StreamDone
    rest: tuple[Message, ...]


@dataclass
class _Job:
    snapshot: tuple[Message, ...]
    cancel: CancelToken = field(default_factory=CancelToken)
    finished: threading.Event = field(default_factory=threading.Event)
    done: StreamDone | None = None


class SummaryAhead:
    """At most one summary round ahead of one session's compaction (see the module doc)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._job: _Job | None = None

    def after_turn(
        self, history: Sequence[Message], provider: Provider, request: ChatRequest
    ) -> bool:
        """Start the summary round `request` (the summary request over `history`) unless
        one for this very history is under way or done; True when one was started."""
        snapshot = tuple(history)
        with self._lock:
            if self._job is not None and self._job.snapshot == snapshot:
                return False
            if self._job is not None:
                self._job.cancel.cancel()
            job = self._job = _Job(snapshot)
        thread = threading.Thread(
            target=_run, args=(job, provider, request), name="qshell-summary", daemon=True
        )
        thread.start()
        return True

    def covered(self, history: Sequence[Message]) -> int | None:
        """How many messages at the start of `history` the summary under way (or done)
        covers, or None when there is none for it."""
        with self._lock:
            job = self._job
        if job is None or (job.finished.is_set() and job.done is None):
            return None
        count = len(job.snapshot)
        return count if tuple(history[:count]) == job.snapshot else None

    def take(self, history: Sequence[Message], cancel: CancelToken) -> WrittenAhead | None:
        """The finished summary of the start of `history`, waiting for it if it still
        streams; None when there is none that fits (the turn then compacts itself)."""
        with self._lock:
            job, self._job = self._job, None
        if job is None:
            return None
        count = len(job.snapshot)
        rest = tuple(history[count:])
        if tuple(history[:count]) != job.snapshot or (rest and rest[0].role != "user"):
            job.cancel.cancel()
            return None
        while not job.finished.wait(WAIT_SLICE_S):
            if cancel.cancelled:
                job.cancel.cancel()
                raise Cancelled("cancelled while the summary was being written")
        return None if job.done is None else WrittenAhead(job.done, rest)

    def cancel(self) -> None:
        """Stop any summary round under way (the session closes)."""
        with self._lock:
            job, self._job = self._job, None
        if job is not None:
            job.cancel.cancel()


def _run(job: _Job, provider: Provider, request: ChatRequest) -> None:
    """The summary round, its last chunk kept on `job`; a failure leaves none."""
    try:
        for chunk in provider.stream(request, job.cancel):
            if isinstance(chunk, StreamDone):
                job.done = chunk
    except (Cancelled, QshellError):
        job.done = None
    finally:
        job.finished.set()


def prepares(tokens: float, threshold: float) -> bool:
    """Whether a history of `tokens` is near enough the compaction `threshold`."""
    return tokens >= PREPARE_AT * threshold
