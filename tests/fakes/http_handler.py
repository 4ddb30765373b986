"""The HTTP side of the fake LLM server: one handler per connection, both wire formats.

`RequestHandler` reads a request, records it through its owner `ScriptedLLMServer`, refuses
what the real API would refuse (auth, missing fields, unknown model), asks the owner for the
matching answer and writes it: JSON, or a chunked SSE stream flushed event by event, with
latency, holds, stalls and faults applied. It must not keep state of its own across
requests or touch the rule list directly. Thread rule: each handler runs on its own daemon
thread and only waits on events the owner sets on `release_all()` / `stop()`.
"""

from __future__ import annotations

import json
import select
import socket
import threading
import time
import uuid
from collections.abc import Mapping
from types import ModuleType
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import urlsplit

from tests.fakes import sse_anthropic, sse_openai
from tests.fakes.loopback import LoopbackHandler, LoopbackHTTPServer
from tests.fakes.recording import Protocol, RecordedRequest
from tests.fakes.script import Answer, Fault, Hold, Latency, Reply
from tests.fakes.wire import (
    Pause,
    ReplyContext,
    StreamPlan,
    apply_fault,
    call_ids,
    estimate_prompt_tokens,
    reply_tokens,
    resolve_usage,
)

if TYPE_CHECKING:
    from tests.fakes.llm_server import ScriptedLLMServer

DEFAULT_MODEL = "fake-model"
PATHS: dict[str, Protocol] = {
    "/v1/chat/completions": "openai",
    "/chat/completions": "openai",
    "/v1/messages": "anthropic",
}
CODECS: dict[str, ModuleType] = {"openai": sse_openai, "anthropic": sse_anthropic}
REQUIRED_FIELDS = {
    "openai": ("model", "messages"),
    "anthropic": ("model", "messages", "max_tokens"),
}
WATCH_INTERVAL_S = 0.02
WaitOutcome = Literal["released", "timeout", "disconnected", "stopped"]


class FakeHTTPServer(LoopbackHTTPServer):
    """The listening socket; one daemon thread per connection, none joined on close."""

    request_queue_size = 128

    def __init__(self, address: tuple[str, int], owner: ScriptedLLMServer) -> None:
        self.owner = owner
        super().__init__(address, RequestHandler)


