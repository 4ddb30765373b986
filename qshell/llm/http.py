"""The transport policy both providers share: one httpx client, retries, timeouts, cancel.

`HttpStreamer` POSTs a JSON body, checks the answer, and hands the server-sent events to
a provider's private parser, which yields `StreamText`/`StreamDone`. Around that it owns
every policy decision: retries with backoff only before the first content (connect
errors, 429, 5xx, a stream cut before content), `Retry-After`, the silence watchdog,
cancellation that shuts the socket down, and the single translation of httpx failures and
HTTP statuses into `ProviderError`s (via `errors_map`). It must not know any wire format
and never logs headers, bodies or keys. Thread-safe: the one pooling `httpx.Client` is
shared by concurrent `stream` calls, and each call keeps its own state. By default the
client runs on `sockets.CancellableTransport`, so a cancel or silence timeout cuts the
socket a request is blocked on at once, also on a reused keep-alive connection waiting for
its headers. An injected transport, or httpx's stock one when the environment names a
proxy, gets the fallback: sockets come from httpx's `trace` extension (new connections)
and the response headers, so a cancel while a reused connection still waits for headers
acts when they arrive or when the httpx read backstop (first_token_s +
READ_TIMEOUT_MARGIN_S) expires; a mock transport has no socket and ends at the next chunk.
"""

from __future__ import annotations

import json
import logging
import random
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from threading import Lock
from typing import Any

import httpx
from httpx_sse import ServerSentEvent

from qshell.cancel import CancelToken
from qshell.config import DEFAULTS, TimeoutSettings
from qshell.errors import (
    Cancelled,
    ProviderError,
    ProviderUnavailable,
    RateLimited,
    StreamBroken,
    UsageLimited,
)
from qshell.llm import event_stream
from qshell.llm.background import BACKGROUND_MAX_ATTEMPTS, RateLimitPause
from qshell.llm.base import StreamEvent, StreamReasoning, StreamText
from qshell.llm.errors_map import (
    Endpoint,
    connect_error,
    error_for_status,
    error_from_payload,
    parse_retry_after,
    redact,
)
from qshell.llm.sockets import GUARD_EXTENSION, CancellableTransport, environment_proxies
from qshell.llm.watchdog import AbortHandle, Watchdog

log = logging.getLogger(__name__)

ERROR_BODY_MAX_BYTES = 64 * 1024
DRAIN_S = 2.0
"""After the final event, how long the rest of the body may take before the socket is cut."""
DONE_DATA = b"[DONE]"  # the OpenAI stream's last data line, not JSON
READ_TIMEOUT_MARGIN_S = 30.0
"""httpx's own read timeout is only a backstop this far behind the watchdog."""

_TRANSLATED_ERRORS = (httpx.HTTPError, httpx.StreamError, ProviderError)
"""What a failed exchange may raise; an abort from another thread can surface as any of them."""

SleepFn = Callable[[CancelToken, float], bool]
"""Wait up to the given seconds, waking early on cancel; return True if cancelled."""

Clock = Callable[[], float]


def cancellable_sleep(cancel: CancelToken, seconds: float) -> bool:
    """The default `SleepFn`: `cancel.wait`, so a cancel ends a retry wait at once."""
    return cancel.wait(seconds)


@dataclass(frozen=True)
class Timeouts:
    """Connect limit, silence allowed before the first content, and between chunks after."""

    connect_s: float = DEFAULTS.timeouts.connect_s
    first_token_s: float = DEFAULTS.timeouts.first_token_s
    idle_s: float = DEFAULTS.timeouts.idle_s

    @classmethod
    def of(cls, settings: TimeoutSettings) -> Timeouts:
        return cls(settings.connect_s, settings.first_token_s, settings.idle_s)

    def for_httpx(self) -> httpx.Timeout:
        backstop_s = max(self.first_token_s, self.idle_s) + READ_TIMEOUT_MARGIN_S
        return httpx.Timeout(
            connect=self.connect_s, read=backstop_s, write=backstop_s, pool=self.connect_s
        )


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how long to back off before the first token; `seed` fixes the jitter."""

    max_attempts: int = DEFAULTS.max_retries + 1
    base_delay_s: float = 0.5
    max_delay_s: float = 8.0
    retry_after_cap_s: float = 60.0
    seed: int | None = None

    def delay_s(self, attempt: int, retry_after_s: float | None, rng: random.Random) -> float:
        """Wait before the attempt after `attempt` (1-based): Retry-After, else jittered backoff."""
        if retry_after_s is not None:
            return min(max(retry_after_s, 0.0), self.retry_after_cap_s)
        ceiling = min(self.max_delay_s, self.base_delay_s * 2 ** (attempt - 1))
        return float(ceiling / 2 + rng.uniform(0.0, ceiling / 2))


class StreamCut(StreamBroken):
    """The stream ended or broke before it was complete. Retried if no content came yet."""


class StreamProgress:
    """What one attempt has delivered so far; parsers call `mark_content` on text/tool deltas."""

    def __init__(self, watchdog: Watchdog | None = None) -> None:
        self._watchdog = watchdog
        self.content_started = False

    def mark_content(self) -> None:
        if not self.content_started:
            self.content_started = True
            if self._watchdog is not None:
                self._watchdog.content_started()


FallbackFn = Callable[[ProviderError], dict[str, Any] | None]
"""Given a rejection, another body to send instead (None: the error stands)."""

ParseFn = Callable[[Iterator[ServerSentEvent], StreamProgress], Iterator[StreamEvent]]
"""A provider's parser: server-sent events in, StreamText/StreamDone out; raises on errors."""


