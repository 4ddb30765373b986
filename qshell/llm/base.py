"""The `Provider` protocol and the events a provider stream yields.

A provider turns one `ChatRequest` into an iterator of `StreamEvent`s: `StreamText`
deltas of the answer and `StreamReasoning` deltas of the model's reasoning as tokens
arrive, then exactly one `StreamDone` carrying the complete assistant message, its usage
and stop reason. Failures are raised as `ProviderError` subclasses
(see `qshell.errors`) and cancellation as `Cancelled`. Providers are thread-safe for
concurrent `stream()` calls; each call owns its HTTP response.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Protocol

from qshell.cancel import CancelToken
from qshell.llm.messages import ChatRequest, Message, StopReason, Usage


@dataclass(frozen=True, slots=True)
class StreamText:
    """A fragment of assistant text, in arrival order."""

    text: str


@dataclass(frozen=True, slots=True)
class StreamReasoning:
    """A fragment of the model's reasoning (shown apart from the answer), in arrival order."""

    text: str


@dataclass(frozen=True, slots=True)
class StreamDone:
    """The end of a round: the whole assistant message (text and tool calls) and usage."""

    message: Message
    usage: Usage
    stop_reason: StopReason
    native_stop: str | None = None  # the server's own word for it ("length", "max_tokens")


StreamEvent = StreamText | StreamReasoning | StreamDone


class Provider(Protocol):
    """A model backend. `name` is for messages; `stream` performs one round."""

    @property
    def name(self) -> str:
        """The backend's name ("openai", "anthropic", "local", …), for messages and defaults."""

    def stream(self, request: ChatRequest, cancel: CancelToken) -> Iterator[StreamEvent]:
        """Yield StreamText events, then one StreamDone; raise ProviderError or Cancelled."""
