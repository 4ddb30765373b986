"""Turn time with stream-ahead execution (D4) off and on, over scripted multi-call traces.

Run: `python -m bench.stream_ahead [--runs 6]` (about 25 s per run). Each trace is one
prompt answered in two model rounds by the scripted server over real HTTP: a first
response of ~3 s that asks for four read calls (`read_file`, `grep`), then a short answer
(~0.3 s). The tools are the real ones, each made to cost a fixed extra time (800, 600,
400 and 200 ms, in call order) as a slow disk or a big tree would. Traces:
- `spread` (OpenAI and Anthropic wire): the calls complete at ~1.0, 2.0, 2.5 and 3.0 s of
  the response (the stream is silent while the model "writes" each call's arguments);
- `at-end` (OpenAI wire): the text, ~3 s of silence, then all four calls at the very end,
  as reasoning models send them (the case Qwen Code's stream-ahead RFC, #4387, was closed
  over; the recorded real streams in tests/llm/streams/ all look like this).
Each run times `run_turn` on a fresh session in the default approval mode, once with
`streamAheadTools` off and once on (alternating), from the call to the last event, and
notes when the first tool started. Prints median and p99 of both, the ratio of medians,
and the first tool's start; checks each turn ended with the answer and four results in
call order, and stops with an error otherwise. It asserts no goal.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.stats import report
from qshell.agent.events import TurnFinished
from qshell.agent.loop import run_turn
from qshell.agent.session import Session, SessionOptions
from qshell.cancel import CancelToken
from qshell.config import ApprovalMode
from qshell.llm.anthropic import AnthropicProvider
from qshell.llm.openai import OpenAIProvider
from qshell.permissions.runner import MainToolRunner
from qshell.tools import default_tools
from qshell.tools.base import Tool, ToolContext, ToolResult
from qshell.tools.grep import GrepTool
from qshell.tools.paths import PathResolver
from qshell.tools.read_file import ReadFileTool
from tests.fakes.llm_server import (
    Latency,
    Reply,
    ScriptedLLMServer,
    ToolCallSpec,
    always,
    has_tool_result,
)

PROMPT = "where is the config loaded and who calls it?"
ANSWER = "The config is loaded in `config.py` by `load()`, called from `app.py` and the CLI."
CALLS = (  # (tool, arguments, extra cost in seconds), in call order
    ("read_file", {"path": "config.py"}, 0.8),
    ("grep", {"pattern": "load\\(", "path": "."}, 0.6),
    ("read_file", {"path": "app.py"}, 0.4),
    ("grep", {"pattern": "import config", "path": "."}, 0.2),
)
SPREAD_PAUSES_S = (0.8, 1.0, 0.5, 0.5)  # silence inside each call: complete at ~1, 2, 2.5, 3 s
TTFT_S = 0.2
FAST = 2000.0  # tokens per second where only the pauses should count
LEAD = "Let me look at how the config is loaded before answering."
PROJECT_FILES = {
    "config.py": "import json\n\n\ndef load(path):\n    return json.loads(open(path).read())\n",
    "app.py": "import config\n\nsettings = config.load('settings.json')\n",
    "cli.py": "import config\n\n\ndef main():\n    return config.load('cli.json')\n",
}


class Slow:
    """A real read tool made to cost `costs[key]` seconds more; notes when each run began."""

    def __init__(self, tool: Any, key: str, costs: dict[str, float], starts: list[float]):
        self.tool = tool
        self.key = key
        self.costs = costs
        self.starts = starts
        self.name = tool.name
        self.kind = tool.kind
        self.Args = tool.Args
        self.description = tool.description

    def run(self, args: Any, ctx: ToolContext) -> ToolResult:
        self.starts.append(time.perf_counter())
        ctx.cancel.wait(self.costs.get(str(getattr(args, self.key)), 0.0))
        result: ToolResult = self.tool.run(args, ctx)
        return result

    def accesses(self, args: Any, ctx: ToolContext) -> Any:
        return self.tool.accesses(args, ctx)


def tools(starts: list[float]) -> list[Tool]:
    read_costs = {a["path"]: cost for name, a, cost in CALLS if name == "read_file"}
    grep_costs = {a["pattern"]: cost for name, a, cost in CALLS if name == "grep"}
    slow: dict[str, Any] = {
        "read_file": Slow(ReadFileTool(), "path", read_costs, starts),
        "grep": Slow(GrepTool(), "pattern", grep_costs, starts),
    }
    return [slow.get(tool.name, tool) for tool in default_tools()]


def spread() -> Reply:
    calls = [
        ToolCallSpec(name, arguments, pause_s=pause)
        for (name, arguments, _), pause in zip(CALLS, SPREAD_PAUSES_S, strict=True)
    ]
    return Reply.tool_calls(calls, LEAD, latency=Latency(ttft_s=TTFT_S, tokens_per_s=FAST))


def at_end() -> Reply:
    """The response is silent for ~3 s after its text (the model reasons, or writes the
    calls' arguments unseen), then all four calls arrive at once."""
    pauses = (3.0 - TTFT_S, 0.0, 0.0, 0.0)
    calls = [
        ToolCallSpec(name, arguments, pause_s=pause)
        for (name, arguments, _), pause in zip(CALLS, pauses, strict=True)
    ]
    return Reply.tool_calls(calls, LEAD, latency=Latency(ttft_s=TTFT_S, tokens_per_s=FAST))


@dataclass
class Trace:
    name: str
    protocol: str
    reply: Callable[[], Reply]
    times: dict[bool, list[float]] = field(default_factory=lambda: {False: [], True: []})
    first_start: dict[bool, list[float]] = field(default_factory=lambda: {False: [], True: []})


TRACES = [
    Trace("spread", "openai", spread),
    Trace("spread", "anthropic", spread),
    Trace("at-end", "openai", at_end),
]


def session(server: ScriptedLLMServer, trace: Trace, root: Path, on: bool, starts: list[float]):
    if trace.protocol == "openai":
        provider: Any = OpenAIProvider(server.openai_base_url, server.api_key)
    else:
        provider = AnthropicProvider(server.anthropic_base_url, server.api_key)
    return Session(
        provider=provider,
        model="bench",
        system_prompt="You are a coding agent.",
        tools=tools(starts),
        tool_context=ToolContext(paths=PathResolver(root, home=root)),
        options=SessionOptions(stream_ahead=on),
    )


def one_turn(server: ScriptedLLMServer, trace: Trace, root: Path, on: bool) -> None:
    starts: list[float] = []
    turn = session(server, trace, root, on, starts)
    runner = MainToolRunner(ApprovalMode.DEFAULT, interactive=False)
    start = time.perf_counter()
    events = list(run_turn(turn, PROMPT, runner, CancelToken()))
    elapsed = time.perf_counter() - start
    turn.provider.close()
    last = events[-1]
    results = turn.history[2].tool_results if len(turn.history) > 2 else []
    calls = turn.history[1].tool_calls if len(turn.history) > 1 else []
    if not isinstance(last, TurnFinished) or last.text != ANSWER:
        raise RuntimeError(f"{trace.name}: the turn did not end with the answer: {last!r}")
    if len(results) != len(CALLS) or [r.tool_call_id for r in results] != [c.id for c in calls]:
        raise RuntimeError(f"{trace.name}: the results are not the calls' in call order")
    if any(r.is_error for r in results):
        raise RuntimeError(f"{trace.name}: a tool failed: {[r.content for r in results]}")
    trace.times[on].append(elapsed)
    trace.first_start[on].append(min(starts) - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=6)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="qshell-bench-stream-ahead-"))
    server = ScriptedLLMServer().start()
    try:
        root = (work / "project").resolve()
        root.mkdir()
        for rel, text in PROJECT_FILES.items():
            (root / rel).write_text(text)
        for trace in TRACES:
            server.clear_rules()
            answer = Reply.text(ANSWER, latency=Latency(ttft_s=TTFT_S, tokens_per_s=200))
            server.add_rule(has_tool_result(), answer)
            server.add_rule(always(), trace.reply())
            for run in range(max(args.runs, 1)):
                for on in (run % 2 == 0, run % 2 != 0):  # alternate which goes first
                    one_turn(server, trace, root, on)
    finally:
        server.stop()
        shutil.rmtree(work, ignore_errors=True)
    for violation in server.violations:
        print(f"server violation: {violation}")
    costs = ", ".join(f"{cost * 1000:.0f}" for _, _, cost in CALLS)
    print(f"4 read calls a turn (extra cost {costs} ms), then a ~0.3 s answer round")
    for trace in TRACES:
        times_off, times_on = trace.times[False], trace.times[True]
        label = f"{trace.name} ({trace.protocol})"
        print(report(f"{label}, streamAheadTools off: turn", times_off))
        print(report(f"{label}, streamAheadTools on:  turn", times_on))
        first = {k: statistics.median(v) for k, v in trace.first_start.items()}
        print(
            f"{label}: on / off (medians) {statistics.median(times_on) / statistics.median(times_off):.3f}, "
            f"saved {(statistics.median(times_off) - statistics.median(times_on)) * 1000:.0f} ms; "
            f"first tool started at {first[False]:.2f} s off, {first[True]:.2f} s on"
        )


if __name__ == "__main__":
    main()
