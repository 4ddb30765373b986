"""Render cost of a long streamed answer in the full REPL's rich renderer (seed 004 §7.4 C).

Run: `python -m bench.render [--tokens 3000] [--runs 10] [--tokens-per-s 0,500] [--pty]`.
A long answer of realistic Markdown (headings, paragraphs with inline code, lists, fenced
Python, a table) is cut into 4-character tokens and streamed one `TextDelta` per token
through the real path: `ui/driver.py` `drive` iterates the stream in its worker and the
main thread renders each event with the `RichRenderer` the REPL uses, on a console that
is a terminal (width 100, height 40) writing into a sink — an in-memory file, or with
`--pty` a pseudo-terminal whose other end a thread drains. `--tokens-per-s 0` streams as
fast as the worker can put events in the queue (the worst case: every chunk's fixed cost
shows); another rate paces the tokens. After the last token the stream pauses `--pause-s`
(as it does when text is followed by a tool call whose arguments are still streaming),
then the turn ends. Per rate it prints, over the runs, median and p99 of: the main
thread's time inside the renderer (wall and CPU), the time from the worker yielding the
last token to the terminal receiving it (while the stream is paused), the time from the
turn's end to the settled screen (the final frame), live redraws and terminal writes.
It prints figures; it asserts nothing.
"""

from __future__ import annotations

import argparse
import io
import os
import statistics
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, TextIO

from markdown_it import MarkdownIt
from rich.console import Console

from bench.stats import percentile
from qshell.agent.events import Event, PermissionReply, PermissionRequested, TextDelta, TurnFinished
from qshell.cancel import CancelToken
from qshell.llm.messages import Usage
from qshell.ui.driver import drive
from qshell.ui.render_rich import RichRenderer
from tests.fakes.wire import split_tokens

WIDTH, HEIGHT = 100, 40
LAST_WORDS = "end of the answer QZX."
CODE = '''```python
def handle_{n}(request: Request, *, retries: int = 3) -> Response:
    """Serve one request of kind {n}, retrying a transient failure."""
    for attempt in range(retries):
        try:
            payload = decode(request.body, schema=SCHEMAS[{n}])
            result = service.call(payload, timeout=TIMEOUT_S * (attempt + 1))
        except TransientError as exc:
            log.warning("attempt %d of %d failed: %s", attempt + 1, retries, exc)
            continue
        return Response(status=200, body=encode(result))
    return Response(status=503, body=b"try again later")
```'''


def section(n: int) -> str:
    """One section of the answer: a heading, prose, two lists, code and a table."""
    prose = (
        f"The handler for kind {n} reads the body with `decode`, checks it against "
        f"**schema {n}** and calls the service with a timeout that grows on each attempt. "
        "A transient failure is logged and retried; anything else propagates, so the "
        "caller sees the real error instead of a generic one. This keeps the retry policy "
        "in one place and makes the timeouts easy to reason about when the service is slow."
    )
    bullets = "\n".join(
        f"- `{name}_{n}` is where the {what} lives, and it is covered by a unit test"
        for name, what in [("decode", "parsing"), ("service", "I/O"), ("encode", "output")]
    )
    steps = "\n".join(
        f"{i}. {step} for kind {n}"
        for i, step in enumerate(["Run the tests", "Check the logs", "Deploy"], 1)
    )
    table = "| attempt | timeout | outcome |\n|---|---|---|\n" + "\n".join(
        f"| {a} | {a * 2} s | {'ok' if a == 3 else 'retry'} |" for a in (1, 2, 3)
    )
    return "\n\n".join(
        [f"## Step {n}: the kind-{n} handler", prose, bullets, CODE.format(n=n), steps, table]
    )


def answer(tokens: int) -> str:
    """Markdown of about `tokens` 4-character tokens, ending with LAST_WORDS."""
    parts = ["# How the request handlers work", "Here is what each handler does, step by step."]
    n = 0
    while len("\n\n".join(parts)) < tokens * 4:
        n += 1
        parts.append(section(n))
    parts.append(f"That is the whole plan, {LAST_WORDS}")
    return "\n\n".join(parts) + "\n"


@dataclass
class Run:
    """What one streamed answer cost."""

    render_s: float = 0.0  # main thread inside the renderer, wall clock
    render_cpu_s: float = 0.0  # the same, CPU time of the main thread
    last_token_at: float = 0.0  # the worker yielded the last token
    shown_at: float = 0.0  # the terminal received the text with the last token
    ended_at: float = 0.0  # the worker yielded the turn's end
    settled_at: float = 0.0  # the renderer finished the turn's last frame
    writes: int = 0
    redraws: int = 0
    parses: int = 0  # Markdown parses (markdown-it), the unit of the renderer's work


class Sink(io.StringIO):
    """The terminal's input: notes when the last token's words arrive."""

    def __init__(self, run: Run, tee: TextIO | None) -> None:
        super().__init__()
        self.run, self.tee = run, tee

    def write(self, text: str) -> int:
        self.run.writes += 1
        if not self.run.shown_at and LAST_WORDS in text:
            self.run.shown_at = time.perf_counter()
        if self.tee is not None:
            self.tee.write(text)
            self.tee.flush()
        return len(text)


