"""Startup time of `qshell --version`, side by side with a bare `python -c pass`.

Run: `python -m bench.startup [--runs 30]`. Prints median and p99 of each and their ratio,
measured interleaved in one run so machine noise hits both alike. Goal: ≤ 150 ms.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import time

from bench.stats import report


def time_command(command: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=30)
    args = parser.parse_args()
    script = shutil.which("qshell") or ""
    commands = {
        "python -c pass": [sys.executable, "-c", "pass"],
        "qshell --version": [script, "--version"]
        if script
        else [sys.executable, "-m", "qshell", "--version"],
        "python -m qshell --version": [sys.executable, "-m", "qshell", "--version"],
    }
    samples: dict[str, list[float]] = {name: [] for name in commands}
    for command in commands.values():
        time_command(command)  # warm the page cache
    for _ in range(args.runs):
        for name, command in commands.items():
            samples[name].append(time_command(command))
    for name, values in samples.items():
        print(report(name, values))
    base = sorted(samples["python -c pass"])[len(samples["python -c pass"]) // 2]
    mine = sorted(samples["qshell --version"])[len(samples["qshell --version"]) // 2]
    print(f"qshell --version / python -c pass (medians): {mine / base:.2f}x")
    print(f"qshell's own cost over the interpreter (medians): {(mine - base) * 1000:.1f} ms")


if __name__ == "__main__":
    main()
