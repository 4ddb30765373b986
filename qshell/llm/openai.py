"""OpenAIProvider: the Chat Completions wire format (OpenAI and compatible local servers).

It converts a `ChatRequest` into a `/chat/completions` body (tool results become `tool`
role messages; the current turn's `reasoning_content` goes back on its assistant messages,
which DeepSeek's thinking mode requires in a tool round; a call cut off by the output limit
is left out with its result; reasoning off, `tool_choice: "none"` and DashScope's cache
markers as llm/openai_dialects.py decides them) and streams the chunks through `ChunkState`
(llm/openai_chunks.py) as text, reasoning and one `StreamDone`.
Transport, retries, timeouts, cancellation and error translation are not its business:
they live in `http.py`. The API key goes only into the Authorization header and never
into a message, log line or repr. Thread-safe: concurrent `stream` calls share one
`HttpStreamer` and keep their parse state local.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from httpx_sse import ServerSentEvent

from qshell.config import DEFAULTS, Toggle
from qshell.llm.base import StreamEvent, StreamReasoning, StreamText, ending
from qshell.llm.errors_map import error_from_payload
from qshell.llm.http import (
    StreamCut,
    StreamProgress,
)
from qshell.llm.messages import (
    ChatRequest,
    Message,
    TextBlock,
    ToolResultBlock,
    current_turn_start,
    without_cut_calls,
)
from qshell.llm.openai_chunks import ChunkState
from qshell.llm.openai_dialects import (
    DASHSCOPE_CACHE_HEADER,
    asks_stream_usage,
    dashscope_cache_on,
    mark_cache,
    reasoning_off_fields,
    token_limit_name,
)
from qshell.llm.rejections import Knob
from qshell.llm.sse_provider import SSEProvider

DONE_SENTINEL = "[DONE]"


class OpenAIProvider(SSEProvider):
    """A `Provider` for `POST {base_url}/chat/completions` with `stream: true`."""

    name = "openai"

    path = "/chat/completions"
    key_env = "OPENAI_API_KEY"
    model_env = "OPENAI_MODEL"
    default_base_url = ""

    def __init__(
        self,
        base_url: str = "",
        api_key: str | None = None,
        *,
        dashscope_cache: Toggle = DEFAULTS.dashscope_cache,
        **kwargs: Any,
    ) -> None:
        super().__init__(base_url, api_key, **kwargs)
        self.dashscope_cache = dashscope_cache_on(dashscope_cache, self.base_url)

    def _headers(self) -> dict[str, str]:
        headers = {"authorization": f"Bearer {self._api_key}"} if self._api_key else {}
        if self.dashscope_cache:
            headers[DASHSCOPE_CACHE_HEADER] = "enable"
        return headers

    def _body(self, request: ChatRequest, dropped: frozenset[Knob] = frozenset()) -> dict[str, Any]:
        return build_body(
            request, base_url=self.base_url, dashscope_cache=self.dashscope_cache, dropped=dropped
        )

    def _parse(
        self, events: Iterator[ServerSentEvent], progress: StreamProgress, model: str
    ) -> Iterator[StreamEvent]:
        state = ChunkState()
        done = False
        for event in events:
            data = event.data.strip()
            if not data:
                continue
            if data == DONE_SENTINEL:
                done = True
                break
            chunk = self._decode(data, "a chunk")
            if chunk.get("error"):
                raise error_from_payload(chunk, self._endpoint, model, in_stream=True)
            text, reasoning = state.feed(chunk)
            if state.content_seen:
                progress.mark_content()
            if reasoning:
                yield StreamReasoning(reasoning)
            if text:
                yield StreamText(text)
            yield from state.completed()
        if not done and state.finish_reason is None:
            raise StreamCut(f"the stream from {self.base_url} ended before the answer was complete")
        yield from ending(state.finish(self.base_url), state.announced)


def build_body(
    request: ChatRequest,
    *,
    base_url: str = "",
    dashscope_cache: bool = False,
    dropped: frozenset[Knob] = frozenset(),
) -> dict[str, Any]:
    """The `/chat/completions` JSON body for `request`; `base_url` picks the reasoning-off
    dialect, the output limit's name and whether usage is asked of the stream,
    `dashscope_cache` adds DashScope's cache markers (llm/openai_dialects.py); a wire knob
    in `dropped` (its endpoint refused it: llm/rejections.py) is left out, or for the
    output limit, named the other way. `no_tool_calls` sends `tool_choice: "none"` with the
    tools still listed (so the serialized prefix keeps them) and wins over a forced
    `tool_choice`."""
    messages = _messages(request, base_url)
    body: dict[str, Any] = {"model": request.model, "messages": messages, "stream": True}
    if Knob.STREAM_USAGE not in dropped and asks_stream_usage(base_url):
        body["stream_options"] = {"include_usage": True}
    swapped = Knob.TOKEN_LIMIT_NAME in dropped
    body[token_limit_name(request.model, swapped=swapped)] = request.max_tokens
    if request.tools:
        body["tools"] = [
            {
                "type": "function",
                "function": {
                    "name": tool.name,
                    "description": tool.description,
                    "parameters": tool.parameters,
                },
            }
            for tool in request.tools
        ]
        if request.no_tool_calls:
            body["tool_choice"] = "none"
        elif request.tool_choice:
            body["tool_choice"] = {"type": "function", "function": {"name": request.tool_choice}}
    if request.reasoning_off:
        body.update(reasoning_off_fields(request.model, base_url))
    if request.temperature is not None:
        body["temperature"] = request.temperature
    if dashscope_cache:
        mark_cache(body)
    return body


def _messages(request: ChatRequest, base_url: str) -> list[dict[str, Any]]:
    """The wire messages. An assistant message with nothing to send — a round cut off while
    it was reasoning, whose reasoning is not sent back — is left out as a round that said
    nothing is (Mistral rejects an assistant message with neither content nor calls)."""
    out: list[dict[str, Any]] = []
    if request.system:
        out.append({"role": "system", "content": request.system})
    messages = without_cut_calls(request.messages)
    turn_start = current_turn_start(messages)
    for index, message in enumerate(messages):
        if message.role == "assistant":
            entry = _assistant(message, base_url, with_reasoning=index > turn_start)
            if entry["content"] or entry.keys() & {"tool_calls", "reasoning_content"}:
                out.append(entry)
            continue
        for block in message.content:
            if isinstance(block, ToolResultBlock):
                out.append(
                    {"role": "tool", "tool_call_id": block.tool_call_id, "content": block.content}
                )
        texts = [b.text for b in message.content if isinstance(b, TextBlock)]
        if texts:
            out.append({"role": "user", "content": "".join(texts)})
    return out


def _assistant(message: Message, base_url: str, *, with_reasoning: bool) -> dict[str, Any]:
    """An assistant message; `with_reasoning` sends back its `reasoning_content` (only the
    current turn's: a DeepSeek tool round needs it, and older turns' would be rejected by
    deepseek-reasoner or ignored). OpenRouter's `reasoning_details` go back on every turn's
    message, as they came (its reasoning-tokens guide: "preserving reasoning blocks"), and
    so does what a server put on each call (Gemini's `extra_content`: its thought-signature
    guide says a call sent back without it is refused with a 400) — both only to the
    endpoint at `base_url` they came from, since another refuses the unknown fields (OpenAI:
    400 "Unknown parameter"), as a session continued on another endpoint would send them."""
    calls = message.tool_calls
    entry: dict[str, Any] = {"role": "assistant", "content": message.text or None}
    blocks = message.reasoning_blocks
    reasoning = "".join(b.text for b in blocks if b.source == "reasoning_content")
    if with_reasoning and reasoning:
        entry["reasoning_content"] = reasoning
    details = [d for b in blocks if _ours(b.origin, base_url) for d in b.details or ()]
    if details:
        entry["reasoning_details"] = details
    if calls:
        entry["tool_calls"] = [
            {
                **(call.extra if call.extra and _ours(call.origin, base_url) else {}),
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": call.arguments or "{}"},
            }
            for call in calls
        ]
    elif entry["content"] is None:
        entry["content"] = ""
    return entry


def _ours(origin: str | None, base_url: str) -> bool:
    """Whether fields an endpoint put on a message go back to the one at `base_url`: the
    same endpoint, or one not known (a session saved before the origin was kept)."""
    return origin is None or origin == base_url