class _FeedingStream(httpx.SyncByteStream):
    """Wraps a response body so that every chunk re-arms the watchdog, and a body that ends
    cleanly ends its last event when that event is whole: a server that closes right after
    the last `data:` line, without the blank line that dispatches it (or without even its
    line break, when the line holds a whole JSON value), still delivers that event. A line
    cut mid-way is left undispatched, so the stream ends as the cut stream it is (retried
    when no content came yet), not as malformed JSON."""

    def __init__(self, inner: Any, on_chunk: Callable[[], None]) -> None:
        self._inner = inner
        self._on_chunk = on_chunk

    def __iter__(self) -> Iterator[bytes]:
        last_line: list[bytes] = []  # the bytes after the last line feed
        for chunk in self._inner:
            self._on_chunk()
            _, feed, tail = chunk.rpartition(b"\n")
            if feed:
                last_line.clear()
            last_line.append(tail)
            yield chunk
        yield _event_end(b"".join(last_line))

    def close(self) -> None:
        self._inner.close()


def _event_end(last_line: bytes) -> bytes:
    """What ends a body whose bytes after their last line feed are `last_line`: a blank
    line when that line is whole (empty, ended by a carriage return, or a `data:` line
    holding a whole JSON value or `[DONE]`), nothing when it was cut mid-way."""
    line = b"" if last_line.endswith(b"\r") else last_line.rsplit(b"\r", 1)[-1]
    if not line:
        return b"\n\n"
    name, colon, value = line.partition(b":")
    if name != b"data" or not colon:
        return b""
    value = value.strip()
    if value == DONE_DATA:
        return b"\n\n"
    try:
        json.loads(value)
    except (ValueError, RecursionError):
        return b""
    return b"\n\n"


class _AttemptState:
    """Everything one attempt shares between its reader, the watchdog and a canceller."""

    def __init__(
        self, timeouts: Timeouts, clock: Clock, cancel: CancelToken, model: str, guarded: bool
    ) -> None:
        self.cancel = cancel
        self.model = model
        self.handle = AbortHandle(guarded=guarded)
        self.watchdog = Watchdog(
            timeouts.first_token_s, timeouts.idle_s, self.handle.abort, clock=clock
        )
        self.progress = StreamProgress(self.watchdog)


