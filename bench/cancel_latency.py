"""Cancel-to-stop latency of a running turn, measured against the scripted LLM server.

Run: `python -m bench.cancel_latency [--runs 30]`. Two scenarios, each repeated:
- streaming: the model is mid-answer (a stream paced at 20 tokens/s); another thread
  cancels 200 ms after the first text delta, while the loop is blocked reading. The
  server-side figure includes the fake server's own detection delay (it notices a closed
  client at its next write, one token later), so it is an upper bound. Measured: cancel() → the loop's generator has ended (TurnFailed
  cancelled), and cancel() → the server has seen the client disconnect.
- shell: the model ran `shell` with `sleep 30`; cancel 200 ms after the tool started.
  Measured: cancel() → the loop has ended (the process group is killed).
Prints median and p99 for each. Goal: ≤ 100 ms.
"""

from __future__ import annotations

import argparse
import tempfile
import threading
import time
from pathlib import Path

from bench.stats import report
from qshell.agent.events import TextDelta, ToolStarted, TurnFailed
from qshell.agent.loop import run_turn
from qshell.agent.session import Session
from qshell.cancel import CancelToken
from qshell.config import ApprovalMode
from qshell.llm.openai import OpenAIProvider
from qshell.permissions.runner import MainToolRunner
from qshell.tools import default_tools
from qshell.tools.base import ToolContext
from qshell.tools.paths import PathResolver
from tests.fakes.llm_server import (
    Latency,
    Reply,
    ScriptedLLMServer,
    ToolCallSpec,
    always,
    has_tool_result,
    last_user_text_contains,
)

CANCEL_DELAY_S = 0.2


def make_session(provider: OpenAIProvider, root: Path) -> Session:
    return Session(
        provider=provider,
        model="bench",
        system_prompt="bench",
        tools=default_tools(),
        tool_context=ToolContext(paths=PathResolver(root, home=root)),
    )


def one_run(
    provider: OpenAIProvider, server: ScriptedLLMServer, root: Path, prompt: str, trigger: type
) -> tuple[float, float | None]:
    """Cancel CANCEL_DELAY_S after the trigger event, while the loop is blocked in work."""
    session = make_session(provider, root)
    cancel = CancelToken()
    runner = MainToolRunner(ApprovalMode.YOLO, interactive=False)
    before = len(server.requests)
    cancelled_at: list[float] = []

    def cancel_later() -> None:
        time.sleep(CANCEL_DELAY_S)
        cancelled_at.append(time.perf_counter())
        cancel.cancel()

    canceller = threading.Thread(target=cancel_later)
    for event in run_turn(session, prompt, runner, cancel):
        if isinstance(event, trigger) and not canceller.is_alive() and not cancelled_at:
            canceller.start()
        if isinstance(event, TurnFailed):
            break
    ended = time.perf_counter()
    canceller.join()
    stopped = ended - cancelled_at[0]
    request = server.requests[before] if len(server.requests) > before else None
    disconnect = None
    if request is not None and trigger is TextDelta and request.disconnected.wait(5):
        disconnect = time.perf_counter() - cancelled_at[0]
    return stopped, disconnect


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=30)
    args = parser.parse_args()
    server = ScriptedLLMServer(latency=Latency(ttft_s=0.01, tokens_per_s=20)).start()
    server.add_rule(has_tool_result(), Reply.text("done"))
    server.add_rule(
        last_user_text_contains("shell"),
        Reply.tool_calls([ToolCallSpec("shell", {"command": "sleep 30"}, id="s1")]),
    )
    server.add_rule(always(), Reply.text("word " * 200))
    provider = OpenAIProvider(server.openai_base_url, None)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        stream_stop, stream_disconnect, shell_stop = [], [], []
        for _ in range(args.runs):
            stopped, disconnect = one_run(provider, server, root, "stream please", TextDelta)
            stream_stop.append(stopped)
            if disconnect is not None:
                stream_disconnect.append(disconnect)
            stopped, _ = one_run(provider, server, root, "run shell", ToolStarted)
            shell_stop.append(stopped)
    server.stop()
    print(report("streaming: cancel -> loop ended", stream_stop))
    print(report("streaming: cancel -> server saw disconnect", stream_disconnect))
    print(report("shell tool: cancel -> loop ended (process group killed)", shell_stop))


if __name__ == "__main__":
    main()
