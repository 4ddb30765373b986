"""`initialize` answered before qshell loads (handshake.py) is the answer the SDK gives.

The differential: the SDK's own answer — `QshellAgent.initialize` dumped the way the SDK's
connection dumps a result — and the early one, byte for byte once parsed; a client that
sends `initialize` and `session/new` in one write gets both answered, in order, with the
file capabilities it declared honoured; a first message that is not a well-formed
`initialize` is left to the SDK, which answers it as before.
"""

from __future__ import annotations

import asyncio
import io
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.acp.sdk import NO_SDK, SDK

pytest.importorskip(SDK, reason=NO_SDK)

from qshell.acp import handshake
from qshell.acp.server import QshellAgent
from tests.e2e.helpers import provider_env

PARAMS: dict[str, Any] = {
    "protocolVersion": 1,
    "clientCapabilities": {"fs": {"readTextFile": True}},
}
INITIALIZE: dict[str, Any] = {
    "jsonrpc": "2.0",
    "id": 0,
    "method": "initialize",
    "params": PARAMS,
}


def sdk_answer(params: dict[str, Any]) -> dict[str, Any]:
    """What the SDK sends for `initialize` with `params`, as parsed JSON."""
    agent = QshellAgent(lambda *a, **k: None)  # type: ignore[arg-type]
    response = asyncio.run(agent.initialize(protocol_version=int(params["protocolVersion"])))
    return response.model_dump(mode="json", by_alias=True, exclude_none=True, exclude_unset=True)


def test_the_early_answer_is_the_sdks():
    handshake._early = None
    out = io.BytesIO()
    early = handshake.answer_early(io.BytesIO(json.dumps(INITIALIZE).encode() + b"\n"), out)
    sent = json.loads(out.getvalue())
    assert sent == {"jsonrpc": "2.0", "id": 0, "result": sdk_answer(PARAMS)}
    assert early.params == PARAMS and early.rest == b""
    handshake._early = None


def test_anything_but_a_well_formed_initialize_is_left_whole_for_the_sdk():
    for line in (
        b'{"jsonrpc":"2.0","id":1,"method":"session/new","params":{}}\n',
        b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"one"}}\n',
        b"not json\n",
        b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}',  # no end
    ):
        handshake._early = None
        out = io.BytesIO()
        early = handshake.answer_early(io.BytesIO(line + b'{"next": 1}\n'), out)
        assert out.getvalue() == b"" and early.params is None and early.rest.startswith(line)
    handshake._early = None


def run_acp(project: Path, env: dict[str, str], sent: bytes, answers: int) -> list[dict[str, Any]]:
    """Send `sent` to a real `qshell --acp` in one write and parse its first `answers` lines."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "qshell", "--acp"],
        cwd=project,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    assert proc.stdin is not None and proc.stdout is not None
    try:
        proc.stdin.write(sent)
        proc.stdin.flush()
        return [json.loads(proc.stdout.readline()) for _ in range(answers)]
    finally:
        proc.kill()
        proc.wait()


def test_initialize_then_a_session_in_one_write_are_both_answered_in_order(
    llm_server, tmp_path: Path
):
    project = tmp_path / "proj"
    project.mkdir()
    new = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "session/new",
        "params": {"cwd": str(project), "mcpServers": []},
    }
    bad = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": "x"}}
    env = provider_env(llm_server, "openai")
    lines = (json.dumps(INITIALIZE) + "\n" + json.dumps(new) + "\n").encode()
    answers = run_acp(project, env, lines, 2)
    assert [a["id"] for a in answers] == [0, 1]
    assert answers[0]["result"] == sdk_answer(PARAMS)
    assert "sessionId" in answers[1]["result"]
    left = run_acp(project, env, (json.dumps(bad) + "\n").encode(), 1)
    assert left[0]["id"] == 0 and ("result" in left[0] or "error" in left[0])  # the SDK's say
