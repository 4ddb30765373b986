"""Optional request knobs an endpoint may reject, and the memory of which ones it did.

A `ChatRequest` may ask for things not every OpenAI-compatible or Anthropic-style endpoint
takes: reasoning off (`reasoning_off`: `reasoning_effort`, `enable_thinking`, …) and no tool
calls (`no_tool_calls`: `tool_choice: "none"`). A wire format also places knobs of its own
that some endpoints refuse (`WIRE_KNOBS`): usage asked of the stream (`stream_options`,
which Mistral answers with a 422 `extra_forbidden`) and the name of the output limit
(`max_tokens`, or `max_completion_tokens` for OpenAI's reasoning models; dropping that knob
sends the other name). When an endpoint answers a request with a 4xx that names the wire
key such a knob put in the body, or says in general words that a parameter is unsupported
or unrecognized (naming, in quotes, no other key of the body), `rejected` picks the knobs to
drop; the provider sends that request once more without them (llm/http.py: the fallback
counts as an attempt, so a background request still retries at most once) and `Rejections`
remembers them per model for the life of the provider (one per run), so no later request
pays the failed round trip. A body builder takes the set of knobs dropped; which wire keys a
knob adds is found by building the body with and without it, so this module knows no wire
format. It does no I/O and must not raise for a message it does not understand (nothing
is dropped then). Thread-safe: `Rejections` keeps its sets under a lock.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable
from threading import Lock
from typing import Any

from qshell.errors import BadRequest, ProviderError
from qshell.llm.messages import ChatRequest


class Knob(enum.StrEnum):
    """An optional request knob: for a request knob, its value is the `ChatRequest` field
    that asks for it; a wire knob is placed by the body builder unless dropped."""

    REASONING_OFF = "reasoning_off"
    NO_TOOL_CALLS = "no_tool_calls"
    STREAM_USAGE = "stream_usage"
    TOKEN_LIMIT_NAME = "token_limit_name"


REQUEST_KNOBS = frozenset({Knob.REASONING_OFF, Knob.NO_TOOL_CALLS})
WIRE_KNOBS = frozenset({Knob.STREAM_USAGE, Knob.TOKEN_LIMIT_NAME})


GENERIC_REJECTIONS = (
    "unrecognized",
    "unsupported parameter",
    "unknown parameter",
    "unknown field",
    "unexpected field",
    "unexpected keyword",
    "extra inputs are not permitted",
    "extra_forbidden",
    "does not support thinking",
    "thinking is not supported",
)
"""Words of a rejection that name no key: every request knob placed is dropped then (a wire
knob only when the message names its key; the output limit's name only on such words, or
"instead", since "max_tokens is too large" names the key without refusing it)."""

BodyFn = Callable[[ChatRequest, frozenset[Knob]], dict[str, Any]]
"""A wire format's body for a request, without the knobs dropped."""


def asked(request: ChatRequest, dropped: Iterable[Knob] = ()) -> list[Knob]:
    """The knobs `request` asks for, and the wire knobs not `dropped`."""
    gone = frozenset(dropped)
    return [
        knob
        for knob in Knob
        if knob not in gone and (knob in WIRE_KNOBS or getattr(request, knob.value))
    ]


def without(request: ChatRequest, knobs: Iterable[Knob]) -> ChatRequest:
    """`request` no longer asking for `knobs` (wire knobs are the body builder's to drop)."""
    update = {
        knob.value: False
        for knob in knobs
        if knob in REQUEST_KNOBS and getattr(request, knob.value)
    }
    return request.model_copy(update=update) if update else request


def body(request: ChatRequest, dropped: frozenset[Knob], body_of: BodyFn) -> dict[str, Any]:
    """The body sent for `request` once the `dropped` knobs are dropped."""
    return body_of(without(request, dropped), dropped)


def wire_keys(
    request: ChatRequest, dropped: frozenset[Knob], knob: Knob, body_of: BodyFn
) -> set[str]:
    """The top-level body keys `knob` adds or changes (none: the wire format sends nothing
    for it, e.g. reasoning off on a provider whose requests never turn reasoning on)."""
    sent, plain = body(request, dropped, body_of), body(request, dropped | {knob}, body_of)
    return {key for key in sent.keys() | plain.keys() if sent.get(key) != plain.get(key)}


def rejected(
    error: ProviderError, request: ChatRequest, dropped: frozenset[Knob], body_of: BodyFn
) -> set[Knob]:
    """The knobs still placed that `error` rejects: those whose wire key its message names,
    else — when it says a parameter is unsupported or unrecognized — all the request asks
    for (a wire knob only when named: an endpoint that takes it once takes it always)."""
    if not isinstance(error, BadRequest):
        return set()
    message = str(error).lower()
    placed = {knob: wire_keys(request, dropped, knob, body_of) for knob in asked(request, dropped)}
    placed = {knob: keys for knob, keys in placed.items() if keys}
    refusal = any(words in message for words in GENERIC_REJECTIONS)
    named = {
        knob
        for knob, keys in placed.items()
        if any(k.lower() in message for k in keys)
        and (knob is not Knob.TOKEN_LIMIT_NAME or refusal or "instead" in message)
    }
    if named:
        return named
    if refusal:
        ours = set().union(*placed.values())
        sent = body(request, dropped, body_of)
        others = {key.lower() for key in sent} - {key.lower() for key in ours}
        if any(_quoted(key, message) for key in others):
            return set()  # it names another parameter it rejects ('temperature'): not a knob
        return set(placed) - WIRE_KNOBS
    return set()


def _quoted(key: str, message: str) -> bool:
    """Whether `message` names `key` in quotes, as a rejection names the parameter it means."""
    return any(f"{q}{key}{q}" in message for q in ("'", '"', "`"))


class Rejections:
    """Which knobs each model's endpoint has rejected, for the provider's lifetime."""

    def __init__(self) -> None:
        self._lock = Lock()
        self._by_model: dict[str, frozenset[Knob]] = {}

    def of(self, model: str) -> frozenset[Knob]:
        with self._lock:
            return self._by_model.get(model, frozenset())

    def note(self, model: str, knobs: Iterable[Knob]) -> None:
        with self._lock:
            self._by_model[model] = self._by_model.get(model, frozenset()) | frozenset(knobs)
