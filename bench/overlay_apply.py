"""Speculation overlay costs: applying 1,000 files, and a first write against a plain copy.

Run: `python -m bench.overlay_apply [--files 1000] [--runs 7] [--dir PATH]`. Prints the
median and p99 time of `Overlay.apply()` for `--files` overlay files of 4 KiB (half edits of
existing files, half new files, in 20 directories; goal ≤ 1 s on the 2-core machine: one
syncfs each side of the commit point, not one fsync a file), and the per-file cost of
the first copy-on-write `write_bytes` of an existing file next to `shutil.copyfile` of the
same file, measured interleaved in one run (goal: ratio of medians ≤ 2×). `--dir` picks the
filesystem (default: the temp dir, where the overlay lives too).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from bench.stats import percentile, report
from qshell.overlay import Overlay
from qshell.tools.paths import PathResolver

FILE_BYTES = 4096
DIRECTORIES = 20
APPLY_GOAL_S = 1.0
COW_GOAL_RATIO = 2.0


def make_project(root: Path, count: int) -> list[Path]:
    """`count` files of FILE_BYTES spread over DIRECTORIES directories."""
    paths = []
    for i in range(count):
        path = root / f"pkg{i % DIRECTORIES:02d}" / f"module_{i:05d}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(os.urandom(FILE_BYTES))
        paths.append(path)
    return paths


def time_apply(workdir: Path, files: int) -> float:
    """One apply of `files` overlay files (half edits, half new); returns seconds."""
    root = workdir / "project"
    existing = make_project(root, files // 2)
    with Overlay.create(root, PathResolver(root), base_dir=workdir / "base") as overlay:
        for path in existing:
            overlay.view.write_bytes(path, os.urandom(FILE_BYTES))
        for i in range(files - len(existing)):
            new = root / f"new{i % DIRECTORIES:02d}" / f"added_{i:05d}.py"
            overlay.view.write_bytes(new, os.urandom(FILE_BYTES))
        start = time.perf_counter()
        overlay.apply()
        elapsed = time.perf_counter() - start
    shutil.rmtree(root)
    return elapsed


def time_first_writes(workdir: Path, files: int) -> tuple[list[float], list[float]]:
    """Per file: the overlay's first write of it, then shutil.copyfile of it, interleaved."""
    root = workdir / "project"
    paths = make_project(root, files)
    copies = workdir / "copies"
    for directory in {p.parent for p in paths}:
        (copies / directory.name).mkdir(parents=True, exist_ok=True)
    cow: list[float] = []
    plain: list[float] = []
    data = os.urandom(FILE_BYTES)
    with Overlay.create(root, PathResolver(root), base_dir=workdir / "base") as overlay:
        for path in paths:
            start = time.perf_counter()
            overlay.view.write_bytes(path, data)
            middle = time.perf_counter()
            shutil.copyfile(path, copies / path.parent.name / path.name)
            cow.append(middle - start)
            plain.append(time.perf_counter() - middle)
    shutil.rmtree(root)
    shutil.rmtree(copies)
    return cow, plain


def micro_report(label: str, seconds: list[float]) -> str:
    us = [s * 1e6 for s in seconds]
    return (
        f"{label}: median {statistics.median(us):.0f} µs, p99 {percentile(us, 0.99):.0f} µs, "
        f"min {min(us):.0f} µs, n={len(us)}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--files", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--dir", type=Path, default=None)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=args.dir) as temp:
        workdir = Path(temp)
        time_apply(workdir, min(args.files, 100))  # warm imports and the page cache
        applies = [time_apply(workdir, args.files) for _ in range(args.runs)]
        print(report(f"apply {args.files} files of {FILE_BYTES} B", applies))
        median = statistics.median(applies)
        verdict = "meets" if median <= APPLY_GOAL_S else "misses"
        print(f"  {verdict} the goal of ≤ {APPLY_GOAL_S:.1f} s (median {median:.3f} s)")
        cow: list[float] = []
        plain: list[float] = []
        for _ in range(args.runs):
            one_cow, one_plain = time_first_writes(workdir, args.files)
            cow += one_cow
            plain += one_plain
        print(micro_report("first copy-on-write write_bytes, per file", cow))
        print(micro_report("shutil.copyfile of the same file, per file", plain))
        ratio = statistics.median(cow) / statistics.median(plain)
        verdict = "meets" if ratio <= COW_GOAL_RATIO else "misses"
        print(f"  copy-on-write / copyfile (medians): {ratio:.2f}x, {verdict} ≤ {COW_GOAL_RATIO}x")


if __name__ == "__main__":
    main()
