"""The provider for the embedded offline model: OpenAI's, adjusted to llama.cpp's server.

`LocalProvider` is the ordinary OpenAI provider pointed at a `LocalServer` (local.py), plus
the adjustments llama.cpp's function-calling chat format needs: rounds offering tools are
requested whole (that format cannot stream an automatic tool choice), an assistant message
with calls carries `""` rather than `null`, and the history is laid out as that format's
template can render it (function_calling.py). With a small model (the bundled one, or one
configured with `local.smallModel`) it also samples greedily with a fixed seed, so the same
prompt gets the same answer. A failure the server reports only in its log is explained
from there. It never starts a server (local.py does, in the composing thread); it stops
the one it owns on `close`. Thread-safe as the OpenAI provider.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from qshell.cancel import CancelToken
from qshell.errors import ProviderUnavailable, StreamBroken
from qshell.llm.base import StreamDone, StreamEvent
from qshell.llm.function_calling import for_function_calling
from qshell.llm.local import FUNCTION_CALLING_FORMAT, LocalServer
from qshell.llm.messages import ChatRequest
from qshell.llm.openai import OpenAIProvider, build_body
from qshell.llm.rejections import Knob, asked, without

BUNDLED_SEED = 1234


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
        except StreamBroken as error:
            raise self.server.explain(error, offset) from error
        except ProviderUnavailable as error:
            if self.server.running:
                raise
            raise self.server.stopped() from error

    def _round(self, request: ChatRequest, cancel: CancelToken) -> Iterator[StreamEvent]:
        """With the function-calling format and tools on offer, llama.cpp picks between a
        call and prose first; when it picks prose its grammar leaves the text empty, so
        that round is asked again without tools, streamed."""
        if not self._auto_tools(request):
            yield from super().stream(request, cancel)
            return
        done: StreamDone | None = None
        texts: list[StreamEvent] = []  # held back until we know this answer is kept
        for event in super().stream(request, cancel):
            if isinstance(event, StreamDone):
                done = event
            else:
                texts.append(event)
        if done is not None and (done.message.tool_calls or done.message.text.strip()):
            yield from texts
            yield done
            return
        yield from super().stream(request.model_copy(update={"tools": []}), cancel)

    def _auto_tools(self, request: ChatRequest) -> bool:
        return (
            self.model.chat_format == FUNCTION_CALLING_FORMAT
            and bool(request.tools)
            and request.tool_choice is None
        )

    def _body(self, request: ChatRequest, dropped: frozenset[Knob] = frozenset()) -> dict[str, Any]:
        # llama-cpp-python's server takes no reasoning switch and its function-calling
        # handlers no `tool_choice: "none"`: both knobs stay unsent (llm/rejections.py)
        request = without(request, asked(request))
        function_calling = self.model.chat_format == FUNCTION_CALLING_FORMAT
        # llama.cpp ignores `stream_options` and never sends usage chunks
        body = build_body(
            for_function_calling(request) if function_calling else request,
            dropped=dropped | {Knob.STREAM_USAGE},
        )
        for message in body["messages"]:
            if message.get("role") == "assistant" and message.get("content") is None:
                message["content"] = ""  # the server's schema rejects null content
        if self._auto_tools(request):
            body["stream"] = False  # llama.cpp cannot stream an automatic tool choice
            body["tool_choice"] = "auto"
        if self.model.small:
            body["temperature"] = 0.0
            body["seed"] = BUNDLED_SEED
        return body