@dataclass
class Timed:
    """A Renderer that times the one it wraps."""

    inner: RichRenderer
    run: Run
    calls: list[str] = field(default_factory=list)

    def _timed(self, name: str, *args: Any) -> None:
        wall, cpu = time.perf_counter(), time.thread_time()
        getattr(self.inner, name)(*args)
        self.run.render_s += time.perf_counter() - wall
        self.run.render_cpu_s += time.thread_time() - cpu

    def event(self, event: Event) -> None:
        self._timed("event", event)

    def permission(self, request: PermissionRequested) -> None:
        self._timed("permission", request)

    def notice(self, text: str) -> None:
        self._timed("notice", text)

    def say(self, text: str) -> None:
        self._timed("say", text)

    def error(self, text: str) -> None:
        self._timed("error", text)

    def waiting(self, elapsed_s: float) -> None:
        self._timed("waiting", elapsed_s)

    def end_turn(self) -> None:
        self._timed("end_turn")
        self.run.settled_at = time.perf_counter()

    def expand(self) -> None:
        self._timed("expand")


def stream(tokens: list[str], run: Run, *, per_s: float, pause_s: float) -> Iterator[Event]:
    """The answer as the loop yields it, one delta per token, paced when `per_s` > 0."""
    start = time.perf_counter()
    for n, token in enumerate(tokens):
        if per_s > 0:
            time.sleep(max(0.0, start + n / per_s - time.perf_counter()))
        if n == len(tokens) - 1:
            run.last_token_at = time.perf_counter()
        yield TextDelta(token)
    time.sleep(pause_s)
    run.ended_at = time.perf_counter()
    yield TurnFinished("".join(tokens), Usage(prompt_tokens=1000, completion_tokens=len(tokens)), 1)


def refuse(request: PermissionRequested) -> PermissionReply:
    raise AssertionError("the benchmark asks no question")


@contextmanager
def counting_parses(run: Run) -> Iterator[None]:
    """Count the Markdown parses done meanwhile (rich and the renderer both use markdown-it)."""
    original = MarkdownIt.parse

    def parse(self: MarkdownIt, src: str, env: Any = None) -> Any:
        run.parses += 1
        return original(self, src, env)

    MarkdownIt.parse = parse  # type: ignore[method-assign]
    try:
        yield
    finally:
        MarkdownIt.parse = original  # type: ignore[method-assign]


def one_run(tokens: list[str], *, per_s: float, pause_s: float, tee: TextIO | None) -> Run:
    run = Run()
    console = Console(
        file=Sink(run, tee),
        width=WIDTH,
        height=HEIGHT,
        force_terminal=True,
        highlight=False,
        emoji=False,
        _environ={"TERM": "xterm-256color"},
    )
    renderer = RichRenderer(console)
    with counting_parses(run):
        events = stream(tokens, run, per_s=per_s, pause_s=pause_s)
        drive(events, Timed(renderer, run), refuse, CancelToken())
    run.redraws = renderer.draws
    return run


class Pty:
    """A pseudo-terminal whose master end a thread reads and throws away."""

    def __init__(self) -> None:
        master, slave = os.openpty()
        self.master = master
        self.file = os.fdopen(slave, "w", encoding="utf-8", buffering=1)
        self.thread = threading.Thread(target=self._drain, daemon=True)
        self.thread.start()

    def _drain(self) -> None:
        try:
            while os.read(self.master, 65536):
                pass
        except OSError:
            pass

    def close(self) -> None:
        self.file.close()
        self.thread.join(2.0)
        os.close(self.master)


def line(label: str, values: list[float], unit: str = "ms") -> str:
    scale = 1000.0 if unit == "ms" else 1.0
    shown = [v * scale for v in values]
    fmt = "{:.1f}" if unit == "ms" else "{:.0f}"
    median, p99 = fmt.format(statistics.median(shown)), fmt.format(percentile(shown, 0.99))
    return f"  {label:<34} median {median:>8} {unit:<3} p99 {p99:>8} {unit}"


def report(runs: list[Run]) -> list[str]:
    return [
        line("render, main thread wall", [r.render_s for r in runs]),
        line("render, main thread CPU", [r.render_cpu_s for r in runs]),
        line("last token -> on the terminal", [r.shown_at - r.last_token_at for r in runs]),
        line("turn end -> settled (final frame)", [r.settled_at - r.ended_at for r in runs]),
        line("live redraws", [float(r.redraws) for r in runs], unit=""),
        line("terminal writes", [float(r.writes) for r in runs], unit=""),
        line("Markdown parses", [float(r.parses) for r in runs], unit=""),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tokens", type=int, default=3000)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--tokens-per-s", default="0,500", help="comma-separated; 0: no pacing")
    parser.add_argument("--pause-s", type=float, default=0.3)
    parser.add_argument("--pty", action="store_true", help="write into a pseudo-terminal too")
    args = parser.parse_args()
    text = answer(args.tokens)
    tokens = split_tokens(text)
    pty = Pty() if args.pty else None
    print(
        f"{len(tokens)} tokens ({len(text)} characters, {text.count(chr(10))} lines), "
        f"{args.runs} runs, pause {args.pause_s:.2f} s after the last token"
        + (", written into a pty" if pty else "")
    )
    try:
        for rate in [float(r) for r in args.tokens_per_s.split(",")]:
            tee = pty.file if pty else None
            one_run(tokens[:200], per_s=0, pause_s=0, tee=tee)  # warm up imports and caches
            runs = [
                one_run(tokens, per_s=rate, pause_s=args.pause_s, tee=tee) for _ in range(args.runs)
            ]
            print(f"{'as fast as possible' if rate <= 0 else f'{rate:.0f} tokens/s'}:")
            print("\n".join(report(runs)))
    finally:
        if pty:
            pty.close()


if __name__ == "__main__":
    main()