class RequestHandler(LoopbackHandler):
    """Serves one request per connection (`Connection: close`), then the socket closes."""

    server: FakeHTTPServer

    def setup(self) -> None:
        super().setup()
        self.owner = self.server.owner
        self.owner.track_connection(self.connection, add=True)

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self.owner.track_connection(self.connection, add=False)

    # ----------------------------------------------------------------- plumbing

    def _send_json(
        self,
        request: RecordedRequest | None,
        status: int,
        body: Any,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        data = json.dumps(body).encode()
        if request is not None:
            request.status = status
        try:
            self.send_response(status)
            self._common_headers("application/json")
            self.send_header("Content-Length", str(len(data)))
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)
        except OSError:
            if request is not None:
                self._mark_disconnected(request)

    def _send_raw(self, request: RecordedRequest, fault: Fault) -> None:
        """A `Fault.raw` answer: its status, content type and body exactly."""
        request.status = fault.status
        try:
            self.send_response(fault.status)
            self._common_headers(fault.content_type)
            self.send_header("Content-Length", str(len(fault.body)))
            self.end_headers()
            self.wfile.write(fault.body)
        except OSError:
            self._mark_disconnected(request)

    def _common_headers(self, content_type: str | None) -> None:
        request_id = "req_" + uuid.uuid4().hex[:20]
        if content_type is not None:
            self.send_header("Content-Type", content_type)
        self.send_header("Connection", "close")
        self.send_header("x-request-id", request_id)
        self.send_header("request-id", request_id)

    def _write(self, request: RecordedRequest, data: bytes) -> bool:
        try:
            self.wfile.write(data)
            return True
        except OSError:
            self._mark_disconnected(request)
            return False

    def _mark_disconnected(self, request: RecordedRequest) -> None:
        if not self.owner.stopping.is_set():
            request.disconnected.set()

    def _peer_closed(self, timeout: float) -> bool:
        try:
            readable, _, _ = select.select([self.connection], [], [], timeout)
            if not readable:
                return False
            if self.connection.recv(1, socket.MSG_PEEK) == b"":
                return True
        except (OSError, ValueError):
            return True
        time.sleep(timeout)  # unexpected bytes from the client: not a hang-up
        return False

    def _wait(
        self, request: RecordedRequest, seconds: float | None, event: threading.Event
    ) -> WaitOutcome:
        """Wait for `event`, `seconds`, stop, or the client hanging up, whichever is first."""
        deadline = None if seconds is None else time.monotonic() + seconds
        while True:
            if self.owner.stopping.is_set():
                return "stopped"
            if event.is_set():
                return "released"
            if request.disconnected.is_set():
                return "disconnected"
            step = WATCH_INTERVAL_S
            if deadline is not None:
                step = min(step, deadline - time.monotonic())
                if step <= 0:
                    return "timeout"
            if self._peer_closed(step):
                if self.owner.stopping.is_set():
                    return "stopped"
                request.disconnected.set()
                return "disconnected"

    def _hold(self, request: RecordedRequest, hold: Hold) -> bool:
        hold.enter(request)
        return self._wait(request, None, hold.released) == "released"

    def _pause(self, request: RecordedRequest, seconds: float) -> bool:
        outcome = self._wait(request, seconds, self.owner.stall_event())
        return outcome in ("released", "timeout")

    def _pace(self, latency: Latency, tokens: int, first: bool) -> None:
        delay = latency.delay_for(tokens, first)
        if delay > 0:
            self.owner.sleep(delay)

    # ----------------------------------------------------------------- requests

    def do_GET(self) -> None:
        self.close_connection = True
        if urlsplit(self.path).path != "/v1/models":
            self.owner.note_unknown(f"GET {self.path}")
            self._send_json(None, 404, sse_openai.error_body("Not found", "invalid_request_error"))
            return
        provided = self._provided_key("openai") or self._provided_key("anthropic")
        if self.owner.api_key is not None and provided != self.owner.api_key:
            self._send_json(None, 401, sse_openai.auth_error(provided))
            return
        names = sorted(self.owner.models or {DEFAULT_MODEL})
        data = [{"id": n, "object": "model", "type": "model", "owned_by": "fake"} for n in names]
        self._send_json(None, 200, {"object": "list", "data": data, "has_more": False})

    def do_POST(self) -> None:
        self.close_connection = True
        path = urlsplit(self.path).path
        raw = self.read_body()
        protocol = PATHS.get(path)
        if protocol is None:
            self.owner.note_unknown(f"POST {self.path}")
            self._send_json(
                None, 404, sse_openai.error_body(f"Unknown path {path}", "invalid_request_error")
            )
            return
        try:
            body = json.loads(raw or b"null")
        except ValueError:
            body = None
        headers = {name.lower(): value for name, value in self.headers.items()}
        request = self.owner.record(
            path, protocol, headers, body if isinstance(body, dict) else {}, raw
        )
        try:
            self._serve(request, CODECS[protocol], isinstance(body, dict))
        except Exception as exc:
            self.owner.add_violation(request, f"fake server crashed: {exc!r}")
            if request.status is None:
                self._send_json(request, 500, CODECS[protocol].server_error(repr(exc)))
        finally:
            request.ended_at = time.monotonic()
            request.completed.set()

    def _provided_key(self, protocol: str) -> str | None:
        if protocol == "anthropic":
            return self.headers.get("x-api-key")
        auth = self.headers.get("Authorization") or ""
        return auth[7:].strip() if auth.lower().startswith("bearer ") else None

    def _refusal(self, request: RecordedRequest, codec: ModuleType) -> tuple[int, Any] | None:
        """The error answer for a request the API itself would refuse, or None."""
        owner = self.owner
        provided = self._provided_key(request.protocol)
        if owner.api_key is not None and provided != owner.api_key:
            return 401, codec.auth_error(provided)
        missing = [f for f in REQUIRED_FIELDS[request.protocol] if f not in request.body]
        if missing:
            return 400, codec.bad_request(f"{missing[0]}: Field required")
        if (
            request.protocol == "anthropic"
            and owner.require_anthropic_version
            and "anthropic-version" not in request.headers
        ):
            return 400, codec.bad_request("anthropic-version: header is required")
        if owner.models is not None and request.model not in owner.models:
            return 404, codec.model_not_found(request.model)
        return None

    def _serve(self, request: RecordedRequest, codec: ModuleType, is_json: bool) -> None:
        if is_json:
            refusal = self._refusal(request, codec)
        else:
            refusal = 400, codec.bad_request("The request body is not a JSON object.")
        if refusal is not None:
            self._send_json(request, *refusal)
            return
        answer = self.owner.choose(request)
        if answer is None:
            message = (
                f"fake LLM server: no rule matched request #{request.index} "
                f"(last user text {request.last_user_text[:80]!r})"
            )
            self._send_json(request, 500, codec.server_error(message))
            return
        rule = request.matched_rule
        hold = rule.hold_handle if rule is not None else None
        if hold is not None and not hold.late and not self._hold(request, hold):
            return
        late_hold = hold if hold is not None and hold.late else None
        self._answer(request, codec, answer, late_hold)

    def _answer(
        self, request: RecordedRequest, codec: ModuleType, answer: Answer, hold: Hold | None
    ) -> None:
        fault = answer if isinstance(answer, Fault) else None
        if fault is not None and fault.kind == "raw":
            self._send_raw(request, fault)
            return
        reply = answer if isinstance(answer, Reply) else (answer.reply or Reply.text(""))
        cached = request.cached
        ctx = ReplyContext(
            model=reply.model or request.model or DEFAULT_MODEL,
            prompt_tokens=cached.prompt_tokens if cached else estimate_prompt_tokens(request.raw),
            include_usage=bool((request.body.get("stream_options") or {}).get("include_usage")),
            cached_tokens=cached.cached_tokens if cached else None,
        )
        if fault is not None and fault.kind in (
            "http",
            "rate_limited",
            "usage_limit",
            "context_too_long",
        ):
            status, body = codec.fault_response(fault, ctx)
            headers: dict[str, str] = {}
            if fault.kind == "rate_limited" and fault.retry_after_s is not None:
                seconds = fault.retry_after_s
                headers["Retry-After"] = (
                    str(int(seconds)) if seconds == int(seconds) else str(seconds)
                )
                headers["retry-after-ms"] = str(int(seconds * 1000))
            self._send_json(request, status, body, headers)
            return
        if fault is not None and fault.kind == "stall" and fault.before_headers:
            if not self._pause(request, fault.seconds) or fault.reply is None:
                return
            fault = None
        ids = call_ids(reply, "call_" if request.protocol == "openai" else "toolu_")
        usage = resolve_usage(reply, ctx, reply_tokens(reply))
        latency = reply.latency or self.owner.latency
        if request.stream:
            chunks = codec.stream_chunks(reply, ctx, ids, usage)
            self._stream(request, apply_fault(chunks, fault, codec.MALFORMED), latency, hold)
        else:
            body = json.dumps(codec.completion_body(reply, ctx, ids, usage)).encode()
            self._whole(request, body, fault, latency, hold, reply_tokens(reply))

    def _stream(
        self, request: RecordedRequest, plan: StreamPlan, latency: Latency, hold: Hold | None
    ) -> None:
        request.status = 200
        try:
            self.send_response(200)
            self._common_headers("text/event-stream; charset=utf-8")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
        except OSError:
            self._mark_disconnected(request)
            return
        hold_at = plan.hold_index(None if hold is None else hold.after_call)
        seen_content = False
        for position, step in enumerate(plan.steps):
            if self.owner.stopping.is_set():
                return
            if isinstance(step, Pause):
                if not self._pause(request, step.seconds):
                    return
                continue
            if step.pause_before_s > 0 and not self._pause(request, step.pause_before_s):
                return
            if step.tokens > 0:
                self._pace(latency, step.tokens, first=not seen_content)
                seen_content = True
            if not self._write(request, b"%x\r\n%s\r\n" % (len(step.data), step.data)):
                return
            request.sent_tokens += step.tokens
            if hold is not None and position == hold_at and not self._hold(request, hold):
                return
        if plan.complete:
            self._write(request, b"0\r\n\r\n")

    def _whole(
        self,
        request: RecordedRequest,
        body: bytes,
        fault: Fault | None,
        latency: Latency,
        hold: Hold | None,
        tokens: int,
    ) -> None:
        if (
            fault is not None
            and fault.kind == "stall"
            and (not self._pause(request, fault.seconds) or fault.reply is None)
        ):
            return
        self._pace(latency, tokens, first=True)
        self._pace(latency, tokens, first=False)
        if fault is not None and fault.kind == "malformed_json":
            body = b'{"id": "chatcmpl-broken", "choices": [{'
        request.status = 200
        try:
            self.send_response(200)
            self._common_headers("application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
        except OSError:
            self._mark_disconnected(request)
            return
        if hold is not None and not self._hold(request, hold):
            return
        if fault is not None and fault.kind == "cut_midway":
            body = body[: len(body) // 2]
        if self._write(request, body):
            request.sent_tokens += tokens
