"""Small helpers shared by the benchmarks: percentiles and a one-line report."""

from __future__ import annotations

import statistics
from collections.abc import Sequence


def percentile(values: Sequence[float], fraction: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(fraction * (len(ordered) - 1))))
    return ordered[index]


def report(label: str, seconds: Sequence[float]) -> str:
    ms = [s * 1000 for s in seconds]
    return (
        f"{label}: median {statistics.median(ms):.1f} ms, p99 {percentile(ms, 0.99):.1f} ms, "
        f"min {min(ms):.1f} ms, n={len(ms)}"
    )
