"""A scripted LLM HTTP server on 127.0.0.1 speaking the OpenAI and Anthropic wire formats.

Tests and benchmarks start it, add `Rule`s that match request *content* (not arrival
order) and answer with a `Reply` or a `Fault`; every request is recorded and checked for
tool-call / tool-result pairing; with `prompt_cache=True` it also models a provider's
prompt cache (`prompt_cache.py`) and reports its hits as `cached_tokens`. It must never
reach beyond the loopback interface or depend on wall-clock timing in its defaults
(latency is opt-in and the sleep injectable).
Thread rule: one daemon thread per connection; rules, records and violations are guarded
by one lock; holds and stalls wait on events that `release_all()` and `stop()` always set,
so `stop()` never hangs.
"""

from __future__ import annotations

import argparse
import contextlib
import signal
import socket
import sys
import threading
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from tests.fakes.http_handler import FakeHTTPServer
from tests.fakes.loopback import HOST, LoopbackServer
from tests.fakes.matchers import (
    Match,
    all_of,
    always,
    any_of,
    any_text_contains,
    has_tool_result,
    last_user_text_contains,
    model_is,
    protocol_is,
    system_contains,
)
from tests.fakes.prompt_cache import PromptCache
from tests.fakes.recording import Protocol, RecordedRequest, pairing_problems, parse_conversation
from tests.fakes.script import Answer, Fault, Hold, Latency, Reply, Rule, ToolCallSpec, Usage
from tests.fakes.script_loader import load_script

__all__ = [
    "TEST_API_KEY",
    "Fault",
    "Hold",
    "Latency",
    "Match",
    "RecordedRequest",
    "Reply",
    "Rule",
    "ScriptedLLMServer",
    "ToolCallSpec",
    "Usage",
    "all_of",
    "always",
    "any_of",
    "any_text_contains",
    "has_tool_result",
    "last_user_text_contains",
    "load_script",
    "model_is",
    "protocol_is",
    "system_contains",
]

TEST_API_KEY = "sk-test-SECRET-123456"


