"""Script values for the fake LLM server: usage, latency, replies, faults, holds and rules.

These are plain values plus two small thread-safe handles (`Hold`, `Rule` counters); this
module does no I/O, never touches sockets and knows nothing about either wire format (the
`sse_*` modules turn a `Reply` into bytes). Thread rule: `Reply`, `Fault`, `Usage`,
`Latency` and `ToolCallSpec` are frozen and shared freely; a `Rule`'s counters are only
changed by the server under its rule lock; a `Hold` may be released from any thread.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from tests.fakes.recording import RecordedRequest


class _Unset:
    """Marker for "option not given" where `None` is itself a meaningful value."""

    def __repr__(self) -> str:
        return "UNSET"


UNSET = _Unset()


@dataclass(frozen=True)
class Usage:
    """Token counts a reply reports, sent verbatim in both wire formats.

    `prompt_tokens=None` estimates from the request size and `completion_tokens=None`
    counts the emitted tokens. `cached_tokens` / `cache_creation_tokens` set to `None`
    leave the field out of the wire usage entirely (OpenAI `prompt_tokens_details`,
    Anthropic `cache_read_input_tokens` / `cache_creation_input_tokens`).
    """

    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cached_tokens: int | None = 0
    cache_creation_tokens: int | None = 0

    @classmethod
    def coerce(cls, value: Any) -> Usage:
        """Accept this class or any object with the same attribute names (e.g. qshell's)."""
        if isinstance(value, Usage):
            return value
        return cls(
            prompt_tokens=getattr(value, "prompt_tokens", None),
            completion_tokens=getattr(value, "completion_tokens", None),
            cached_tokens=getattr(value, "cached_tokens", None),
            cache_creation_tokens=getattr(value, "cache_creation_tokens", None),
        )


@dataclass(frozen=True)
class Latency:
    """Timing profile: wait `ttft_s` before the first content chunk, then pace the rest.

    With `tokens_per_s` set, each later content chunk waits `tokens / tokens_per_s`.
    The defaults add no delay at all.
    """

    ttft_s: float = 0.0
    tokens_per_s: float | None = None

    def delay_for(self, tokens: int, first: bool) -> float:
        if first:
            return max(self.ttft_s, 0.0)
        if not self.tokens_per_s or tokens <= 0:
            return 0.0
        return tokens / self.tokens_per_s


@dataclass(frozen=True)
class ToolCallSpec:
    """One tool call a reply makes. `arguments` may be a dict or raw (even invalid) JSON.

    `pause_s` makes the stream go silent that long after the call's first delta (its id and
    name), as a model does while it generates the arguments (not with `interleave`)."""

    name: str
    arguments: dict[str, Any] | str = field(default_factory=dict)
    id: str | None = None
    pause_s: float = 0.0

    @property
    def arguments_json(self) -> str:
        if isinstance(self.arguments, str):
            return self.arguments
        return json.dumps(self.arguments)


def _with_cached(usage: Usage | None, cached_tokens: int | _Unset | None) -> Usage | None:
    if isinstance(cached_tokens, _Unset):
        return None if usage is None else Usage.coerce(usage)
    return replace(Usage.coerce(usage or Usage()), cached_tokens=cached_tokens)


@dataclass(frozen=True)
class Reply:
    """A successful answer: some text, then zero or more tool calls.

    `stop_reason` is neutral (`end_turn`, `tool_use`, `max_tokens`, or any raw string sent
    as is); `None` derives it from whether there are tool calls. `model` overrides the
    echoed model name. OpenAI-only options: `repeat_id_and_name` (every tool delta repeats
    id and name), `legacy_function_call` (one `delta.function_call`, finish reason
    `function_call`), `interleave` (parallel calls' deltas round-robin).
    """

    content: str = ""
    calls: tuple[ToolCallSpec, ...] = ()
    usage: Usage | None = None
    latency: Latency | None = None
    stop_reason: str | None = None
    model: str | None = None
    repeat_id_and_name: bool = False
    legacy_function_call: bool = False
    interleave: bool = False

    def __post_init__(self) -> None:
        if self.legacy_function_call and len(self.calls) != 1:
            raise ValueError("legacy_function_call needs exactly one tool call")

    @classmethod
    def text(
        cls,
        text: str,
        *,
        usage: Usage | Any | None = None,
        cached_tokens: int | _Unset | None = UNSET,
        latency: Latency | None = None,
        stop_reason: str | None = None,
        model: str | None = None,
    ) -> Reply:
        return cls(
            content=text,
            usage=_with_cached(usage, cached_tokens),
            latency=latency,
            stop_reason=stop_reason,
            model=model,
        )

    @classmethod
    def tool_calls(
        cls,
        calls: Sequence[ToolCallSpec],
        text: str = "",
        *,
        usage: Usage | Any | None = None,
        cached_tokens: int | _Unset | None = UNSET,
        latency: Latency | None = None,
        stop_reason: str | None = None,
        model: str | None = None,
        repeat_id_and_name: bool = False,
        legacy_function_call: bool = False,
        interleave: bool = False,
    ) -> Reply:
        return cls(
            content=text,
            calls=tuple(calls),
            usage=_with_cached(usage, cached_tokens),
            latency=latency,
            stop_reason=stop_reason,
            model=model,
            repeat_id_and_name=repeat_id_and_name,
            legacy_function_call=legacy_function_call,
            interleave=interleave,
        )

    @property
    def neutral_stop_reason(self) -> str:
        if self.stop_reason is not None:
            return self.stop_reason
        return "tool_use" if self.calls else "end_turn"


FaultKind = Literal[
    "raw",
    "http",
    "rate_limited",
    "usage_limit",
    "context_too_long",
    "cut_midway",
    "malformed_json",
    "stall",
]

_DEFAULT_PARTIAL = "This reply is cut off before it ends, so do not trust it."


@dataclass(frozen=True)
class Fault:
    """A failing answer. Build it with the class methods; the fields are their options.

    `reply` is the stream a streaming fault starts from (cut/malformed after
    `after_chunks` content chunks; a stall continues with it once the stall ends, or closes
    the connection without finishing when it is `None`).
    """

    kind: FaultKind
    status: int = 500
    message: str | None = None
    retry_after_s: float | None = None
    max_context: int = 128_000
    reply: Reply | None = None
    after_chunks: int = 2
    clean_close: bool = False
    seconds: float = 0.0
    before_headers: bool = False
    body: bytes = b""
    content_type: str | None = None

    @classmethod
    def raw(cls, status: int, body: bytes, content_type: str | None = "application/json") -> Fault:
        """Answer with exactly `body`, `status` and `content_type` (None: no such header):
        the bytes an API was seen to send, quoted from its documentation or an issue."""
        return cls(kind="raw", status=status, body=body, content_type=content_type)

    @classmethod
    def http(cls, status: int = 500, message: str | None = None) -> Fault:
        return cls(kind="http", status=status, message=message)

    @classmethod
    def rate_limited(cls, retry_after_s: float | None = 1, message: str | None = None) -> Fault:
        return cls(kind="rate_limited", status=429, retry_after_s=retry_after_s, message=message)

    @classmethod
    def usage_limit(cls, status: int | None = None) -> Fault:
        """The account is out of credit or quota, as each API says it: OpenAI's 429
        `insufficient_quota` (`status` 403 for its other form), Anthropic's 400 "credit
        balance is too low" (`status` 402: its `billing_error`)."""
        return cls(kind="usage_limit", status=status or 0)

    @classmethod
    def context_too_long(cls, max_context: int = 128_000) -> Fault:
        return cls(kind="context_too_long", status=400, max_context=max_context)

    @classmethod
    def cut_midway(
        cls, reply: Reply | None = None, after_chunks: int = 2, clean_close: bool = False
    ) -> Fault:
        """Stream `after_chunks` content chunks, then end without [DONE] / message_stop.

        By default the chunked body is left unterminated (the client sees a broken
        transfer); `clean_close=True` ends the HTTP body properly but still mid-stream.
        """
        return cls(
            kind="cut_midway",
            reply=reply or Reply.text(_DEFAULT_PARTIAL),
            after_chunks=after_chunks,
            clean_close=clean_close,
        )

    @classmethod
    def malformed_json(cls, reply: Reply | None = None, after_chunks: int = 2) -> Fault:
        """Stream `after_chunks` content chunks, then a `data:` line that is not JSON."""
        return cls(
            kind="malformed_json",
            reply=reply or Reply.text(_DEFAULT_PARTIAL),
            after_chunks=after_chunks,
        )

    @classmethod
    def stall(
        cls, seconds: float, reply: Reply | None = None, before_headers: bool = False
    ) -> Fault:
        """Go silent for `seconds` (or until `release_all()` / `stop()` / client hang-up).

        Silent after the headers and the opening chunk, or before any byte when
        `before_headers`. Afterwards continue with `reply`, or close without finishing.
        """
        return cls(kind="stall", seconds=seconds, reply=reply, before_headers=before_headers)


Answer = Reply | Fault


class Hold:
    """Makes matching requests wait (before replying, after the first content chunk, or
    with `after_call=i` right after the chunk that makes tool call i complete: OpenAI's
    first delta of the next call or the finish chunk, Anthropic's `content_block_stop`).

    `arrived` is set once a request is being held. `release()` lets every held and every
    later request through; it is permanent. Safe to use from any thread.
    """

    def __init__(self, after_first_chunk: bool = False, after_call: int | None = None) -> None:
        self.after_first_chunk = after_first_chunk
        self.after_call = after_call
        self.arrived = threading.Event()
        self.released = threading.Event()
        self._lock = threading.Lock()
        self._requests: list[RecordedRequest] = []

    @property
    def late(self) -> bool:
        """Whether it holds inside the stream rather than before the reply."""
        return self.after_first_chunk or self.after_call is not None

    def release(self) -> None:
        self.released.set()

    @property
    def requests(self) -> list[RecordedRequest]:
        """The requests that have been held so far, in arrival order."""
        with self._lock:
            return list(self._requests)

    def wait_arrived(self, timeout: float = 5.0) -> RecordedRequest:
        """Wait until a request is held and return the first one; TimeoutError otherwise."""
        if not self.arrived.wait(timeout):
            raise TimeoutError(f"no request reached the hold within {timeout} s")
        return self.requests[0]

    def enter(self, request: RecordedRequest) -> None:
        """Called by the server when it starts holding `request`."""
        with self._lock:
            self._requests.append(request)
        self.arrived.set()

    def __repr__(self) -> str:
        state = "released" if self.released.is_set() else "holding"
        return f"Hold({state}, held={len(self.requests)})"


@dataclass(eq=False)
class Rule:
    """Answer requests for which `match(request)` is true.

    Give `reply` (used `times` times, `None` = unlimited) or `replies` (consumed in order;
    the rule is then exhausted unless `times` is larger, in which case the last repeats).
    `hold=True` attaches a new `Hold` (then `rule.hold` is that handle), honouring
    `hold_after_first_chunk`.
    """

    match: Callable[[RecordedRequest], bool]
    reply: Answer | None = None
    times: int | None = None
    replies: Sequence[Answer] = ()
    hold: Hold | bool | None = None
    hold_after_first_chunk: bool = False
    name: str = ""
    hits: int = field(default=0, init=False)
    matched: list[RecordedRequest] = field(default_factory=list, init=False)

    def __post_init__(self) -> None:
        if (self.reply is None) == (not self.replies):
            raise ValueError("a Rule needs exactly one of reply= or replies=")
        self.replies = tuple(self.replies)
        if self.hold is True:
            self.hold = Hold(after_first_chunk=self.hold_after_first_chunk)
        elif self.hold is False:
            self.hold = None

    @property
    def hold_handle(self) -> Hold | None:
        return self.hold if isinstance(self.hold, Hold) else None

    @property
    def limit(self) -> int | None:
        if self.times is not None:
            return self.times
        return len(self.replies) if self.replies else None

    @property
    def exhausted(self) -> bool:
        limit = self.limit
        return limit is not None and self.hits >= limit

    def consume(self, request: RecordedRequest) -> Answer:
        """Take the next answer for `request`. The server calls this under its rule lock."""
        if self.replies:
            answer = self.replies[min(self.hits, len(self.replies) - 1)]
        else:
            assert self.reply is not None
            answer = self.reply
        self.hits += 1
        self.matched.append(request)
        return answer

    def __repr__(self) -> str:
        label = self.name or getattr(self.match, "description", None) or repr(self.match)
        return f"Rule({label}, hits={self.hits}, limit={self.limit})"
