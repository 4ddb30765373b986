"""Keystroke echo latency at the REPL prompt while a speculation streams in the background.

Run: `python -m bench.keystroke_latency [--keys 100] [--tokens-per-s 20]`. Starts two real
`python -m qshell` REPLs in pseudo-terminals (TERM=xterm-256color, PROMPT_TOOLKIT_NO_CPR=1,
a private HOME) against one scripted server on 127.0.0.1, both with next-prompt
suggestions on; one has speculation on, the other off. After a first turn (a `read_file`
call and a short answer) the server suggests "reformat the parser module" at once, and the
speculative turn for it streams a long text at `--tokens-per-s` for minutes. Once that
request is streaming, keys are typed into both REPLs, alternating one key each: the
letters of "reformat" one at a time (a prefix of the suggestion, so typing does not abort
the speculation), then as many backspaces, over again. For each letter it times
`os.write` of the key on the pty to the read that brings the echoed letter (escape
sequences stripped); after every key it waits for 30 ms of output silence. One warm-up
cycle per REPL is not counted. Prints p50/p99 for both, their ratio, whether the
speculation was still streaming at the end, and the goal (p99 ≤ 16 ms with the
speculation running). It stops with an error when an echo does not arrive; it does not
assert the goal, and it measures the terminal round trip on this machine, not a
terminal emulator's drawing.
"""

from __future__ import annotations

import argparse
import codecs
import os
import re
import select
import shutil
import statistics
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from bench.stats import percentile
from qshell.followup.suggestion import SUGGESTION_MARKER
from tests.e2e.pty import Term, screen_text, spawn_qshell
from tests.fakes.llm_server import (
    Latency,
    RecordedRequest,
    Reply,
    ScriptedLLMServer,
    ToolCallSpec,
    always,
    has_tool_result,
    last_user_text_contains,
)
from tests.fakes.wire import TOKEN_CHARS

SUGGESTION = "reformat the parser module"
TYPED = "reformat"  # letters only: each one is echoed as a visible character
BACKSPACE = "\x7f"
STREAM_S = 150.0  # the speculative answer streams this long (its wall-clock limit is 120 s)
ECHO_TIMEOUT_S = 2.0
QUIET_S = 0.03
SETTLE_LIMIT_S = 1.0
READY_TIMEOUT_S = 30.0
GOAL_P99_S = 0.016
BUSY, IDLE = "speculating", "idle"
# an escape sequence cut off at the end of what has arrived so far (wait for the rest)
_OPEN_ESCAPE = re.compile(r"\x1b(?:\[[0-?]*[ -/]*|\][^\x07\x1b]*|[()])?\Z")


def visible(raw: str) -> str:
    """The printable text of `raw`, leaving out a trailing unfinished escape sequence."""
    cut = _OPEN_ESCAPE.search(raw)
    return screen_text(raw[: cut.start()] if cut else raw)


@dataclass
class Prompt:
    """One REPL in a pty: types keys on its fd and times their echo."""

    name: str
    term: Term
    echoes: list[float] = field(default_factory=list)
    position: int = 0  # letters of TYPED on the line; then as many backspaces follow

    @property
    def fd(self) -> int:
        return int(self.term.child.child_fd)

    def _read(self, timeout_s: float) -> bytes:
        ready, _, _ = select.select([self.fd], [], [], max(timeout_s, 0.0))
        if not ready:
            return b""
        try:
            return os.read(self.fd, 65536)
        except OSError as exc:
            raise RuntimeError(f"{self.name}: qshell closed its terminal") from exc

    def settle(self) -> None:
        """Read until QUIET_S passes with no output (at most SETTLE_LIMIT_S)."""
        deadline = time.monotonic() + SETTLE_LIMIT_S
        while time.monotonic() < deadline and self._read(QUIET_S):
            pass

    def echo_time(self, key: str) -> float:
        """Seconds from writing `key` to the read that brings it back as visible text."""
        decoder = codecs.getincrementaldecoder("utf-8")("replace")
        received = ""
        start = time.perf_counter()
        os.write(self.fd, key.encode())
        while (elapsed := time.perf_counter() - start) < ECHO_TIMEOUT_S:
            received += decoder.decode(self._read(ECHO_TIMEOUT_S - elapsed))
            if key in visible(received):
                return time.perf_counter() - start
        raise RuntimeError(f"{self.name}: no echo of {key!r} in {ECHO_TIMEOUT_S} s: {received!r}")

    def step(self, measure: bool) -> None:
        """The next key of the cycle: a letter of TYPED (timed), or a backspace."""
        cycle = len(TYPED)
        if self.position < cycle:
            elapsed = self.echo_time(TYPED[self.position])
            if measure:
                self.echoes.append(elapsed)
        else:
            os.write(self.fd, BACKSPACE.encode())
        self.position = (self.position + 1) % (2 * cycle)
        self.settle()

    def close(self) -> None:
        """Clear the line and Ctrl-D; force the child down if it does not exit."""
        child = self.term.child
        try:
            if child.isalive():
                child.send("\x15\x04")
                deadline = time.monotonic() + 10
                while child.isalive() and time.monotonic() < deadline:
                    self._read(0.1)
        except (OSError, RuntimeError):
            pass
        child.close(force=True)


