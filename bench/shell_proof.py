"""Cost of the shell read-only proof per command, and its scores on the labelled corpus.

Run: `python -m bench.shell_proof [--reps 50] [--corpus PATH]`. Checks every command of
dev.jsonl `--reps` times with a warm parser and prints the median and p99 µs per command
(goal: median ≤ 100 µs), then the share of `ro` commands allowed and the `rw` commands leaked.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

from bench.stats import percentile
from qshell.shellproof import check

DEFAULT_CORPUS = Path(__file__).resolve().parents[2] / "shared" / "shell-safety" / "dev.jsonl"
GOAL_MEDIAN_US = 100.0


def load(path: Path) -> list[dict[str, str]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def time_checks(commands: list[str], reps: int) -> list[float]:
    """Seconds per single `check` call, over `reps` passes through all commands."""
    for command in commands:
        check(command)  # warm the per-thread parser and the allocator
    samples: list[float] = []
    clock = time.perf_counter
    for _ in range(reps):
        for command in commands:
            start = clock()
            check(command)
            samples.append(clock() - start)
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--reps", type=int, default=50)
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    args = parser.parse_args()
    rows = load(args.corpus)
    commands = [row["command"] for row in rows]
    us = [s * 1e6 for s in time_checks(commands, args.reps)]
    median = statistics.median(us)
    print(
        f"shell proof: median {median:.1f} µs/command, p90 {percentile(us, 0.90):.1f} µs, "
        f"p99 {percentile(us, 0.99):.1f} µs, n={len(us)} "
        f"({len(commands)} commands × {args.reps}); goal median ≤ {GOAL_MEDIAN_US:.0f} µs: "
        f"{'met' if median <= GOAL_MEDIAN_US else 'MISSED'}"
    )
    ro = [row["command"] for row in rows if row["label"] == "ro"]
    rw = [row["command"] for row in rows if row["label"] == "rw"]
    allowed = sum(check(command).read_only for command in ro)
    leaked = [command for command in rw if check(command).read_only]
    print(
        f"corpus {args.corpus.name}: ro allowed {allowed}/{len(ro)} "
        f"({allowed / max(len(ro), 1):.1%}), rw leaked {len(leaked)}/{len(rw)}"
    )
    for command in leaked:
        print(f"  leaked: {command!r}")


if __name__ == "__main__":
    main()
