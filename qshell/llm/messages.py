"""Provider-neutral conversation values: messages, content blocks, tool calls, usage.

These are validated pydantic values with no I/O. Each wire format (OpenAI, Anthropic)
converts to and from them inside its own provider module. A tool result travels in a
`user` message as a `ToolResultBlock`, the Anthropic shape; the OpenAI provider splits
such blocks into `tool` role messages. A model's reasoning is kept as a `ReasoningBlock`
that remembers the wire field it came in and, for Anthropic, its signature, so each
provider can send it back exactly as its API requires; what an API attaches for itself
to a call (Gemini's thought signature), to reasoning (OpenRouter's `reasoning_details`) or
as blocks of its own (Anthropic's server tool calls and results, a `WireBlock`) is kept
as it came, to go back unchanged; a tool call cut off by the output
limit is kept with `complete=False` and its arguments as far as they came, and is never
run. Immutable in practice: code builds new messages
rather than mutating old ones, so a speculation can share history safely.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class _Value(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class TextBlock(_Value):
    type: Literal["text"] = "text"
    text: str


class ReasoningBlock(_Value):
    """What a model thought before answering, as its API sent it.

    `source` is the wire field it came in: `reasoning_content` (DeepSeek, Qwen, Grok,
    Moonshot), `reasoning` (vLLM, Ollama, Groq, OpenRouter), `thinking` (Anthropic, and
    Mistral's content parts). Anthropic signs its thinking (`signature`) and may send it
    encrypted (`redacted`: the opaque data, with empty `text`); both go back unchanged.
    `details` is OpenRouter's `reasoning_details` list (text, summaries, encrypted data,
    each streamed fragment merged into its entry), sent back unchanged in later requests
    as OpenRouter documents (its models lose their reasoning between calls without it).
    `origin` is the base URL of the endpoint that sent `details`: they go back only there
    (another endpoint refuses the unknown field; None, from an older session: sent)."""

    type: Literal["reasoning"] = "reasoning"
    text: str = ""
    source: str = "thinking"
    signature: str | None = None
    redacted: str | None = None
    details: list[dict[str, Any]] | None = None
    origin: str | None = None


class ToolCall(_Value):
    """A model's request to run one tool. `arguments` is the raw JSON text the model sent;
    `complete` is False when the output limit cut it off before its arguments were whole.
    `extra` holds the fields an OpenAI-compatible API put on the call beyond id, type and
    function, by wire name (Gemini's `extra_content` with its thought signature), to be
    sent back on it unchanged to the endpoint whose base URL is `origin` and to no other
    (OpenAI refuses a call's unknown field with a 400; None, from an older session: sent)."""

    type: Literal["tool_call"] = "tool_call"
    id: str
    name: str
    arguments: str = "{}"
    complete: bool = True
    extra: dict[str, Any] | None = None
    origin: str | None = None

    def parsed_arguments(self) -> dict[str, Any]:
        """The arguments as a dict; raises ValueError when they are not a JSON object
        (nesting too deep for the parser, as a hostile model may send, included)."""
        try:
            value = json.loads(self.arguments or "{}")
        except RecursionError:
            raise ValueError("tool arguments are nested too deeply") from None
        if not isinstance(value, dict):
            raise ValueError("tool arguments must be a JSON object")
        return value


class ToolResultBlock(_Value):
    """The outcome of one ToolCall, paired with it by `tool_call_id`."""

    type: Literal["tool_result"] = "tool_result"
    tool_call_id: str
    content: str
    is_error: bool = False


class WireBlock(_Value):
    """A block of an API's own that qshell neither shows nor runs but must send back as it
    came: Anthropic's server tool calls (`server_tool_use`) and their results
    (`web_search_tool_result`, …), which a paused turn (`pause_turn`) continues from.
    `wire` names the wire format that sent it; only that one sends it back."""

    type: Literal["wire"] = "wire"
    wire: str
    data: dict[str, Any]


ContentBlock = Annotated[
    TextBlock | ReasoningBlock | ToolCall | ToolResultBlock | WireBlock,
    Field(discriminator="type"),
]


class Message(_Value):
    role: Literal["user", "assistant"]
    content: list[ContentBlock]

    @classmethod
    def user(cls, text: str) -> Message:
        return cls(role="user", content=[TextBlock(text=text)])

    @classmethod
    def assistant(
        cls,
        text: str = "",
        tool_calls: list[ToolCall] | None = None,
        *,
        reasoning: list[ReasoningBlock] | None = None,
    ) -> Message:
        blocks: list[TextBlock | ReasoningBlock | ToolCall | ToolResultBlock | WireBlock] = []
        blocks.extend(reasoning or [])
        if text:
            blocks.append(TextBlock(text=text))
        blocks.extend(tool_calls or [])
        return cls(role="assistant", content=blocks)

    @property
    def text(self) -> str:
        return "".join(b.text for b in self.content if isinstance(b, TextBlock))

    @property
    def reasoning(self) -> str:
        """The text of its reasoning blocks (empty when it has none, or only redacted ones)."""
        return "".join(b.text for b in self.content if isinstance(b, ReasoningBlock))

    @property
    def reasoning_blocks(self) -> list[ReasoningBlock]:
        return [b for b in self.content if isinstance(b, ReasoningBlock)]

    @property
    def tool_calls(self) -> list[ToolCall]:
        return [b for b in self.content if isinstance(b, ToolCall)]

    @property
    def tool_results(self) -> list[ToolResultBlock]:
        return [b for b in self.content if isinstance(b, ToolResultBlock)]


class Usage(_Value):
    """Token counts of one model round. `None` means the server did not say (unknown);
    `known=False` means it reported no usage at all (llama.cpp's server does not in a
    stream), so the counts are zero for that round and a sum of rounds is a lower bound."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int | None = None  # prompt tokens read from the provider's cache
    cache_creation_tokens: int | None = None  # prompt tokens written to it
    reasoning_tokens: int | None = None  # of completion_tokens, those spent reasoning
    known: bool = True

    @property
    def cache_hit_rate(self) -> float | None:
        """Cached / prompt tokens; None when the server did not say or nothing was sent."""
        if self.cached_tokens is None or not self.prompt_tokens:
            return None
        return self.cached_tokens / self.prompt_tokens

    def __add__(self, other: Usage) -> Usage:
        def add(a: int | None, b: int | None) -> int | None:
            if a is None and b is None:
                return None
            return (a or 0) + (b or 0)

        return Usage(
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
            cached_tokens=add(self.cached_tokens, other.cached_tokens),
            cache_creation_tokens=add(self.cache_creation_tokens, other.cache_creation_tokens),
            reasoning_tokens=add(self.reasoning_tokens, other.reasoning_tokens),
            known=self.known and other.known,
        )


class ToolSpec(_Value):
    """What the model sees of a tool: its name, description and JSON schema."""

    name: str
    description: str
    parameters: dict[str, Any]


class ChatRequest(_Value):
    """One model round's request, in provider-neutral form."""

    model: str
    system: str
    messages: list[Message]
    tools: list[ToolSpec] = Field(default_factory=list)
    max_tokens: int = 8192
    temperature: float | None = None
    tool_choice: str | None = None  # a tool the model must call this round; None = its choice
    no_tool_calls: bool = False
    """Send `tool_choice: "none"`: the tools stay listed (the cached prefix keeps them) but
    the model may not call one (a round predicted to be a pure summary, `leanSummaryRounds`)."""
    reasoning_off: bool = False
    """Ask for reasoning/thinking off where the provider takes it (background requests under
    `backgroundReasoning: off`, lean summary rounds); dropped when the endpoint rejects it."""
    background: bool = False
    """A side request (a fork: suggestion, speculation) under llm/background.py's policy;
    never sent on the wire, so it cannot change the serialized prefix."""


StopReason = Literal[
    "end_turn", "tool_use", "max_tokens", "refusal", "content_filter", "pause_turn", "other"
]
"""Why a round ended. Only `end_turn` and `tool_use` are a finished answer: `max_tokens`
(the output limit, or the context window, cut it), `refusal` (the model declined) and
`content_filter` (the provider withheld it) end the turn unfinished, and no tool call of
such a round runs. `pause_turn` (Anthropic paused a long server-tool turn) is not an end:
the turn goes on with the paused content sent back as it came (agent/loop.py)."""
FINISHED_STOPS: frozenset[StopReason] = frozenset({"end_turn", "tool_use"})


def current_turn_start(messages: list[Message]) -> int:
    """The index of the current turn's prompt: the last user message that answers no
    call (-1 when there is none)."""
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if message.role == "user" and not message.tool_results:
            return index
    return -1


def answered_calls(messages: Sequence[Message], index: int) -> dict[str, ToolCall]:
    """The calls, by id, that the results of `messages[index]` answer: those of the
    message before it. An id names a call only there, since ids repeat across responses
    on some servers (`call_0` in every one)."""
    before = messages[index - 1] if index > 0 and messages[index].tool_results else None
    if before is None or before.role != "assistant":
        return {}
    return {call.id: call for call in before.tool_calls}


def without_cut_calls(messages: list[Message]) -> list[Message]:
    """The history as a provider may send it: a call the output limit cut off, whose
    arguments never became whole, is no call the API would accept, so it is left out with
    its result (both stay in the history and its transcript as they were); a message left
    with nothing is left out too. A result goes with the call of the message before it
    (ids repeat across responses on some servers: `call_0` in every one)."""
    if not any(not c.complete for m in messages for c in m.tool_calls):
        return messages
    out: list[Message] = []
    cut: set[str] = set()  # the ids of the calls cut in the message before
    for message in messages:
        kept = [
            b
            for b in message.content
            if not (isinstance(b, ToolCall) and not b.complete)
            and not (isinstance(b, ToolResultBlock) and b.tool_call_id in cut)
        ]
        cut = {c.id for c in message.tool_calls if not c.complete}
        if kept:
            out.append(
                message
                if len(kept) == len(message.content)
                else Message(role=message.role, content=kept)
            )
    return out
