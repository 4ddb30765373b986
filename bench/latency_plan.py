"""Seed 004 §1.2's "which workspaces do I have" turn, with D1, D3 and D4 off and on.

Run: `python -m bench.latency_plan [--runs 5] [--scale 1.0]` (about 50 s a run; `--scale`
multiplies every step's time, for a quick check). The scripted server (tests/fakes, OpenAI
wire format, over real HTTP) plays the seed's three rounds, each paced to its measured
length — 0.6 s to the first token, the rest of the reply spread over the time left:
round 1 (3.8 s) says a sentence and calls `workspaces`, a query "skill": a read tool of the
bench plugin bench/workspaces_plugin.py, loaded as `--plugin` loads it, that lists the
project's `workspaces.txt` (about 1 ms) and marks its result `skip_llm_round` and
`result_is_terminal`; round 2 (3.0 s) calls the built-in `shell` tool with
`cat workspaces.status`, a command the shell proof passes as read-only and the shell tool
marks terminal (a plain `cat`); round 3 (3.8 s) is the Markdown summary. The 2.5 s of the
seed's shell step are real: `workspaces.status` is a named pipe that a bench thread, the
"workspace service", answers 2.5 s after `cat` opens it, so the command runs through the
real proof, sandbox and shell tool and simply waits for its input, as a query against a
slow service does (a `sleep` would not be terminal, and no honest `git log` takes 2.5 s).
Each configuration is a fresh REPL conversation (`compose.open_interactive`; suggestions
and speculation off) over the real settings (set as a user sets them, through QSHELL_*
variables), tools, transcript and plugin host, in one shared project; it first answers a
one-line warm-up turn (no latency), then the measured prompt, driven by the real driver
into a RichRenderer on an io.StringIO (force_terminal, width 100). The five configurations
run side by side in ONE run, interleaved: all off (the skill not in
`toolPostExecAllowlist`, `summarizeInBackground` off, `streamAheadTools` off), D1 on (the
skill allowlisted), D3 on (`summarizeInBackground`), D4 on (`streamAheadTools`), all on.
With D1 the skill's list is the turn's answer, so rounds 2 and 3 never run. Measured with
`time.perf_counter` from the call of `Conversation.turn` on the front-end's thread: "turn"
is when the renderer received the TurnFinished (the loop's last event); "can type" is
when the renderer received a SummaryStarted that no tool call followed (D3: the REPL
gives the prompt back there, and takes it away again at a tool call), else when `drive` returned (the REPL's prompt comes back
after that). Prints median and p99 of both over `--runs`, where the time went (the model
streams as the server timed them, the tools, the rest), when each round ended, and the
goal line (can type < 5 s with all on, vs the seed's 13.4 s). It asserts nothing about
time; it stops with an error when a turn does not end with the expected answer or makes
an unexpected number of model requests.
"""

from __future__ import annotations

import argparse
import io
import os
import shutil
import statistics
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import astuple, dataclass, field
from pathlib import Path

from bench import workspaces_plugin
from bench.scripted import after_call, asks, paced
from bench.stats import percentile
from qshell import compose, sessions
from qshell.agent.conversation import Conversation
from qshell.agent.events import (
    Event,
    PermissionAnswer,
    PermissionReply,
    PermissionRequested,
    RoundFinished,
    SummaryStarted,
    ToolFinished,
    ToolStarted,
    TurnFailed,
    TurnFinished,
)
from qshell.agent.session import Session, SessionRequest
from qshell.config import load_settings
from qshell.plugins import PluginHost, PluginRequest
from qshell.ui.driver import drive
from qshell.ui.render_rich import RichRenderer
from tests.fakes.llm_server import Latency, Reply, ScriptedLLMServer, ToolCallSpec

PROMPT = "which workspaces do I have"
WARM_PROMPT = "warm up: say ok"


@dataclass(frozen=True)
class Timing:
    """How long each step of the scenario takes; `--scale` shrinks them all alike."""

    ttft_s: float = 0.6
    round1_s: float = 3.8  # seed 004 §1.2
    round2_s: float = 3.0
    summary_s: float = 3.8
    service_s: float = 2.5  # the shell step

    def scaled(self, factor: float) -> Timing:
        return Timing(*(factor * value for value in astuple(self)))


SEED_TOTAL_S = 13.4
GOAL_S = 5.0
WORKSPACES = ("api-gateway", "billing", "data-lake")
STATUS_PIPE = "workspaces.status"
SHELL_COMMAND = f"cat {STATUS_PIPE}"
STATUS = "\n".join(f"{name}\tactive\t{3 + i} members" for i, name in enumerate(WORKSPACES))
SUMMARY_MARK = "You have three workspaces"
SUMMARY = f"""{SUMMARY_MARK}, all of them active:

| workspace | members |
|-----------|---------|
| `api-gateway` | 3 |
| `billing` | 4 |
| `data-lake` | 5 |

`data-lake` has the most members. Say `switch to billing` to make one the current one,
or ask for a workspace's details to see its projects and its last activity.
"""
PADDING = "I will look this up for you before answering."
TURN_WAIT_S = 60.0


