"""SuggestionFlights: at most one suggestion request per conversation context, shared.

A suggestion depends only on its context — the fork request `generate_suggestion` would
send (the cache-safe parameters, the model, the prediction prompt) and the previous prompt
its filter compares with — so two callers asking for the same context get one request: the
second joins the one in flight, or takes its result if it has finished. That is how the
suggestion a completed speculation pipelines is the one shown after its accepted turn,
even when the turn ends while that request still streams. A request ends when every
caller waiting for it has been cancelled (the controller's, when the user types over it),
when it is dropped (`drop`: its speculation was aborted; `keep_only`: a new prompt was
submitted and its context can no longer be reached) or at `close` (the conversation
closes, and no request starts after); a pipelined one, whose caller never cancels, runs
until one of the last two. Ending one cancels its token, which closes the HTTP stream. A
result that was aborted is never reused. It never touches the session or the terminal.
Thread-safe: one lock guards the table; the request runs on the thread of the caller that
started it, outside the lock, and waiters block on an event that a cancel also sets.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable, Collection
from dataclasses import dataclass, field

from qshell.cancel import CancelToken
from qshell.followup.suggestion import SUGGESTION_PROMPT, SuggestionResult, generate_suggestion
from qshell.llm.base import Provider
from qshell.llm.fork import CacheSafeParams

ABORTED = SuggestionResult(None, "aborted", None)


@dataclass(frozen=True, slots=True)
class SuggestionContext:
    """What one suggestion is generated from; `key` names the request it sends."""

    provider: Provider
    params: CacheSafeParams
    model: str | None
    previous_prompt: str

    @property
    def key(self) -> str:
        request = self.params.fork(SUGGESTION_PROMPT, model=self.model)
        digest = hashlib.sha256(request.model_dump_json().encode())
        # the filter compares with the previous prompt ignoring case and spacing; so does this
        digest.update(b"\0" + " ".join(self.previous_prompt.lower().split()).encode())
        return digest.hexdigest()


Generate = Callable[[SuggestionContext, CancelToken], SuggestionResult]


def generate(context: SuggestionContext, cancel: CancelToken) -> SuggestionResult:
    """The default request: one `generate_suggestion` for `context`."""
    return generate_suggestion(
        context.provider,
        context.params,
        cancel,
        model=context.model,
        previous_prompt=context.previous_prompt,
    )


@dataclass(eq=False)
class _Flight:
    token: CancelToken = field(default_factory=CancelToken)
    waiters: int = 0
    result: SuggestionResult | None = None
    wakes: list[threading.Event] = field(default_factory=list)


class SuggestionFlights:
    """The suggestion requests of one conversation, by context."""

    def __init__(self, request: Generate = generate) -> None:
        self._request = request
        self._lock = threading.Lock()
        self._flights: dict[str, _Flight] = {}
        self._closed = False

    def get(
        self,
        context: SuggestionContext,
        cancel: CancelToken,
        *,
        still_wanted: Callable[[], bool] = lambda: True,
    ) -> SuggestionResult:
        """The suggestion for `context`: the finished one, the one in flight (waited for
        until it ends or `cancel` fires), or one requested here and now; `still_wanted`,
        asked under the lock before a new request is registered, can refuse it (then the
        result is `aborted`)."""
        key = context.key
        with self._lock:
            flight = self._flights.get(key)
            if flight is not None and flight.result is not None:
                if flight.result.reason != ABORTED.reason:
                    return flight.result
                flight = None
            if flight is not None and flight.token.cancelled:
                flight = None  # ending: it will answer `aborted`; ask again
            owner = flight is None
            if flight is None:
                if self._closed or cancel.cancelled or not still_wanted():
                    return ABORTED
                flight = self._flights[key] = _Flight()
            flight.waiters += 1
            wake = threading.Event()
            flight.wakes.append(wake)
        unregister = cancel.on_cancel(lambda: self._leave(flight, wake))
        try:
            if owner:
                self._run(flight, context)
            wake.wait()
        finally:
            unregister()
        with self._lock:
            result = flight.result
        return result if result is not None and not cancel.cancelled else ABORTED

    def _run(self, flight: _Flight, context: SuggestionContext) -> None:
        try:
            result = self._request(context, flight.token)
        except Exception:  # generate_suggestion fails open; a broken one is `error` too
            result = SuggestionResult(None, "error", None)
        if flight.token.cancelled:
            result = ABORTED
        with self._lock:
            flight.result = result
            wakes, flight.wakes = flight.wakes, []
        for wake in wakes:
            wake.set()

    def _leave(self, flight: _Flight, wake: threading.Event) -> None:
        """A waiter was cancelled: it stops waiting; the last one out ends the request."""
        with self._lock:
            if wake not in flight.wakes:
                return  # the flight had already finished for it
            flight.wakes.remove(wake)
            flight.waiters -= 1
            last = flight.waiters == 0 and flight.result is None
        wake.set()
        if last:
            flight.token.cancel()

    def keep_only(self, contexts: Collection[SuggestionContext]) -> None:
        """Forget every context but these, ending their requests still in flight."""
        keys = {c.key for c in contexts}
        self._drop(lambda key: key not in keys)

    def drop(self, context: SuggestionContext) -> None:
        """Forget `context`, ending its request if it is still in flight."""
        gone = context.key
        self._drop(lambda key: key == gone)

    def close(self) -> None:
        """End every request in flight, forget every result and start no more."""
        with self._lock:
            self._closed = True
        self._drop(lambda key: True)

    def _drop(self, dropped: Callable[[str], bool]) -> None:
        with self._lock:
            ending = [f for k, f in self._flights.items() if dropped(k)]
            self._flights = {k: f for k, f in self._flights.items() if not dropped(k)}
        for flight in ending:
            flight.token.cancel()