def script(server: ScriptedLLMServer, tokens_per_s: float) -> None:
    def asks_suggestion(request: RecordedRequest) -> bool:
        return SUGGESTION_MARKER in request.last_user_text

    tokens = int(STREAM_S * tokens_per_s)
    text = ("word " * tokens)[: tokens * TOKEN_CHARS]
    slow = Reply.text(text, latency=Latency(ttft_s=0.1, tokens_per_s=tokens_per_s))
    server.add_rule(asks_suggestion, Reply.text(SUGGESTION))
    server.add_rule(last_user_text_contains(SUGGESTION), slow)
    server.add_rule(has_tool_result(), Reply.text("it says hello"))
    server.add_rule(always(), Reply.tool_calls([ToolCallSpec("read_file", {"path": "hello.txt"})]))


def speculative(server: ScriptedLLMServer, model: str) -> list[RecordedRequest]:
    """`model`'s requests whose newest message is the suggestion: speculations of it."""
    last = {"role": "user", "content": SUGGESTION}
    return [
        r
        for r in server.requests
        if r.model == model and (r.body.get("messages") or [{}])[-1] == last
    ]


def start(server: ScriptedLLMServer, work: Path, name: str, speculation: bool) -> Prompt:
    """A REPL at the prompt after its first turn, with the suggestion showing."""
    project, home = work / name / "project", work / name / "home"
    project.mkdir(parents=True)
    (project / "hello.txt").write_text("hello world\n")
    env = {
        "HOME": str(home),
        "QSHELL_HOME": str(home / "qshell"),
        "XDG_CONFIG_HOME": str(home / "config"),
        "XDG_STATE_HOME": str(home / "state"),
        "XDG_CACHE_HOME": str(home / "cache"),
        "XDG_DATA_HOME": str(home / "data"),
        "QSHELL_LOAD_PLUGINS": "",
        "QSHELL_SUGGESTIONS": "1",
        "QSHELL_SPECULATION": "1" if speculation else "0",
        "OPENAI_MODEL": name,  # tells the two REPLs' requests apart
    }
    prompt = Prompt(name, spawn_qshell(server, project, extra_env=env))
    try:
        term = prompt.term
        term.expect("Ctrl-D to exit", timeout_s=READY_TIMEOUT_S)
        term.wait_prompt(READY_TIMEOUT_S)
        term.submit("read hello.txt", READY_TIMEOUT_S)
        term.expect("it says hello", timeout_s=READY_TIMEOUT_S)
        term.wait_prompt(READY_TIMEOUT_S)
        term.expect("reformat the parser", timeout_s=READY_TIMEOUT_S)
    except BaseException:
        prompt.close()
        raise
    prompt.settle()
    return prompt


def wait_streaming(server: ScriptedLLMServer) -> RecordedRequest:
    deadline = time.monotonic() + READY_TIMEOUT_S
    while not (found := speculative(server, BUSY)):
        if time.monotonic() > deadline:
            raise RuntimeError("the speculative request never arrived")
        time.sleep(0.05)
    time.sleep(0.5)  # past its time to first token: it is streaming now
    return found[0]


def summary(label: str, seconds: list[float]) -> str:
    ms = [s * 1000 for s in seconds]
    return (
        f"{label}: p50 {statistics.median(ms):.2f} ms, p99 {percentile(ms, 0.99):.2f} ms, "
        f"max {max(ms):.2f} ms, n={len(ms)}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--keys", type=int, default=100)
    parser.add_argument("--tokens-per-s", type=float, default=20.0)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="qshell-bench-keys-"))
    server = ScriptedLLMServer().start()
    prompts: list[Prompt] = []
    try:
        script(server, args.tokens_per_s)
        busy = start(server, work, BUSY, speculation=True)
        prompts.append(busy)
        request = wait_streaming(server)
        idle = start(server, work, IDLE, speculation=False)
        prompts.append(idle)
        cycle = 2 * len(TYPED)
        for _ in range(cycle):
            busy.step(measure=False)
            idle.step(measure=False)
        steps = 0
        limit = 4 * max(args.keys, 1) + cycle
        while len(busy.echoes) < max(args.keys, 1) and steps < limit:
            busy.step(measure=True)
            idle.step(measure=True)
            steps += 1
        streaming = not request.completed.is_set() and not request.disconnected.is_set()
        received = time.monotonic() - request.received_at
    finally:
        for prompt in prompts:
            prompt.close()
        server.stop()
        shutil.rmtree(work, ignore_errors=True)
    print(
        f"speculative request: {'still streaming' if streaming else 'NOT streaming'} at the "
        f"end ({received:.1f} s after it arrived, {args.tokens_per_s:g} tokens/s); "
        f"the REPL without speculation sent {len(speculative(server, IDLE))} speculative requests"
    )
    print(summary("key echo, speculation streaming", busy.echoes))
    print(summary("key echo, no speculation", idle.echoes))
    ratio = percentile(busy.echoes, 0.99) / percentile(idle.echoes, 0.99)
    p50 = statistics.median(busy.echoes) / statistics.median(idle.echoes)
    print(f"streaming / none: p50 {p50:.2f}x, p99 {ratio:.2f}x")
    met = percentile(busy.echoes, 0.99) <= GOAL_P99_S
    print(f"goal: p99 ≤ {GOAL_P99_S * 1000:.0f} ms while speculating: {'met' if met else 'missed'}")


if __name__ == "__main__":
    main()
