"""Provider-neutral conversation values: messages, content blocks, tool calls, usage.

These are validated pydantic values with no I/O. Each wire format (OpenAI, Anthropic)
converts to and from them inside its own provider module. A tool result travels in a
`user` message as a `ToolResultBlock`, the Anthropic shape; the OpenAI provider splits
such blocks into `tool` role messages. Immutable in practice: code builds new messages
rather than mutating old ones, so a speculation can share history safely.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class _Value(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class TextBlock(_Value):
    type: Literal["text"] = "text"
    text: str


class ToolCall(_Value):
    """A model's request to run one tool. `arguments` is the raw JSON text the model sent."""

    type: Literal["tool_call"] = "tool_call"
    id: str
    name: str
    arguments: str = "{}"

    def parsed_arguments(self) -> dict[str, Any]:
        """The arguments as a dict; raises ValueError when they are not a JSON object."""
        value = json.loads(self.arguments or "{}")
        if not isinstance(value, dict):
            raise ValueError("tool arguments must be a JSON object")
        return value


class ToolResultBlock(_Value):
    """The outcome of one ToolCall, paired with it by `tool_call_id`."""

    type: Literal["tool_result"] = "tool_result"
    tool_call_id: str
    content: str
    is_error: bool = False


ContentBlock = Annotated[TextBlock | ToolCall | ToolResultBlock, Field(discriminator="type")]


class Message(_Value):
    role: Literal["user", "assistant"]
    content: list[ContentBlock]

    @classmethod
    def user(cls, text: str) -> Message:
        return cls(role="user", content=[TextBlock(text=text)])

    @classmethod
    def assistant(cls, text: str = "", tool_calls: list[ToolCall] | None = None) -> Message:
        blocks: list[TextBlock | ToolCall | ToolResultBlock] = []
        if text:
            blocks.append(TextBlock(text=text))
        blocks.extend(tool_calls or [])
        return cls(role="assistant", content=blocks)

    @property
    def text(self) -> str:
        return "".join(b.text for b in self.content if isinstance(b, TextBlock))

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
    cached_tokens: int | None = None
    cache_creation_tokens: int | None = None
    known: bool = True

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


StopReason = Literal["end_turn", "tool_use", "max_tokens", "other"]
