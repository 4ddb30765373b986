"""Sandbox start-up overhead per command: plain, in the jail, and on a kernel overlay.

Run: `python -m bench.sandbox_overhead [--runs 30] [--files 200] [--secrets 0] [--load N]
[--no-idle]`. In a throwaway project of `--files` small files it runs `true` through the
shell tool (tools/shell.py: `bash -c`, its reader thread and its wait), as a user waits for
it, four ways, interleaved so that machine noise hits all alike:

- `plain`: as is;
- `jail`: as a proven command runs (permissions/policy.py `proven_context`: the bubblewrap
  jail of permissions/confine.py, wrapped afresh — the secret index's look, the masks, the
  process cap's cgroup);
- `kernel overlay`: as `followup/overlay_run.run_on_overlay` runs a speculated command that
  may write, whole — the project's base and read fingerprint taken first, the stand-ins of
  its secrets (`--secrets N` puts N `.env` files in the project), `unshare`, the two
  overlay mounts and the jail inside, then the checks after it and the take-in — but at
  normal priority: the sandbox's own cost;
- `kernel overlay, idle`: the same, as a speculation really runs it (`ToolContext.background`:
  the idle scheduling class in a niceness-19 autogroup, tools/shell.py `yielding`), which on
  a CPU-bound machine waits for whatever CPU nothing else wants, by design (Roadmap 17
  item 4; `bench.yielding`); `--no-idle` leaves it out.

Prints median and p99 of each and the overheads against the plain run, and each one's CPU
time in ms per command (the bench's own and every process it starts, from a cpuacct cgroup
where one can be made; else it leaves out bubblewrap's sandbox process, and says so). With `--load N`, N CPU-bound
processes run during every other round (paused with SIGSTOP in between, so quiet and
loaded rounds interleave) and each way is reported quiet and loaded, with its slowdown under
load against the plain command's own — both in ms (loaded median − quiet median; Roadmap
17's goal for the kernel overlay at normal priority: at most 3× the plain one's) and as a
factor (loaded median / quiet median). The machine's load average (other sessions share it)
is printed before and after: where they keep it busy, "quiet" is not idle, the plain
command's slowdown is a few noisy milliseconds and the ratio in ms swings with it (run the
bench several times and quote the spread); the CPU per command hardly depends on the load.
Skips what the machine's probe says cannot run.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import resource
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from bench.load import Load, load_average
from bench.stats import report
from qshell.config import SandboxMode, SandboxSettings
from qshell.followup.overlay_run import run_on_overlay
from qshell.overlay import Overlay
from qshell.permissions.confine import JailLauncher, confinement
from qshell.permissions.policy import proven_context
from qshell.sandbox import probe
from qshell.tools.base import ToolContext
from qshell.tools.paths import PathResolver
from qshell.tools.shell import ShellArgs, ShellTool

ARGS = ShellArgs(command="true")
GOAL = 3.0  # the kernel overlay's slowdown under load, in ms, against the plain command's
OVERLAY = "kernel overlay"
CPUACCT = Path("/sys/fs/cgroup/cpuacct")
Times = dict[str, dict[str, list[float]]]  # phase → way → seconds


def shell(ctx: ToolContext) -> Callable[[], None]:
    """`true` run by the shell tool in `ctx`."""

    def run() -> None:
        result = ShellTool().run(ARGS, ctx)
        assert result.error is None, result.llm_content

    return run


def on_overlay(ctx: ToolContext, overlay: Overlay, launcher: JailLauncher) -> Callable[[], None]:
    """`true` speculated on the kernel overlay, as the gate runs it (followup/gate.py)."""

    def run() -> None:
        result = run_on_overlay(ShellTool(), ARGS, ctx, overlay, launcher)
        assert result.error is None, result.llm_content

    return run


class CpuMeter:
    """The CPU seconds this process and every process it starts have spent: from a cpuacct
    cgroup of their own (cgroup v1, made where this user may: the burners, started before,
    stay out), else this process's own and what the processes it reaped spent — which
    leaves out bubblewrap's sandbox process, reaped by init once bwrap has exited."""

    def __init__(self) -> None:
        self.group: Path | None = None
        try:
            group = CPUACCT / f"qshell-bench-{os.getpid()}"
            group.mkdir()
            (group / "cgroup.procs").write_text(f"{os.getpid()}\n")
            self.group = group
        except OSError:
            pass

    @property
    def kind(self) -> str:
        return "cgroup" if self.group is not None else "reaped only, bwrap's sandbox left out"

    def now(self) -> float:
        if self.group is not None:
            return int((self.group / "cpuacct.usage").read_text()) / 1e9
        children = resource.getrusage(resource.RUSAGE_CHILDREN)
        return children.ru_utime + children.ru_stime + time.process_time()

    def close(self) -> None:
        if self.group is not None:
            with contextlib.suppress(OSError):
                (CPUACCT / "cgroup.procs").write_text(f"{os.getpid()}\n")
                self.group.rmdir()


