"""Sandbox start-up overhead per command: plain, in the jail, and on a kernel overlay.

Run: `python -m bench.sandbox_overhead [--runs 30] [--files 200] [--secrets 0] [--load N]`.
In a throwaway project of
`--files` small files it runs `bash -c true` three ways, interleaved so that machine noise
hits all alike: as is, in the bubblewrap jail of proven commands (permissions/confine.py), and in
the jail on a kernel overlay as a speculated command runs (sandbox/mount.py: `unshare -rm`,
overlayfs, the jail inside; the whole-project read fingerprint a speculated command takes
first, the stand-ins of its secrets (`--secrets N` puts N `.env` files in the project) and the
checks after it — what it wrote outside the project, which stand-ins it touched — included).
Each jailed run wraps the command afresh, as every command is (the secret index's look,
the masks, the process cap's cgroup). Prints median and p99 of each and the overheads
against the plain run. With `--load N`, N CPU-bound processes run during every other round
(paused with SIGSTOP in between, so quiet and loaded rounds interleave) and each way is
reported quiet and loaded, with its slowdown under load against the plain command's own
(Roadmap 17's goal: a speculated command's at most 3× the plain one's). Skips what the
machine's probe says cannot run.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from bench.load import Load
from bench.stats import report
from qshell.config import SandboxMode, SandboxSettings
from qshell.followup.overlay_reach import refusal
from qshell.followup.overlay_run import SCRATCH_DIR
from qshell.overlay import Overlay
from qshell.permissions.confine import JailLauncher, confinement
from qshell.sandbox import probe
from qshell.sandbox.outside import remove_tree
from qshell.sandbox.standins import plant
from qshell.tools.paths import PathResolver

COMMAND = ["bash", "-c", "true"]


def timed(run: Callable[[], None]) -> float:
    started = time.perf_counter()
    run()
    return time.perf_counter() - started


def runner(argv: list[str], environ: dict[str, str], cwd: Path) -> Callable[[], None]:
    def run() -> None:
        subprocess.run(argv, env=environ, cwd=cwd, check=True, stdin=subprocess.DEVNULL)

    return run


def jailed(launcher: JailLauncher, root: Path) -> Callable[[], None]:
    def run() -> None:
        runner(*launcher.wrap(COMMAND, dict(os.environ)), root)()

    return run


def on_overlay(launcher: JailLauncher, overlay: Overlay, root: Path) -> Callable[[], None]:
    def run() -> None:
        overlay.record_path(root, stop=lambda: False)
        jailed = launcher.on_overlay((overlay.upper,), overlay.directory / SCRATCH_DIR)
        assert jailed.mount is not None
        remove_tree(jailed.mount.upper)
        jailed.mount.prepare()
        masked = launcher.masked()
        planted = plant(jailed.mount.upper, root, masked, jailed.mount.layers)
        jailed = jailed.hiding(planted.paths)
        mount = jailed.mount
        assert mount is not None
        argv, environ = jailed.wrap(COMMAND, dict(os.environ))
        try:
            runner(argv, environ, root)()
        finally:
            mount.clean()
        why = refusal("", mount, planted, launcher, masked)
        assert why is None, why
        planted.remove()
        remove_tree(mount.upper)
        mount.discard_outside()

    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--files", type=int, default=200)
    parser.add_argument("--secrets", type=int, default=0, help="secret files (`.env`s) in it")
    parser.add_argument(
        "--load", type=int, default=0, help="CPU-bound processes, every other round"
    )
    options = parser.parse_args()
    found = probe()
    with tempfile.TemporaryDirectory(prefix="qshell-bench-") as temp:
        root = Path(temp) / "project"
        for i in range(options.files):
            path = root / f"pkg{i % 10}" / f"m{i}.py"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(f"x = {i}\n")
        for i in range(options.secrets):
            (root / f"pkg{i % 10}" / (".env" if i < 10 else f"k{i}.env")).write_text("K=v\n")
        paths = PathResolver(root)
        confined = confinement(
            SandboxMode.AUTO, paths, os.environ, None, settings=SandboxSettings()
        )
        ways: dict[str, Callable[[], None]] = {"plain": runner(COMMAND, dict(os.environ), root)}
        launcher = confined.launcher
        if launcher is not None:
            ways["jail"] = jailed(launcher, root)
        overlay = Overlay.create(root, paths, base_dir=Path(temp) / "base")
        if launcher is not None and launcher.commands is not None:
            ways["kernel overlay"] = on_overlay(launcher, overlay, root)
        times = measured(ways, options.runs, options.load)
        overlay.discard()
    print(f"sandbox: {found.mode}{f' ({found.reason})' if found.reason else ''}")
    for phase, by_way in times.items():
        plain = statistics.median(by_way["plain"])
        for name, seconds in by_way.items():
            extra = statistics.median(seconds) - plain
            more = "" if name == "plain" else f", +{extra * 1000:.1f} ms"
            print(report(f"{name} ({phase})", seconds) + more)
    if "loaded" in times:
        slowdowns(times)


def measured(
    ways: dict[str, Callable[[], None]], runs: int, load: int
) -> dict[str, dict[str, list[float]]]:
    """Each way's times, quiet (and loaded, every other round, with `load` processes)."""
    phases = ("quiet", "loaded") if load else ("quiet",)
    times: dict[str, dict[str, list[float]]] = {p: {n: [] for n in ways} for p in phases}
    burners = Load(load, running=False)
    try:
        for _ in range(runs):
            for phase in phases:
                (burners.on if phase == "loaded" else burners.off)()
                for name, run in ways.items():
                    times[phase][name].append(timed(run))
    finally:
        burners.close()
    return times


def slowdowns(times: dict[str, dict[str, list[float]]]) -> None:
    """Each way's slowdown under load (loaded median − quiet median) against plain's."""
    quiet, loaded = times["quiet"], times["loaded"]

    def slowdown(name: str) -> float:
        return statistics.median(loaded[name]) - statistics.median(quiet[name])

    plain = slowdown("plain")
    for name in quiet:
        if name != "plain":
            ratio = slowdown(name) / plain if plain > 0 else float("inf")
            print(
                f"{name}: slowed by {slowdown(name) * 1000:.1f} ms under load, plain by "
                f"{plain * 1000:.1f} ms: {ratio:.1f}x (goal for the kernel overlay: <= 3x)"
            )


if __name__ == "__main__":
    main()
