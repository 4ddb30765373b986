"""The latency-plan bench, run as a user runs it (on a shrunk clock), prints what it promises.

`python -m bench.latency_plan` stops with an error when a turn does not end the way its
scenario says (with D1 the skill's list and one model request, else the summary after
three), so a clean exit with every configuration's row means the whole path — plugin
tool, allowlist, named-pipe shell step, driver and renderer — still works. Timings are
printed, never asserted.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CONFIGURATIONS = ("all off", "D1 on", "D3 on", "D4 on", "all on")


def test_latency_plan_prints_every_configuration_and_the_goal(tmp_path: Path) -> None:
    env = {**os.environ, "TMPDIR": str(tmp_path), "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-m", "bench.latency_plan", "--runs", "1", "--scale", "0.05"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.splitlines()
    for name in CONFIGURATIONS:
        rows = [line for line in lines if line.startswith(name)]
        assert rows and "p99" in rows[0], f"no row for {name}:\n{done.stdout}"
    assert "goal: can type <" in done.stdout
    assert "server violation" not in done.stdout