def timed(run: Callable[[], None], meter: CpuMeter) -> tuple[float, float]:
    """The wall and CPU seconds of `run()`."""
    spent = meter.now()
    started = time.perf_counter()
    run()
    wall = time.perf_counter() - started
    return wall, meter.now() - spent


def ways_in(root: Path, temp: Path, idle: bool) -> tuple[dict[str, Callable[[], None]], Overlay]:
    """The ways to time, by name, and the overlay the speculated ones write to."""
    paths = PathResolver(root)
    confined = confinement(SandboxMode.AUTO, paths, os.environ, None, settings=SandboxSettings())
    launcher = confined.launcher
    ctx = ToolContext(paths=paths, environ=dict(os.environ), sandbox=launcher)
    ways = {"plain": shell(ctx)}
    if launcher is not None:
        ways["jail"] = shell(proven_context(ctx))
    overlay = Overlay.create(root, paths, base_dir=temp / "base")
    if launcher is not None and launcher.commands is not None:
        ways[OVERLAY] = on_overlay(ctx, overlay, launcher)
        if idle:
            ways[f"{OVERLAY}, idle"] = on_overlay(replace(ctx, background=True), overlay, launcher)
    return ways, overlay


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--files", type=int, default=200)
    parser.add_argument("--secrets", type=int, default=0, help="secret files (`.env`s) in it")
    parser.add_argument(
        "--load", type=int, default=0, help="CPU-bound processes, every other round"
    )
    parser.add_argument(
        "--no-idle", action="store_true", help="leave out the overlay at idle priority"
    )
    options = parser.parse_args()
    found = probe()
    print(f"load average before: {load_average()}")
    with tempfile.TemporaryDirectory(prefix="qshell-bench-") as temp:
        root = Path(temp) / "project"
        for i in range(options.files):
            path = root / f"pkg{i % 10}" / f"m{i}.py"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(f"x = {i}\n")
        for i in range(options.secrets):
            (root / f"pkg{i % 10}" / (".env" if i < 10 else f"k{i}.env")).write_text("K=v\n")
        ways, overlay = ways_in(root, Path(temp), idle=not options.no_idle)
        times, cpu = measured(ways, options.runs, options.load)
        overlay.discard()
    print(f"load average after: {load_average()}")
    print(f"sandbox: {found.mode}{f' ({found.reason})' if found.reason else ''}")
    for phase, by_way in times.items():
        plain = statistics.median(by_way["plain"])
        for name, seconds in by_way.items():
            extra = statistics.median(seconds) - plain
            more = "" if name == "plain" else f", +{extra * 1000:.1f} ms"
            spent = statistics.median(cpu[phase][name]) * 1000
            print(report(f"{name} ({phase})", seconds) + more + f"; CPU {spent:.1f} ms")
    if "loaded" in times:
        slowdowns(times)


def measured(ways: dict[str, Callable[[], None]], runs: int, load: int) -> tuple[Times, Times]:
    """Each way's wall and CPU times, quiet (and loaded, every other round, with `load`
    processes)."""
    phases = ("quiet", "loaded") if load else ("quiet",)
    times: Times = {p: {n: [] for n in ways} for p in phases}
    cpu: Times = {p: {n: [] for n in ways} for p in phases}
    burners = Load(load, running=False)
    meter = CpuMeter()
    print(f"CPU measured: {meter.kind}")
    try:
        for _ in range(runs):
            for phase in phases:
                (burners.on if phase == "loaded" else burners.off)()
                for name, run in ways.items():
                    wall, spent = timed(run, meter)
                    times[phase][name].append(wall)
                    cpu[phase][name].append(spent)
    finally:
        meter.close()
        burners.close()
    return times, cpu


def slowdowns(times: Times) -> None:
    """Each way's slowdown under load against plain's: in ms (loaded median − quiet
    median) and as a factor (loaded median / quiet median)."""
    quiet, loaded = times["quiet"], times["loaded"]

    def slowdown(name: str) -> float:
        return statistics.median(loaded[name]) - statistics.median(quiet[name])

    def factor(name: str) -> float:
        return statistics.median(loaded[name]) / statistics.median(quiet[name])

    plain = slowdown("plain")
    for name in quiet:
        if name == "plain":
            continue
        ratio = slowdown(name) / plain if plain > 0 else float("inf")
        goal = f" (goal: <= {GOAL:g}x)" if name == OVERLAY else ""
        print(
            f"{name}: slowed by {slowdown(name) * 1000:.1f} ms under load, plain by "
            f"{plain * 1000:.1f} ms: {ratio:.1f}x{goal}; as a factor {factor(name):.2f} "
            f"against plain's {factor('plain'):.2f}: {factor(name) / factor('plain'):.2f}x"
        )


if __name__ == "__main__":
    main()
