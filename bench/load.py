"""A CPU-bound background load for the benches that measure on a busy machine (`--load N`).

`Load(n)` starts `n` processes that spin at normal priority; `off()` pauses them (SIGSTOP)
and `on()` resumes them, so a bench can interleave quiet and loaded rounds
(bench/sandbox_overhead.py); `running=False` starts them paused. Used as a context manager
it kills them at the end of the block (`loaded(n)`: busy for the whole block, as
bench/startup.py, bench/yielding.py and bench/session.py run). One thread: the caller's.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from types import TracebackType

SPIN = "while True: pass"


class Load:
    """`processes` CPU-bound processes, running between `on()` and `off()`."""

    def __init__(self, processes: int, *, running: bool = True) -> None:
        self.burners = [subprocess.Popen([sys.executable, "-c", SPIN]) for _ in range(processes)]
        if not running:
            self.off()

    def on(self) -> None:
        for burner in self.burners:
            os.kill(burner.pid, signal.SIGCONT)

    def off(self) -> None:
        for burner in self.burners:
            os.kill(burner.pid, signal.SIGSTOP)

    def close(self) -> None:
        for burner in self.burners:
            burner.kill()
            burner.wait()

    def __enter__(self) -> Load:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.close()


def loaded(processes: int) -> Load:
    """`processes` CPU-bound processes running for as long as the `with` block does."""
    return Load(processes)


def load_average() -> str:
    """The 1, 5 and 15 minute load averages (/proc/loadavg), or why they are unknown."""
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "unknown (no /proc/loadavg)"
