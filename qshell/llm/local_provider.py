"""The provider for the embedded offline model: OpenAI's, adjusted to a small model on llama.cpp.

`LocalProvider` is the ordinary OpenAI provider pointed at a `LocalServer` (local.py). With
a small model (the bundled one, or one configured with `local.smallModel`) it also:
- samples greedily with a fixed seed, so the same prompt gets the same answer;
- lays the history out as such a model answers best (function_calling.py: what the calls
  found is told before the prompt, in the answer round);
- makes its tool calls grammar-constrained (constrained_calls.py). A round that offers
  tools streams freely, and its answer streams as it comes, except its first characters,
  held until they tell prose from a call written as text. A call is asked again with the
  reply held to the offered tools' schemas, and comes back as a tool call. A round that
  must call a tool (`tool_choice`) is constrained from the start.
A failure the server reports only in its log is explained from there. It never starts a
server (local.py does, in the composing thread); it stops the one it owns on `close`.
Thread-safe as the OpenAI provider.
"""

from __future__ import annotations

from collections.abc import Generator, Iterator
from typing import Any

from qshell.cancel import CancelToken
from qshell.errors import ContextTooLong, ProviderUnavailable, StreamBroken
from qshell.llm.base import StreamDone, StreamEvent, StreamText, StreamToolCall
from qshell.llm.constrained_calls import call_schema, calls_prompt, looks_like_call, parse_call
from qshell.llm.function_calling import for_function_calling
from qshell.llm.local import LocalServer
from qshell.llm.messages import ChatRequest, Message, ToolSpec
from qshell.llm.openai import OpenAIProvider, build_body
from qshell.llm.rejections import Knob, asked, without

BUNDLED_SEED = 1234
DRY_MULTIPLIER = 0.8
ANY_TOOL = "\x00any"  # tool_choice of a constrained round that may call any offered tool


class LocalProvider(OpenAIProvider):
    """The OpenAI-compatible provider for a `LocalServer` it owns and stops on `close`."""

    name = "local"

    def __init__(self, server: LocalServer, *, owns_server: bool = True, **kwargs: Any) -> None:
        super().__init__(server.base_url, server.api_key, **kwargs)
        self.server = server
        self.model = server.model
        self._owns_server = owns_server

    def close(self) -> None:
        """Close the HTTP client, and stop the server when this provider owns it."""
        super().close()
        if self._owns_server:
            self.server.close()

    def stream(self, request: ChatRequest, cancel: CancelToken) -> Iterator[StreamEvent]:
        """One round; a failure inside the server is explained from its log."""
        offset = self.server.log_size()
        try:
            yield from self._round(request, cancel)
        except ContextTooLong as error:
            raise ContextTooLong(
                f"the conversation is too long for the local model ({error}); use /compact, "
                "/clear, or raise local.contextSize"
            ) from error
        except StreamBroken as error:
            raise self.server.explain(error, offset) from error
        except ProviderUnavailable as error:
            if self.server.running:
                raise
            raise self.server.stopped() from error

    def _round(self, request: ChatRequest, cancel: CancelToken) -> Iterator[StreamEvent]:
        if not (self.model.small and request.tools) or request.no_tool_calls:
            yield from super().stream(request, cancel)
            return
        if request.tool_choice is None:
            calling = yield from self._free(request, cancel)
            if not calling:
                return
            request = request.model_copy(update={"tool_choice": ANY_TOOL})
        yield from self._constrained(request, cancel)

    def _free(
        self, request: ChatRequest, cancel: CancelToken
    ) -> Generator[StreamEvent, None, bool]:
        """The round as the model writes it, its first text held until it tells prose from
        a call; True (and the stream closed) once it is a call written as text."""
        held: list[str] = []
        deciding = True
        names = {tool.name for tool in request.tools}
        events = super().stream(request, cancel)
        try:
            for event in events:
                if deciding and isinstance(event, StreamText):
                    held.append(event.text)
                    verdict = looks_like_call("".join(held), names)
                    if verdict is None:
                        continue
                    if verdict:
                        return True
                    deciding = False
                    event = StreamText("".join(held))
                elif deciding and held and isinstance(event, StreamDone):
                    deciding = False
                    yield StreamText("".join(held))
                yield event
        finally:
            close = getattr(events, "close", None)  # a generator: end the HTTP stream now
            if close is not None:
                close()
        return False

    def _constrained(self, request: ChatRequest, cancel: CancelToken) -> Iterator[StreamEvent]:
        """A round whose reply is held to a call of the offered tools (or of the one it
        must call), returned as that call; unparseable, the round is asked without tools."""
        tools = _choosable(request)
        text: list[str] = []
        done: StreamDone | None = None
        for event in super().stream(request, cancel):
            if isinstance(event, StreamText):
                text.append(event.text)
            elif isinstance(event, StreamDone):
                done = event
        call = parse_call("".join(text), tools) if done is not None else None
        if call is None or done is None:
            yield from super().stream(request.model_copy(update={"tools": []}), cancel)
            return
        yield StreamToolCall(0, call)
        yield StreamDone(
            message=Message.assistant(tool_calls=[call]),
            usage=done.usage,
            stop_reason="tool_use",
            native_stop=done.native_stop,
        )

    def _body(self, request: ChatRequest, dropped: frozenset[Knob] = frozenset()) -> dict[str, Any]:
        # llama.cpp's server takes no reasoning switch: that knob stays unsent
        # (llm/rejections.py)
        request = without(request, asked(request))
        constrained = self.model.small and bool(request.tools) and request.tool_choice is not None
        if constrained:
            tools = _choosable(request)
            request = request.model_copy(
                update={
                    "system": f"{request.system.rstrip()}\n\n{calls_prompt(tools)}",
                    "tools": [],
                    "tool_choice": None,
                }
            )
        body = build_body(
            for_function_calling(request) if self.model.small else request, dropped=dropped
        )
        for message in body["messages"]:
            if message.get("role") == "assistant" and message.get("content") is None:
                message["content"] = ""  # the server's schema rejects null content
        if constrained:
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": "tool_call", "schema": call_schema(tools)},
            }
        if self.model.small:
            body["temperature"] = 0.0
            body["seed"] = BUNDLED_SEED
            # llama.cpp's DRY sampler: greedy, such a model can repeat one sentence until
            # the output limit; DRY penalises a repeated run of tokens, not a word
            body["dry_multiplier"] = DRY_MULTIPLIER
        return body


def _choosable(request: ChatRequest) -> list[ToolSpec]:
    """The tools a constrained round may call: the one it must, else every offered one."""
    if request.tool_choice and request.tool_choice != ANY_TOOL:
        named = [tool for tool in request.tools if tool.name == request.tool_choice]
        if named:
            return named
    return list(request.tools)