class ScriptedLLMServer(LoopbackServer):
    """The fake server. Rules are tried in insertion order; the first non-exhausted match
    answers. No match → HTTP 500 and the request is recorded with `unmatched=True`."""

    def __init__(
        self,
        api_key: str | None = None,
        models: Iterable[str] | None = None,
        latency: Latency | None = None,
        *,
        port: int = 0,
        sleep: Callable[[float], None] | None = None,
        require_anthropic_version: bool = True,
        prompt_cache: bool = False,
    ) -> None:
        self.api_key = api_key
        # a modelled provider prompt cache: usage then reports `cached_tokens` from it
        self.prompt_cache = PromptCache() if prompt_cache else None
        self.models: set[str] | None = set(models) if models is not None else None
        self.latency = latency or Latency()
        self.require_anthropic_version = require_anthropic_version
        self.violations: list[str] = []
        self.unknown_requests: list[str] = []
        self._port = port
        self._sleep = sleep
        self._lock = threading.Condition()
        self._rules: list[Rule] = []
        self._requests: list[RecordedRequest] = []
        self._connections: set[socket.socket] = set()
        self.stopping = threading.Event()
        self._stall_release = threading.Event()

    # ----------------------------------------------------------------- lifecycle

    thread_name = "fake-llm"

    def _listener(self) -> FakeHTTPServer:
        return FakeHTTPServer((HOST, self._port), self)

    def stop(self) -> None:
        """Release every hold and stall, cut open connections, close the listener."""
        if self.stopping.is_set():
            return
        self.stopping.set()
        self.release_all()
        with self._lock:
            connections = list(self._connections)
        for connection in connections:
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)
        self._close_listener()

    @property
    def openai_base_url(self) -> str:
        return self.url + "/v1"

    @property
    def anthropic_base_url(self) -> str:
        return self.url

    def sleep(self, seconds: float) -> None:
        """The pacing sleep: the injected one, else a wait that `stop()` interrupts."""
        if self._sleep is not None:
            self._sleep(seconds)
        else:
            self.stopping.wait(seconds)

    # ----------------------------------------------------------------- scripting

    def add_rule(
        self,
        rule: Rule | Callable[[RecordedRequest], bool],
        reply: Answer | None = None,
        *,
        first: bool = False,
        **options: Any,
    ) -> Rule:
        """Add a rule (a `Rule`, or `match, reply, **Rule options`); `first` puts it ahead."""
        if not isinstance(rule, Rule):
            rule = Rule(match=rule, reply=reply, **options)
        elif reply is not None or options:
            raise TypeError("pass either a Rule or match/reply/options, not both")
        with self._lock:
            self._rules.insert(0 if first else len(self._rules), rule)
        return rule

    def add_rules(self, rules: Iterable[Rule]) -> list[Rule]:
        return [self.add_rule(rule) for rule in rules]

    def load_script(self, source: str | Path | Mapping[str, Any]) -> list[Rule]:
        return self.add_rules(load_script(source))

    def hold(
        self, rule: Rule, *, after_first_chunk: bool = False, after_call: int | None = None
    ) -> Hold:
        """Attach a new Hold to `rule` (adding the rule if it is not added yet)."""
        handle = Hold(after_first_chunk=after_first_chunk, after_call=after_call)
        with self._lock:
            rule.hold = handle
            if rule not in self._rules:
                self._rules.append(rule)
        return handle

    def release_all(self) -> None:
        """Release every hold (permanently) and every stall in progress."""
        with self._lock:
            holds = [r.hold_handle for r in self._rules if r.hold_handle is not None]
            stall, self._stall_release = self._stall_release, threading.Event()
        for handle in holds:
            handle.release()
        stall.set()

    def clear_rules(self) -> None:
        with self._lock:
            self._rules.clear()

    @property
    def rules(self) -> list[Rule]:
        with self._lock:
            return list(self._rules)

    # ----------------------------------------------------------------- records

    @property
    def requests(self) -> list[RecordedRequest]:
        with self._lock:
            return list(self._requests)

    def requests_for(self, protocol: Protocol) -> list[RecordedRequest]:
        return [r for r in self.requests if r.protocol == protocol]

    def wait_for_requests(self, n: int, timeout: float = 5.0) -> list[RecordedRequest]:
        """Wait until at least `n` requests arrived; TimeoutError otherwise."""
        with self._lock:
            if not self._lock.wait_for(lambda: len(self._requests) >= n, timeout):
                raise TimeoutError(f"{len(self._requests)} of {n} requests after {timeout} s")
            return list(self._requests)

    # ----------------------------------------------------------------- handler side

    def track_connection(self, connection: socket.socket, add: bool) -> None:
        with self._lock:
            if add:
                self._connections.add(connection)
            else:
                self._connections.discard(connection)

    def note_unknown(self, what: str) -> None:
        with self._lock:
            self.unknown_requests.append(what)

    def add_violation(self, request: RecordedRequest, problem: str) -> None:
        with self._lock:
            self.violations.append(f"request #{request.index} ({request.protocol}): {problem}")

    def stall_event(self) -> threading.Event:
        with self._lock:
            return self._stall_release

    def record(
        self,
        path: str,
        protocol: Protocol,
        headers: dict[str, str],
        body: dict[str, Any],
        raw: bytes,
    ) -> RecordedRequest:
        request = RecordedRequest(path, protocol, headers, body, raw)
        if self.prompt_cache is not None:
            request.cached = self.prompt_cache.admit(protocol, body)
        _, turns, shape = parse_conversation(protocol, body)
        problems = shape + pairing_problems(protocol, turns)
        with self._lock:
            request.index = len(self._requests)
            self._requests.append(request)
            self._lock.notify_all()
        for problem in problems:
            self.add_violation(request, problem)
        return request

    def choose(self, request: RecordedRequest) -> Answer | None:
        """First non-exhausted rule, in insertion order, whose predicate holds."""
        failures = []
        answer: Answer | None = None
        with self._lock:
            for rule in self._rules:
                if rule.exhausted:
                    continue
                try:
                    matched = rule.match(request)
                except Exception as exc:
                    failures.append(f"rule {rule!r} raised {exc!r}")
                    continue
                if matched:
                    answer = rule.consume(request)
                    request.matched_rule, request.answer = rule, answer
                    break
            else:
                request.unmatched = True
        for failure in failures:
            self.add_violation(request, failure)
        return answer


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.fakes.llm_server")
    parser.add_argument("--script", required=True, help="JSON script file")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--api-key", default=None)
    parser.add_argument("--models", default=None, help="comma-separated model names")
    parser.add_argument("--ttft", type=float, default=0.0, help="seconds to first token")
    parser.add_argument("--tps", type=float, default=None, help="tokens per second")
    args = parser.parse_args(argv)
    server = ScriptedLLMServer(
        api_key=args.api_key,
        models=args.models.split(",") if args.models else None,
        latency=Latency(ttft_s=args.ttft, tokens_per_s=args.tps),
        port=args.port,
    )
    server.load_script(args.script)
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    server.start()
    print(f"listening on {server.url}", flush=True)
    try:
        while not done.wait(0.5):
            pass
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
    for violation in server.violations:
        print(f"violation: {violation}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
