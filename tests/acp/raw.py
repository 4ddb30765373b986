"""`python -m qshell --acp` spoken to in raw JSON-RPC lines, as a client without the SDK.

`RawAgent` starts the agent with pipes, reads its stdout line by line in a thread (every
line must be one JSON object), and answers the requests the agent makes (`session/
request_permission`, …) with a handler the test gives. Notifications are kept in order.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.e2e.helpers import provider_env
from tests.fakes.llm_server import ScriptedLLMServer

WAIT_S = 30.0
Handler = Callable[[str, dict[str, Any]], Any]


def agent_env(server: ScriptedLLMServer) -> dict[str, str]:
    """The environment `qshell --acp` runs in: the test's, on the scripted server."""
    return {**os.environ, "QSHELL_MAX_RETRIES": "0", **provider_env(server, "openai")}


class RawAgent:
    def __init__(self, server: ScriptedLLMServer, project: Path, stderr: Path, *args: str) -> None:
        self._log = stderr.open("ab")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "qshell", "--acp", *args],
            cwd=project,
            env=agent_env(server),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
        )
        self.lines: list[str] = []
        self.notifications: list[dict[str, Any]] = []
        self._inbox: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self._next_id = 0
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            line = raw.decode("utf-8")
            self.lines.append(line)
            self._inbox.put(json.loads(line))  # anything else on stdout fails here
        self._inbox.put(None)

    def send(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write((json.dumps({"jsonrpc": "2.0", **message}) + "\n").encode())
        self.proc.stdin.flush()

    def start(self, method: str, params: dict[str, Any]) -> int:
        """Send a request; its id."""
        self._next_id += 1
        self.send({"id": self._next_id, "method": method, "params": params})
        return self._next_id

    def response(self, request_id: int, handler: Handler | None = None) -> dict[str, Any]:
        """Wait for the answer to `request_id`, answering the agent's own requests with
        `handler(method, params)` and keeping notifications meanwhile."""
        while True:
            message = self._inbox.get(timeout=WAIT_S)
            assert message is not None, "the agent closed stdout"
            if "method" in message and "id" in message:
                assert handler is not None, f"unexpected request {message['method']}"
                result = handler(message["method"], message["params"])
                self.send({"id": message["id"], "result": result})
            elif "method" in message:
                self.notifications.append(message["params"])
            elif message.get("id") == request_id:
                return message

    def request(self, method: str) -> dict[str, Any]:
        """Wait for the agent's own request `method` and leave it unanswered (a slow or
        absent-minded editor), keeping notifications meanwhile."""
        while True:
            message = self._inbox.get(timeout=WAIT_S)
            assert message is not None, "the agent closed stdout"
            if "method" in message and "id" not in message:
                self.notifications.append(message["params"])
            elif message.get("method") == method:
                return message

    def call(self, method: str, params: dict[str, Any], handler: Handler | None = None) -> Any:
        reply = self.response(self.start(method, params), handler)
        assert "result" in reply, reply
        return reply["result"]

    def updates(self, kind: str) -> list[dict[str, Any]]:
        return [n["update"] for n in self.notifications if n["update"]["sessionUpdate"] == kind]

    def notifications_of(self, call_id: str) -> list[dict[str, Any]]:
        """The `tool_call` and `tool_call_update` updates of one call, in order."""
        return [n["update"] for n in self.notifications if n["update"].get("toolCallId") == call_id]

    def close(self) -> int:
        """Close stdin, as an editor does when it is done; the exit code."""
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        code = self.proc.wait(timeout=WAIT_S)
        self._log.close()
        return code
