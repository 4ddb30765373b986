"""SSEProvider: what the OpenAI and Anthropic providers share around their wire formats.

It owns the endpoint description (used for error messages and key redaction) and the
`HttpStreamer` that applies the retry, timeout and cancel policy, sends one streaming
request for a subclass, and decodes each SSE data line into a JSON object or raises
`StreamBroken`; a request knob its endpoint rejects (reasoning off, no tool calls) is
dropped for a retry and for good (llm/rejections.py). Subclasses add only their headers,
body and event parsing. The API key is kept private: it goes into headers the subclass
builds and nowhere else, and `repr` never shows it. Thread-safe: concurrent streams share
only the pooled client and the rejections memory (locked).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from typing import Any, ClassVar

import httpx
from httpx_sse import ServerSentEvent

from qshell.cancel import CancelToken
from qshell.errors import ProviderError, StreamBroken
from qshell.llm.background import RateLimitPause
from qshell.llm.base import StreamEvent
from qshell.llm.errors_map import Endpoint
from qshell.llm.http import Clock, HttpStreamer, RetryPolicy, SleepFn, StreamProgress, Timeouts
from qshell.llm.messages import ChatRequest
from qshell.llm.rejections import Knob, Rejections, body, rejected

log = logging.getLogger(__name__)


class SSEProvider:
    """Shared construction, streaming and JSON decoding for SSE chat providers."""

    name: ClassVar[str]
    path: ClassVar[str]  # the endpoint under base_url
    key_env: ClassVar[str]
    model_env: ClassVar[str]
    default_base_url: ClassVar[str] = ""

    def __init__(
        self,
        base_url: str = "",
        api_key: str | None = None,
        *,
        timeouts: Timeouts | None = None,
        retry: RetryPolicy | None = None,
        transport: httpx.BaseTransport | None = None,
        sleep: SleepFn | None = None,
        clock: Clock | None = None,
        pause: RateLimitPause | None = None,
        key_env: str | None = None,
        model_env: str | None = None,
    ) -> None:
        self.base_url = (base_url or self.default_base_url).rstrip("/")
        self._api_key = api_key or None
        self._endpoint = Endpoint(
            provider=self.name,
            base_url=self.base_url,
            key_env=key_env or self.key_env,
            model_env=model_env or self.model_env,
            secrets=(api_key,) if api_key else (),
        )
        self._http = HttpStreamer(
            self._endpoint,
            timeouts=timeouts,
            retry=retry,
            transport=transport,
            sleep=sleep,
            clock=clock,
            pause=pause,
        )
        self.rejections = Rejections()  # knobs this provider's endpoint refused, per model

    def __repr__(self) -> str:
        return f"{type(self).__name__}(base_url={self.base_url!r})"

    def close(self) -> None:
        """Close the shared HTTP client (a later `stream` opens a new one)."""
        self._http.close()

    def _headers(self) -> dict[str, str]:
        """This wire format's own headers (authentication, version); set by each provider."""
        return {}

    def _body(self, request: ChatRequest, dropped: frozenset[Knob] = frozenset()) -> dict[str, Any]:
        """The JSON body for `request` without the wire knobs `dropped` (llm/rejections.py);
        each provider builds its own."""
        return {}

    def _parse(
        self, events: Iterator[ServerSentEvent], progress: StreamProgress, model: str
    ) -> Iterator[StreamEvent]:
        """Turn this wire format's events into StreamText and one StreamDone."""
        return iter(())

    def stream(self, request: ChatRequest, cancel: CancelToken) -> Iterator[StreamEvent]:
        """One round: POST the body to `path` and parse the SSE stream (see llm/base.py).
        A knob this model's endpoint rejected before is not sent; one it rejects now is
        dropped for the retry and from then on (llm/rejections.py)."""
        headers = {"content-type": "application/json", "accept": "text/event-stream"}
        headers.update(self._headers())
        dropped = self.rejections.of(request.model)

        def bound(
            events: Iterator[ServerSentEvent], progress: StreamProgress
        ) -> Iterator[StreamEvent]:
            return self._parse(events, progress, request.model)

        def fallback(error: ProviderError) -> dict[str, Any] | None:
            nonlocal dropped
            knobs = rejected(error, request, dropped, self._body)
            if not knobs:
                return None
            self.rejections.note(request.model, knobs)
            log.info("%s: %s rejected %s; sent without", self.name, request.model, sorted(knobs))
            dropped = dropped | knobs
            return body(request, dropped, self._body)

        return self._http.stream(
            path=self.path,
            headers=headers,
            body=body(request, dropped, self._body),
            model=request.model,
            cancel=cancel,
            parse=bound,
            background=request.background,
            fallback=fallback,
        )

    def _decode(self, data: str, what: str) -> dict[str, Any]:
        """One SSE data line as a JSON object; `what` names it in the error ("a chunk")."""
        try:
            value = json.loads(data)
        except (ValueError, RecursionError):
            raise StreamBroken(
                f"malformed stream from {self.base_url}: a data line is not JSON"
            ) from None
        if not isinstance(value, dict):
            raise StreamBroken(f"malformed stream from {self.base_url}: {what} is not an object")
        return value
