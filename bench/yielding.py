"""Does a speculation's command slow the user's own? A CPU-bound command timed three ways.

Run: `python -m bench.yielding [--runs 9] [--load 2] [--work 3000000]`. The user's turn is a
CPU-bound shell command (`python -c` summing `--work` squares) run through the shell tool
as a normal turn runs it; `--load` CPU-bound processes keep the machine busy throughout (a
loaded 2-core machine). Interleaved, each run times it: alone; beside a wrong guess's
speculated command doing the same work as a speculation runs it (`ToolContext.background`:
the idle scheduling class in a niceness-19 autogroup, tools/shell.py `yielding`); and beside
the same command at
normal priority, as speculation ran before. Prints median and p99 of each and the ratios
to alone (Roadmap 17's goal: ≤ 1.02 with the speculation beside it). Asserts nothing.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

from bench.load import loaded
from bench.stats import report
from qshell.tools.base import ToolContext
from qshell.tools.paths import PathResolver
from qshell.tools.shell import ShellArgs, ShellTool


def busy(work: int) -> str:
    return f"{sys.executable} -c 'sum(i * i for i in range({work}))'"


def turn(ctx: ToolContext, command: str) -> float:
    """Seconds the shell tool takes to run `command`."""
    started = time.perf_counter()
    result = ShellTool().run(ShellArgs(command=command, timeout=600), ctx)
    assert result.error is None, result.llm_content
    return time.perf_counter() - started


def beside(ctx: ToolContext, command: str, other: ToolContext | None) -> float:
    """`turn`, with the same command running meanwhile in `other`'s way (None: alone)."""
    if other is None:
        return turn(ctx, command)
    guess = threading.Thread(target=turn, args=(other, command))
    guess.start()
    try:
        return turn(ctx, command)
    finally:
        guess.join()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--load", type=int, default=2, help="CPU-bound processes meanwhile")
    parser.add_argument("--work", type=int, default=3_000_000, help="squares summed")
    options = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="qshell-bench-yielding-"))
    ctx = ToolContext(paths=PathResolver(root), shell_timeout_cap_s=600)
    command = busy(options.work)
    ways: dict[str, Callable[[], float]] = {
        "alone": lambda: beside(ctx, command, None),
        "beside a speculation (idle class)": lambda: beside(
            ctx, command, dataclasses.replace(ctx, background=True)
        ),
        "beside one at normal priority": lambda: beside(ctx, command, ctx),
    }
    times: dict[str, list[float]] = {name: [] for name in ways}
    with loaded(options.load):
        for _ in range(options.runs):
            for name, way in ways.items():
                times[name].append(way())
    print(
        f"the user's command, {options.runs} runs interleaved, {options.load} CPU-bound processes"
    )
    alone = statistics.median(times["alone"])
    for name, seconds in times.items():
        ratio = statistics.median(seconds) / alone
        goal = " (goal <= 1.02)" if "speculation" in name else ""
        print(report(name, seconds) + f", {ratio:.2f}x alone{goal}")


if __name__ == "__main__":
    main()
