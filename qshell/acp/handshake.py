"""ACP's `initialize`, answered before the rest of qshell and the SDK load.

An editor starts `qshell --acp` and sends `initialize` at once; the SDK's schema module
alone takes a third of a second to import, and qshell's settings, plugins and agent loop as
long again. Nothing of the answer depends on them: the protocol version qshell speaks and
its capabilities are fixed. So right after cli.py claims the JSON pipes (streams.py),
`answer_early` reads the client's first message; when it is a well-formed `initialize`
request, it writes the answer the SDK would write for `QshellAgent.initialize` (the same
JSON, compact, one line: tests/acp/test_handshake.py compares the two) and keeps the
client's capabilities for the agent (`Early.params`); anything else is handed whole to the
SDK's reader before it listens (`Early.rest`, server.py). The first line is read a byte at
a time, so nothing past it is taken from the pipe: what the client sends next reaches the
SDK in order. It must not import the SDK. Main thread, once per process.
"""

from __future__ import annotations

import importlib.util
import json
from dataclasses import dataclass
from typing import IO, Any

from qshell import __version__

PROTOCOL_VERSION = 1  # the one qshell speaks, whatever the client asks for
MAX_FIRST_LINE = 1 << 20  # a first message longer than this is left to the SDK


@dataclass(frozen=True, slots=True)
class Early:
    """What `answer_early` did: the `initialize` params it answered (None: it answered
    nothing, and `rest` is the message it read, for the SDK)."""

    params: dict[str, Any] | None
    rest: bytes


_early: Early | None = None


def initialize_result() -> dict[str, Any]:
    """The `result` of qshell's answer to `initialize`, as JSON."""
    return {
        "protocolVersion": PROTOCOL_VERSION,
        "agentCapabilities": {
            "loadSession": True,
            "promptCapabilities": {"image": False, "audio": False, "embeddedContext": True},
            "mcpCapabilities": {"http": False, "sse": False},
        },
        "authMethods": [],
        "agentInfo": {"name": "qshell", "title": "qshell", "version": __version__},
    }


def answer_early(incoming: IO[bytes], outgoing: IO[bytes]) -> Early:
    """Read the client's first message from `incoming`; answer it on `outgoing` when it is
    `initialize` (and the SDK is there to serve the rest)."""
    global _early
    if _early is not None:
        return _early
    line = _first_line(incoming)
    request = _initialize_request(line) if line.endswith(b"\n") else None
    if request is None or importlib.util.find_spec("acp") is None:
        _early = Early(None, line)
        return _early
    answer = {"jsonrpc": "2.0", "id": request["id"], "result": initialize_result()}
    outgoing.write((json.dumps(answer, separators=(",", ":")) + "\n").encode("utf-8"))
    outgoing.flush()
    _early = Early(request.get("params") or {}, b"")
    return _early


def taken() -> Early:
    """What `answer_early` did, or an Early that answered and read nothing when it did not run."""
    return _early or Early(None, b"")


def _first_line(incoming: IO[bytes]) -> bytes:
    """Bytes from `incoming` up to and including the first newline, or all there was when
    the client closed it first or sent too much (a byte at a time: an `initialize` line is
    a few hundred, and nothing after it is taken)."""
    read = bytearray()
    while len(read) < MAX_FIRST_LINE:
        byte = incoming.read(1)
        if not byte:
            break
        read += byte
        if byte == b"\n":
            break
    return bytes(read)


def _initialize_request(line: bytes) -> dict[str, Any] | None:
    """The message in `line` when it is an `initialize` request whose params the SDK would
    take (a protocol version, capabilities as an object); None otherwise."""
    try:
        message = json.loads(line)
    except ValueError:
        return None
    if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
        return None
    if message.get("method") != "initialize" or type(message.get("id")) not in (int, str):
        return None
    params = message.get("params")
    if not isinstance(params, dict) or type(params.get("protocolVersion")) is not int:
        return None
    capabilities = params.get("clientCapabilities", {})
    return message if isinstance(capabilities, dict) else None