class HttpStreamer:
    """Streams one provider's requests with the shared retry, timeout and cancel policy."""

    def __init__(
        self,
        endpoint: Endpoint,
        *,
        timeouts: Timeouts | None = None,
        retry: RetryPolicy | None = None,
        transport: httpx.BaseTransport | None = None,
        sleep: SleepFn | None = None,
        clock: Clock | None = None,
        pause: RateLimitPause | None = None,
    ) -> None:
        self.endpoint = endpoint
        self.pause = pause or RateLimitPause()  # background work waits after any 429
        self.timeouts = timeouts or Timeouts()
        self.retry = retry or RetryPolicy()
        self._transport = transport
        # Whether the client runs on `CancellableTransport` (see the module docstring).
        self._guarded = transport is None and not environment_proxies()
        self._sleep = sleep or cancellable_sleep
        self._clock = clock or time.monotonic
        self._rng = random.Random(self.retry.seed)
        self._lock = Lock()
        self._client: httpx.Client | None = None

    def __repr__(self) -> str:
        return f"HttpStreamer({self.endpoint.provider!r}, {self.endpoint.base_url!r})"

    def client(self) -> httpx.Client:
        """The shared client, created on first use."""
        with self._lock:
            if self._client is None:
                transport = CancellableTransport() if self._guarded else self._transport
                self._client = httpx.Client(
                    transport=transport,
                    timeout=self.timeouts.for_httpx(),
                    follow_redirects=False,
                )
            return self._client

    def close(self) -> None:
        with self._lock:
            client, self._client = self._client, None
        if client is not None:
            client.close()

    def stream(
        self,
        *,
        path: str,
        headers: Mapping[str, str],
        body: dict[str, Any],
        model: str,
        cancel: CancelToken,
        parse: ParseFn,
        background: bool = False,
        fallback: FallbackFn | None = None,
    ) -> Iterator[StreamEvent]:
        """POST `body` to `path` and yield the parsed events, retrying before first content;
        a `background` request follows llm/background.py (one retry, none after a 429,
        refused while the rate-limit pause holds). A rejection before content is shown to
        `fallback`, whose other body, if it gives one, is sent at once as the next attempt
        (llm/rejections.py): a main turn's even past its retries (each drops a knob, so
        there are at most as many as there are knobs), a background request's only as its one retry."""
        url = self.endpoint.base_url + path
        content = json.dumps(body).encode("utf-8")
        max_attempts = self.retry.max_attempts
        if background:
            max_attempts = min(max_attempts, BACKGROUND_MAX_ATTEMPTS)
        attempt = 0
        while True:
            if background:
                self._refuse_while_paused()
            attempt += 1
            cancel.raise_if_cancelled()
            state = _AttemptState(self.timeouts, self._clock, cancel, model, self._guarded)
            try:
                yield from self._attempt(url, dict(headers), content, parse, state)
                return
            except ProviderError as error:
                if isinstance(error, RateLimited):  # a usage limit too (UsageLimited)
                    self.pause.note(
                        error.retry_after_s, usage_limit=isinstance(error, UsageLimited)
                    )
                if state.progress.content_started:
                    error.retryable = False
                    raise
                other = fallback(error) if fallback is not None else None
                if other is not None and (attempt < max_attempts or not background):
                    content = json.dumps(other).encode("utf-8")
                    continue
                if not (error.retryable or isinstance(error, StreamCut)):
                    raise
                if attempt >= max_attempts or (background and isinstance(error, RateLimited)):
                    if attempt == 1:
                        raise
                    raise _gave_up(error, attempt) from error
                delay_s = self.retry.delay_s(attempt, error.retry_after_s, self._rng)
                log.debug(
                    "%s: %s on attempt %d/%d; retrying in %.2f s",
                    self.endpoint.provider,
                    type(error).__name__,
                    attempt,
                    max_attempts,
                    delay_s,
                )
                if self._sleep(cancel, delay_s) or cancel.cancelled:
                    raise Cancelled("cancelled") from None

    def _refuse_while_paused(self) -> None:
        """Raise `RateLimited` without a request while the rate-limit pause holds."""
        left_s = self.pause.remaining_s()
        if left_s > 0:
            raise RateLimited(
                f"{self.endpoint.provider}: background request skipped, rate-limited for "
                f"{left_s:.0f} s more",
                retry_after_s=left_s,
            )

    def _attempt(
        self,
        url: str,
        headers: dict[str, str],
        content: bytes,
        parse: ParseFn,
        state: _AttemptState,
    ) -> Iterator[StreamEvent]:
        unregister = state.cancel.on_cancel(state.handle.abort)
        state.watchdog.start()
        try:
            state.cancel.raise_if_cancelled()
            yield from self._exchange(url, headers, content, parse, state)
        except Cancelled:
            raise
        except Exception as exc:
            aborted = state.cancel.cancelled or state.watchdog.expired
            if not (aborted or isinstance(exc, _TRANSLATED_ERRORS)):
                raise  # a bug, not a transport failure: let it surface as is
            error = self._classify(exc, state)
            if error is exc:
                raise
            raise error from exc
        finally:
            state.watchdog.stop()
            unregister()
            state.handle.release()

    def _exchange(
        self,
        url: str,
        headers: dict[str, str],
        content: bytes,
        parse: ParseFn,
        state: _AttemptState,
    ) -> Iterator[StreamEvent]:
        client = self.client()
        handle = state.handle
        extensions = {GUARD_EXTENSION: handle} if self._guarded else {"trace": handle.trace}
        request = client.build_request(
            "POST", url, content=content, headers=headers, extensions=extensions
        )
        response = client.send(request, stream=True)
        handle.attach(response)
        watchdog = state.watchdog
        watchdog.feed()
        if not 200 <= response.status_code < 300:
            raise error_for_status(
                response.status_code,
                _read_capped(response),
                self.endpoint,
                state.model,
                retry_after_s=parse_retry_after(response.headers.get("retry-after")),
            )
        events: Iterator[ServerSentEvent]
        if "application/json" in response.headers.get("content-type", ""):
            # A whole answer instead of a stream (asked for, or a server that cannot
            # stream this request): the parser reads it as the stream's one event.
            events = iter([self._json_answer(_read_capped(response), state.model)])
        else:
            # read as an event stream whatever the header says (llm/event_stream.py)
            response.stream = _FeedingStream(response.stream, watchdog.feed)
            events = event_stream.events(response.iter_text(), self.endpoint, state.model)
        for event in parse(events, state.progress):
            if state.cancel.cancelled:
                raise Cancelled("cancelled")
            if isinstance(event, StreamText | StreamReasoning):
                state.progress.mark_content()
            watchdog.suspend()
            yield event
            watchdog.feed()
        self._drain(events, watchdog)

    @staticmethod
    def _drain(events: Iterator[ServerSentEvent], watchdog: Watchdog) -> None:
        """Read what follows the final event so the connection can go back to the pool."""
        watchdog.rearm(DRAIN_S)
        try:
            for _ in events:
                pass
        except Exception:  # the answer is complete; a messy ending only costs the connection
            log.debug("draining a finished stream failed", exc_info=True)

    def _json_answer(self, body: str, model: str) -> ServerSentEvent:
        """A JSON body as one event; an error payload or a non-object raises."""
        try:
            payload = json.loads(body)
        except (ValueError, RecursionError):
            payload = None
        if isinstance(payload, dict) and payload.get("error"):
            raise error_from_payload(payload, self.endpoint, model)
        if not isinstance(payload, dict):
            raise StreamBroken(
                f"{self.endpoint.base_url} answered with something that is neither an event "
                "stream nor a JSON object"
            )
        return ServerSentEvent(data=body)

    def _classify(self, exc: Exception, state: _AttemptState) -> Exception:
        """The one mapping of a failed attempt to Cancelled or a ProviderError."""
        base_url = self.endpoint.base_url
        cancel, watchdog, progress, handle = (
            state.cancel,
            state.watchdog,
            state.progress,
            state.handle,
        )
        if cancel.cancelled:
            return Cancelled("cancelled")
        if watchdog.expired or isinstance(exc, httpx.ReadTimeout | httpx.WriteTimeout):
            limit_s = watchdog.window_s if watchdog.expired else self.timeouts.for_httpx().read
            return ProviderUnavailable(
                f"no response from the model within {limit_s:g} s ({base_url}); "
                "the server may be overloaded or stuck"
            )
        if isinstance(exc, ProviderError):
            return exc
        detail = redact(str(exc), self.endpoint.secrets) or type(exc).__name__
        if handle.response is None:
            if isinstance(exc, httpx.ConnectTimeout | httpx.PoolTimeout):
                return connect_error(self.endpoint, detail, timed_out=True)
            if isinstance(exc, httpx.ConnectError):
                return connect_error(self.endpoint, detail, timed_out=False)
            return ProviderUnavailable(
                f"{base_url} closed the connection before answering: {detail}"
            )
        if progress.content_started:
            return StreamBroken(f"the stream from {base_url} broke: {detail}")
        return StreamCut(f"the stream from {base_url} broke before any content: {detail}")


def _read_capped(response: httpx.Response) -> str:
    """Up to ERROR_BODY_MAX_BYTES of an error body, as text."""
    chunks: list[bytes] = []
    size = 0
    for chunk in response.iter_bytes():
        chunks.append(chunk)
        size += len(chunk)
        if size >= ERROR_BODY_MAX_BYTES:
            break
    return b"".join(chunks)[:ERROR_BODY_MAX_BYTES].decode("utf-8", errors="replace")


def _gave_up(error: ProviderError, attempts: int) -> ProviderError:
    """The same error, with the number of attempts in its message."""
    again = type(error)(
        f"{error} (gave up after {attempts} attempts)",
        status=error.status,
        retry_after_s=error.retry_after_s,
    )
    again.retryable = error.retryable
    return again