@dataclass(frozen=True)
class Config:
    name: str
    d1: bool
    d3: bool
    d4: bool

    def environ(self) -> dict[str, str]:
        """The settings of this configuration, as QSHELL_* variables."""
        allowlist = f'["{workspaces_plugin.TOOL_NAME}"]' if self.d1 else "[]"
        return {
            "QSHELL_TOOL_POST_EXEC_ALLOWLIST": allowlist,
            "QSHELL_SUMMARIZE_IN_BACKGROUND": "true" if self.d3 else "false",
            "QSHELL_STREAM_AHEAD_TOOLS": "true" if self.d4 else "false",
        }


CONFIGS = (
    Config("all off", d1=False, d3=False, d4=False),
    Config("D1 on", d1=True, d3=False, d4=False),
    Config("D3 on", d1=False, d3=True, d4=False),
    Config("D4 on", d1=False, d3=False, d4=True),
    Config("all on", d1=True, d3=True, d4=True),
)


def tool_round(text: str, call: ToolCallSpec, ttft_s: float, total_s: float) -> Reply:
    padded = " ".join([text, *[PADDING] * 3])
    return paced(Reply.tool_calls([call], padded), ttft_s=ttft_s, total_s=total_s)


def script(server: ScriptedLLMServer, timing: Timing) -> None:
    skill = ToolCallSpec(workspaces_plugin.TOOL_NAME, {}, id="skill1")
    shell = ToolCallSpec("shell", {"command": SHELL_COMMAND}, id="shell1")
    server.add_rule(asks(WARM_PROMPT), Reply.text("ok", latency=Latency()))
    server.add_rule(
        after_call("shell1"),
        paced(Reply.text(SUMMARY), ttft_s=timing.ttft_s, total_s=timing.summary_s),
    )
    server.add_rule(
        after_call("skill1"), tool_round("Now their status.", shell, timing.ttft_s, timing.round2_s)
    )
    server.add_rule(
        asks(PROMPT),
        tool_round("Let me ask the workspace skill.", skill, timing.ttft_s, timing.round1_s),
    )


class WorkspaceService:
    """Answers each reader of the named pipe `delay_s` after it opened it, on a daemon thread.

    Once a reader has opened the pipe, the pipe is replaced by a new one, so that reader
    gets EOF when the answer is written and the next command meets a pipe of its own."""

    def __init__(self, pipe: Path, delay_s: float) -> None:
        self.pipe = pipe
        self.delay_s = delay_s
        os.mkfifo(pipe)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="workspace-service", daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while True:
            fd = os.open(self.pipe, os.O_WRONLY)  # blocks until a reader opens the pipe
            try:
                if self._stop.is_set():
                    return
                os.unlink(self.pipe)
                os.mkfifo(self.pipe)
                time.sleep(self.delay_s)
                os.write(fd, (STATUS + "\n").encode())
            except BrokenPipeError:
                pass  # the reader went away (a cancelled command)
            finally:
                os.close(fd)

    def stop(self) -> None:
        self._stop.set()
        reader = os.open(self.pipe, os.O_RDONLY | os.O_NONBLOCK)  # lets a blocked open return
        self._thread.join(5.0)
        os.close(reader)


class ClockedRenderer:
    """A RichRenderer on a string buffer that notes when each event reached it."""

    def __init__(self, start: float) -> None:
        self.start = start
        self.inner = RichRenderer(file=io.StringIO(), force_terminal=True, width=100, environ={})
        self.seen: list[tuple[float, Event]] = []

    def event(self, event: Event) -> None:
        self.seen.append((time.perf_counter() - self.start, event))
        self.inner.event(event)

    def permission(self, request: PermissionRequested) -> None:
        self.inner.permission(request)

    def notice(self, text: str) -> None:
        self.inner.notice(text)

    def say(self, text: str) -> None:
        self.inner.say(text)

    def error(self, text: str) -> None:
        self.inner.error(text)

    def waiting(self, elapsed_s: float) -> None:
        self.inner.waiting(elapsed_s)

    def end_turn(self) -> None:
        self.inner.end_turn()

    def expand(self) -> None:
        self.inner.expand()

    def first(self, kind: type) -> float | None:
        return next((at for at, event in self.seen if isinstance(event, kind)), None)


def allow(request: PermissionRequested) -> PermissionReply:
    """Never expected (read-only tools); answered so a surprise cannot hang the run."""
    return PermissionReply(PermissionAnswer.ALLOW_ONCE)


