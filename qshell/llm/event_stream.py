"""The body of a successful streaming answer read as server-sent events, whatever its header.

The official SDKs read a 200 answer's body as an event stream without looking at its
Content-Type, and so does this reader: `text/event-stream`, `text/plain` or no header at all
(`application/json` is a whole answer and never reaches it: llm/http.py). Lines follow the
WHATWG grammar (`data:`, `event:`, `id:`, `retry:`, `:` comments; an event dispatched at a
blank line) and become httpx-sse's `ServerSentEvent`s. Two kinds of line are no part of
that grammar and would otherwise be dropped as unknown fields, leaving a stream that just
ends: a bare JSON error object on a line of its own (`{"error": {…}}`, as some gateways
send in place of the stream or part-way through it) is raised as the error it says, once,
not retried; and a body with no line of the grammar at all (an HTML page, NDJSON) fails as
not an event stream, in one line, with its first characters, a whole-body JSON error being
read as that error and a whole-body JSON object as the answer's one event. It does no I/O of its own (it consumes the text
chunks it is given) and keeps its state per call, so any thread may use it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any

from httpx_sse import ServerSentEvent

from qshell.errors import ProviderError, StreamBroken
from qshell.llm.errors_map import Endpoint, error_from_payload, redact

SSE_FIELDS = frozenset({"data", "event", "id", "retry"})
STRAY_KEEP_CHARS = 64 * 1024
"""How much of a body with no event-stream line is kept to read it as one JSON error."""
QUOTE_CHARS = 80


def events(chunks: Iterable[str], endpoint: Endpoint, model: str) -> Iterator[ServerSentEvent]:
    """The server-sent events of a body given as text chunks; raises the error a bare JSON
    error line says, or `StreamBroken` when the body held no event-stream line at all."""
    reader = _StreamReader(endpoint, model)
    lines = _Lines()
    for chunk in chunks:
        for line in lines.feed(chunk):
            event = reader.line(line)
            if event is not None:
                yield event
    for line in lines.ended():
        event = reader.line(line)
        if event is not None:
            yield event
    whole = reader.end(lines.rest())
    if whole is not None:
        yield whole


class _Lines:
    """A body's text chunks cut into lines at CRLF, CR or LF. A CR that ends a chunk is
    held until the next chunk says whether an LF follows it (one CRLF split across two
    reads is one line end, not a line and a blank line that would dispatch an event
    half-read), and a line longer than a chunk is kept as parts joined once, so a long
    line costs its length, not its length times its chunks."""

    def __init__(self) -> None:
        self.parts: list[str] = []  # the line begun and not yet ended
        self.cr = False  # the last chunk ended with a CR

    def feed(self, chunk: str) -> list[str]:
        if self.cr:
            chunk, self.cr = "\r" + chunk, False
        if chunk.endswith("\r"):
            chunk, self.cr = chunk[:-1], True
        lines = chunk.replace("\r\n", "\n").replace("\r", "\n").split("\n")
        if len(lines) == 1:
            self.parts.append(lines[0])
            return []
        lines[0] = "".join(self.parts) + lines[0]
        self.parts = [lines.pop()]
        return lines

    def ended(self) -> list[str]:
        """The line a CR ended at the very end of the body."""
        if not self.cr:
            return []
        self.cr = False
        line, self.parts = "".join(self.parts), []
        return [line]

    def rest(self) -> str:
        """The body's last line, which no line end ended."""
        return "".join(self.parts)


class _StreamReader:
    """One body's lines: the event being built, and what was seen of the grammar."""

    def __init__(self, endpoint: Endpoint, model: str) -> None:
        self.endpoint = endpoint
        self.model = model
        self.data: list[str] = []
        self.event = ""
        self.id = ""
        self.retry: int | None = None
        self.grammar_seen = False
        self.stray: list[str] = []  # lines outside the grammar while none inside came
        self.stray_chars = 0

    def line(self, line: str) -> ServerSentEvent | None:
        if not line:
            return self._dispatch()
        if line.startswith(":"):
            self.grammar_seen = True
            return None
        name, colon, value = line.partition(":")
        if name in SSE_FIELDS and colon:
            self.grammar_seen = True
            self._field(name, value[1:] if value.startswith(" ") else value)
            return None
        self._stray(line)
        return None

    def _field(self, name: str, value: str) -> None:
        if name == "data":
            self.data.append(value)
        elif name == "event":
            self.event = value
        elif name == "id" and "\0" not in value:
            self.id = value
        elif name == "retry" and value.isdigit():
            self.retry = int(value)

    def _dispatch(self) -> ServerSentEvent | None:
        if not self.data and not self.event:
            return None
        event = ServerSentEvent(
            event=self.event or "message", data="\n".join(self.data), id=self.id, retry=self.retry
        )
        self.data, self.event = [], ""
        return event

    def _stray(self, line: str) -> None:
        """A line outside the grammar: a bare JSON error is raised; until a line of the
        grammar comes, the rest is kept to say what the body was."""
        payload = _json(line)
        if _is_error(payload):
            raise self._error(payload, in_stream=True)
        if not self.grammar_seen and self.stray_chars < STRAY_KEEP_CHARS:
            self.stray.append(line)
            self.stray_chars += len(line) + 1

    def end(self, last: str) -> ServerSentEvent | None:
        """At the end of the body, whose `last` line had no line break: an event not ended
        by a blank line is dropped, as the grammar says (llm/http.py's `_FeedingStream`
        adds that blank line after a whole last line). A body with no line of the grammar
        that is one JSON object is a whole answer given under another header (the parser
        reads it as the stream's one event, as for `application/json`); any other was no
        event stream."""
        name = last.partition(":")[0]
        if last and not last.startswith(":") and name not in SSE_FIELDS:
            self._stray(last)
        if self.grammar_seen or not self.stray:
            return None
        whole = "\n".join(self.stray)
        payload = _json(whole)
        if isinstance(payload, list) and payload:
            payload = payload[0]  # Gemini's `[{"error": {…}}]`
        if _is_error(payload):
            raise self._error(payload, in_stream=False)
        if isinstance(payload, dict) and self.stray_chars < STRAY_KEEP_CHARS:
            return ServerSentEvent(data=whole)
        # redacted before it is cut: a key cut in two would no longer match
        began = redact(" ".join(whole.split()), self.endpoint.secrets)[:QUOTE_CHARS]
        raise StreamBroken(
            f"{self.endpoint.base_url} did not answer with an event stream "
            f"(its answer began: {began!r})"
        )

    def _error(self, payload: Any, *, in_stream: bool) -> ProviderError:
        """The error a gateway sent as a line of its own, or as the whole body: said once,
        not retried (the same request gets the same answer), whatever status its words
        map to."""
        error = error_from_payload(payload, self.endpoint, self.model, in_stream=in_stream)
        error.retryable = False
        return error


def _json(text: str) -> Any:
    text = text.strip()
    if text[:1] not in ("{", "["):
        return None
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return None


def _is_error(payload: Any) -> bool:
    """Whether a JSON value is an error object: `{"error": …}` (OpenAI's shape, which
    gateways copy) or `{"object": "error", …}` (vLLM's, Mistral's)."""
    return isinstance(payload, dict) and (
        bool(payload.get("error")) or payload.get("object") == "error"
    )
