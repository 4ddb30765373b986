"""The policy for background requests (suggestions, speculations): what they may cost.

A background request is a `ChatRequest` with `background=True`; `CacheSafeParams` marks
every fork so. `HttpStreamer` gives such a request at most `BACKGROUND_MAX_ATTEMPTS`
attempts (one retry — a rejected knob's fallback counts as that retry; a main turn keeps its
own policy), never retries it after a 429, and starts none while its `RateLimitPause`
holds: any 429 — a main turn's or a background one's — pauses background work for the
server's `Retry-After`, else `DEFAULT_PAUSE_S`; a usage limit (`UsageLimited`: out of
credit or quota, whatever its status) pauses it for `USAGE_LIMIT_PAUSE_S`, since waiting a
Retry-After will not add credit. Reasoning: under `backgroundReasoning: off`
(the default) a fork asks for reasoning off (`ChatRequest.reasoning_off`, serialized per
wire format in llm/openai_dialects.py; an endpoint that rejects it gets the request again
without it, and never again: llm/rejections.py), because a side query that reasons costs
far more than it shows — Qwen Code measured background side queries spending 24–95× more
output tokens than visible (#4501). The price is the prefix cache: OpenAI-style chat
templates (the harmony format of gpt-oss and OpenAI's reasoning models) render the effort
into the very first, system, message, so a fork with another effort than the main request
misses the whole cached prefix there; Qwen3's template (`enable_thinking`) changes only
the generation prompt after the last message, so its prefix holds. Anthropic needs no field: qshell never turns thinking on, and a request
without `thinking` has it off, so its forks stay byte-identical (Anthropic documents that a
changed `thinking` invalidates cached messages). `inherit` sends what the main request
sends and keeps the whole prefix. A fork on `fastModel` changes, besides, only the model
field. Thread-safe: the pause is guarded by a lock.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from threading import Lock

BACKGROUND_MAX_ATTEMPTS = 2
"""A background request's first attempt plus at most one retry."""
DEFAULT_PAUSE_S = 30.0
"""How long background work waits after a 429 that names no Retry-After."""
MAX_PAUSE_S = 300.0
"""The longest pause a Retry-After may ask for."""
USAGE_LIMIT_PAUSE_S = 900.0
"""How long background work waits after a usage limit (out of credit or quota)."""


class RateLimitPause:
    """How long background requests must wait after the last 429; the clock is injectable."""

    def __init__(
        self,
        *,
        default_s: float = DEFAULT_PAUSE_S,
        max_s: float = MAX_PAUSE_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._default_s = default_s
        self._max_s = max_s
        self._clock = clock
        self._lock = Lock()
        self._until: float | None = None

    def note(self, retry_after_s: float | None, *, usage_limit: bool = False) -> None:
        """A 429 arrived: pause for `retry_after_s` (capped), else the default; a usage
        limit pauses for `USAGE_LIMIT_PAUSE_S`. A pause already running longer is kept."""
        wait_s = self._default_s if retry_after_s is None else retry_after_s
        wait_s = min(max(wait_s, 0.0), self._max_s)
        if usage_limit:
            wait_s = max(wait_s, USAGE_LIMIT_PAUSE_S)
        until = self._clock() + wait_s
        with self._lock:
            if self._until is None or until > self._until:
                self._until = until

    def remaining_s(self) -> float:
        """Seconds left of the pause; 0 when background requests may start."""
        with self._lock:
            if self._until is None:
                return 0.0
            left = self._until - self._clock()
            if left <= 0:
                self._until = None
                return 0.0
            return left

    @property
    def paused(self) -> bool:
        return self.remaining_s() > 0