@dataclass
class Sample:
    turn_s: float
    type_s: float
    steps: dict[str, float] = field(default_factory=dict)  # step -> when it ended
    streams_s: float = 0.0  # the model requests, as the server timed them
    tools_s: float = 0.0

    @property
    def overhead_s(self) -> float:
        """What the turn took beyond the model's streams and the tools: qshell's share."""
        return self.turn_s - self.streams_s - self.tools_s


def steps_of(seen: list[tuple[float, Event]]) -> dict[str, float]:
    """When each round and tool of the turn ended (tools also: how long they ran)."""
    names: dict[str, str] = {}
    started: dict[str, float] = {}
    steps: dict[str, float] = {}
    for at, event in seen:
        if isinstance(event, RoundFinished):
            steps[f"round {event.round} ends"] = at
        elif isinstance(event, ToolStarted):
            names[event.call_id], started[event.call_id] = event.name, at
        elif isinstance(event, ToolFinished) and event.call_id in started:
            steps[f"{names[event.call_id]} runs"] = at - started[event.call_id]
            steps["tools"] = steps.get("tools", 0.0) + at - started[event.call_id]
        elif isinstance(event, SummaryStarted):
            steps.setdefault("summary starts", at)
    return steps


def idle_at(seen: list[tuple[float, Event]]) -> float | None:
    """When the REPL gave the prompt back for good: a SummaryStarted that no tool call
    followed (one that did took the prompt away again, as the REPL does)."""
    idle: float | None = None
    for at, event in seen:
        if isinstance(event, SummaryStarted) and idle is None:
            idle = at
        elif isinstance(event, ToolStarted):
            idle = None
    return idle


@dataclass
class Bench:
    server: ScriptedLLMServer
    work: Path
    root: Path
    plugin: Path

    def conversation(self, config: Config) -> Conversation:
        """A fresh conversation of `config`, after the warm-up turn."""
        home = Path(tempfile.mkdtemp(prefix="home-", dir=self.work))
        environ = {
            "HOME": str(home),
            "QSHELL_HOME": str(home / "qshell"),
            "TMPDIR": str(self.work / "tmp"),
            "QSHELL_MAX_RETRIES": "0",
            "QSHELL_PLUGINS": "",
            "QSHELL_SUGGESTIONS": "0",
            "QSHELL_SPECULATION": "0",
            "OPENAI_BASE_URL": self.server.openai_base_url,
            "OPENAI_API_KEY": "bench",
            "OPENAI_MODEL": "m1",
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            **{
                f"XDG_{n}_HOME": str(home / n.lower()) for n in ("CONFIG", "STATE", "CACHE", "DATA")
            },
            **config.environ(),
        }
        settings = load_settings(project_root=self.root, environ=environ)
        plugins: PluginHost = compose.open_plugins(
            settings,
            PluginRequest(files=(self.plugin,), discover=False),
            root=self.root,
            environ=environ,
        )

        def open_session(request: SessionRequest) -> Session:
            return sessions.open_session(
                settings, request, root=self.root, environ=environ, plugins=plugins
            )

        # the REPL's conversation (its session may summarize in background, D3); no
        # suggestions or speculation, as in the seed's measurement
        interactive = compose.open_interactive(
            settings, SessionRequest(), open_session=open_session, environ=environ
        )
        conversation = interactive.conversation
        warm = drive(
            conversation.turn(WARM_PROMPT), ClockedRenderer(0.0), allow, conversation.cancel_token
        )
        if not isinstance(warm, TurnFinished):
            raise RuntimeError(f"the warm-up turn did not finish: {warm!r}")
        return conversation

    def sample(self, config: Config) -> Sample:
        conversation = self.conversation(config)
        try:
            requests = len(self.server.requests)
            finished = threading.Event()
            start = time.perf_counter()
            renderer = ClockedRenderer(start)
            last = drive(
                tracked(conversation.turn(PROMPT), finished),
                renderer,
                allow,
                conversation.cancel_token,
            )
            returned = time.perf_counter() - start
            if not finished.wait(TURN_WAIT_S):
                raise RuntimeError(f"{config.name}: the turn did not end")
        finally:
            conversation.close()
        made = self.server.requests[requests:]
        check(config, last, renderer, len(made))
        summary = idle_at(renderer.seen)
        ended = renderer.first(TurnFinished)
        steps = steps_of(renderer.seen)
        return Sample(
            turn_s=returned if ended is None else ended,
            type_s=returned if summary is None else min(summary, returned),
            steps=steps,
            streams_s=sum((r.ended_at or r.received_at) - r.received_at for r in made),
            tools_s=steps.pop("tools", 0.0),
        )


def tracked(events: Iterator[Event], finished: threading.Event) -> Iterator[Event]:
    """`events`, setting `finished` once the loop's generator is done (wherever it was driven)."""
    try:
        yield from events
    finally:
        finished.set()


