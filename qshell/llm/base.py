"""The `Provider` protocol and the events a provider stream yields.

A provider turns one `ChatRequest` into an iterator of `StreamEvent`s: `StreamText`
deltas of the answer and `StreamReasoning` deltas of the model's reasoning as tokens
arrive, a `StreamToolCall` as each tool call's arguments become final (while the rest may
still stream), then exactly one `StreamDone` carrying the complete assistant message, its
usage and stop reason. A consumer that does not start calls early ignores StreamToolCall. Failures are raised as `ProviderError` subclasses
(see `qshell.errors`) and cancellation as `Cancelled`. Providers are thread-safe for
concurrent `stream()` calls; each call owns its HTTP response.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Protocol

from qshell.cancel import CancelToken
from qshell.llm.messages import FINISHED_STOPS, ChatRequest, Message, StopReason, ToolCall, Usage


@dataclass(frozen=True, slots=True)
class StreamText:
    """A fragment of assistant text, in arrival order."""

    text: str


@dataclass(frozen=True, slots=True)
class StreamReasoning:
    """A fragment of the model's reasoning (shown apart from the answer), in arrival order."""

    text: str


@dataclass(frozen=True, slots=True)
class StreamToolCall:
    """Tool call `index` (0-based, in the order of the message's calls) is complete: its
    arguments will not change. Sent at most once per call, in index order, before the
    StreamDone whose message holds the same call (same id); a call the output limit cut off
    gets none. OpenAI-compatible streams mark it when a later call begins (or at the end),
    Anthropic's at the tool_use block's `content_block_stop`."""

    index: int
    call: ToolCall


@dataclass(frozen=True, slots=True)
class StreamDone:
    """The end of a round: the whole assistant message (text and tool calls) and usage."""

    message: Message
    usage: Usage
    stop_reason: StopReason
    native_stop: str | None = None  # the server's own word for it ("length", "max_tokens")
    citations: tuple[str, ...] = ()  # the sources the answer cites (Perplexity's `citations`)


StreamEvent = StreamText | StreamReasoning | StreamToolCall | StreamDone


def ending(done: StreamDone, announced: int) -> Iterator[StreamToolCall | StreamDone]:
    """The end of a stream: a StreamToolCall for each call from `announced` on (those not
    announced while the stream ran) when the round finished, then `done`."""
    if done.stop_reason in FINISHED_STOPS:
        for index, call in enumerate(done.message.tool_calls[announced:], start=announced):
            yield StreamToolCall(index, call)
    yield done


class Provider(Protocol):
    """A model backend. `name` is for messages; `stream` performs one round."""

    @property
    def name(self) -> str:
        """The backend's name ("openai", "anthropic", "local", …), for messages and defaults."""

    def stream(self, request: ChatRequest, cancel: CancelToken) -> Iterator[StreamEvent]:
        """Yield StreamText events, then one StreamDone; raise ProviderError or Cancelled."""