def check(config: Config, last: Event | None, renderer: ClockedRenderer, requests: int) -> None:
    """Stop the bench when the turn did not end as the scenario says it must."""
    ended = [e for _, e in renderer.seen if isinstance(e, TurnFinished | TurnFailed)]
    final = ended[-1] if ended else last
    if not isinstance(final, TurnFinished):
        raise RuntimeError(f"{config.name}: the turn did not finish: {final!r}")
    want_text, want_requests = (WORKSPACES[0], 1) if config.d1 else (SUMMARY_MARK, 3)
    if want_text not in final.text or final.skipped_round != config.d1:
        raise RuntimeError(f"{config.name}: unexpected answer {final.text[:200]!r}")
    if requests != want_requests:
        raise RuntimeError(f"{config.name}: {requests} model requests, expected {want_requests}")


def seconds(values: list[float]) -> str:
    return f"{statistics.median(values):6.2f} s  p99 {percentile(values, 0.99):6.2f} s"


def table(samples: dict[str, list[Sample]]) -> list[str]:
    lines = [f"{'configuration':<10}  {'turn (median, p99)':<26}  can type (median, p99)"]
    for config in CONFIGS:
        runs = samples[config.name]
        turn = seconds([s.turn_s for s in runs])
        can_type = seconds([s.type_s for s in runs])
        lines.append(f"{config.name:<10}  {turn:<26}  {can_type}")
    lines.append(
        "where the time goes (medians): model streams as the server timed them, tools, the "
        "rest (qshell: requests, rendering, the loop); then when each round ended since "
        "Enter and how long each tool ran"
    )
    for config in CONFIGS:
        runs = samples[config.name]
        keys = list(dict.fromkeys(k for s in runs for k in s.steps))
        medians = {k: statistics.median([s.steps[k] for s in runs if k in s.steps]) for k in keys}
        parts = [
            f"{k} {v * 1000:.1f} ms" if k.endswith("runs") else f"{k} {v:.2f} s"
            for k, v in medians.items()
        ]
        streams = statistics.median(s.streams_s for s in runs)
        tools = statistics.median(s.tools_s for s in runs)
        rest = statistics.median(s.overhead_s for s in runs)
        lines.append(
            f"  {config.name:<8} streams {streams:.2f} s · tools {tools:.2f} s · "
            f"rest {rest:.2f} s | " + " · ".join(parts)
        )
    return lines


def goal(samples: dict[str, list[Sample]], scale: float) -> str:
    def can_type(config: Config) -> float:
        return statistics.median(s.type_s for s in samples[config.name])

    best = min(CONFIGS, key=can_type)
    all_on = can_type(CONFIGS[-1])
    verdict = "met" if all_on < GOAL_S * scale else "missed"
    return (
        f"goal: can type < {GOAL_S * scale:.2f} s with all on, vs the seed's "
        f"{SEED_TOTAL_S * scale:.2f} s (here all off: {can_type(CONFIGS[0]):.2f} s, all on: "
        f"{all_on:.2f} s; fastest: {best.name}, {can_type(best):.2f} s): {verdict}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument(
        "--scale", type=float, default=1.0, help="every step's time × this (a quick check)"
    )
    args = parser.parse_args()
    timing = Timing().scaled(args.scale)
    work = Path(tempfile.mkdtemp(prefix="qshell-bench-latency-plan-"))
    (work / "tmp").mkdir()
    root = (work / "project").resolve()
    root.mkdir()
    (root / workspaces_plugin.LIST_FILE).write_text("\n".join(WORKSPACES) + "\n")
    (root / "README.md").write_text("# workspaces\n\nThe bench's project.\n")
    service = WorkspaceService(root / STATUS_PIPE, timing.service_s)
    server = ScriptedLLMServer().start()
    samples: dict[str, list[Sample]] = {c.name: [] for c in CONFIGS}
    try:
        script(server, timing)
        bench = Bench(server, work, root, Path(workspaces_plugin.__file__).resolve())
        for _ in range(max(args.runs, 1)):
            for config in CONFIGS:
                samples[config.name].append(bench.sample(config))
    finally:
        server.stop()
        service.stop()
        shutil.rmtree(work, ignore_errors=True)
    for violation in server.violations:
        print(f"server violation: {violation}")
    print(
        f"'{PROMPT}': round 1 {timing.round1_s:.2f} s -> skill -> round 2 {timing.round2_s:.2f} s"
        f" -> shell {timing.service_s:.2f} s -> summary {timing.summary_s:.2f} s "
        f"(TTFT {timing.ttft_s:.2f} s); {max(args.runs, 1)} runs"
    )
    print("\n".join(table(samples)))
    print(goal(samples, args.scale))


if __name__ == "__main__":
    main()
