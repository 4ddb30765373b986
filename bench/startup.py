"""Start-up of qshell, wall time and CPU: `--version`, the first REPL prompt, ACP's `initialize`.

Run: `python -m bench.startup [--runs 15] [--load N]`. Interleaved in one run, so machine
noise hits each alike:
- `python -c pass` and `qshell --version` (wall time; goal ≤ 150 ms);
- the REPL: `qshell` in a pseudo-terminal (tests/e2e/pty.py, against the scripted server)
  until its first prompt is active (prompt_toolkit turns bracketed paste on), and the CPU
  the process used until then (utime + stime of it and the children it waited for, from
  /proc; goal ≤ 0.5 s);
- ACP: `qshell --acp` until it answers `initialize` on stdout, wall and CPU (goal ≤ 0.5 s).
Every run shares one home, so the sandbox probe's cache is warm as it is for a user after
the first start. `--load N` keeps N CPU-bound processes running meanwhile (a loaded
machine). Prints median and p99 of each. Asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from bench.load import loaded
from bench.stats import report
from tests.e2e.pty import spawn_qshell
from tests.fakes.llm_server import ScriptedLLMServer

ROOT = Path(__file__).resolve().parents[1]
INITIALIZE = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": 1}}


def cpu_s(pid: int) -> float:
    """The CPU seconds process `pid` and its waited-for children used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return sum(int(value) for value in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def version_s(command: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def first_prompt(server: ScriptedLLMServer, home: Path) -> tuple[float, float]:
    """Wall seconds and CPU seconds of `qshell` until its first prompt is active."""
    start = time.perf_counter()
    term = spawn_qshell(server, home / "project", extra_env=user_dirs(home))
    try:
        term.wait_prompt()
        return time.perf_counter() - start, cpu_s(term.child.pid)
    finally:
        term.child.close(force=True)


def acp_initialize(home: Path) -> tuple[float, float]:
    """Wall seconds and CPU seconds of `qshell --acp` until it answers `initialize`."""
    environ = {**os.environ, **user_dirs(home), "OPENAI_API_KEY": "k", "OPENAI_MODEL": "m1"}
    start = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "qshell", "--acp"],
        cwd=home / "project",
        env=environ,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    try:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write((json.dumps(INITIALIZE) + "\n").encode())
        proc.stdin.flush()
        answer = proc.stdout.readline()
        wall, cpu = time.perf_counter() - start, cpu_s(proc.pid)
        if b'"result"' not in answer:
            raise SystemExit(f"qshell --acp did not answer initialize: {answer[:200]!r}")
        return wall, cpu
    finally:
        proc.kill()
        proc.wait()


def user_dirs(home: Path) -> dict[str, str]:
    return {
        "HOME": str(home),
        "QSHELL_HOME": str(home / "qshell"),
        "TMPDIR": str(home / "tmp"),
        "XDG_CONFIG_HOME": str(home / "config"),
        "XDG_CACHE_HOME": str(home / "cache"),
        "XDG_DATA_HOME": str(home / "data"),
        "XDG_STATE_HOME": str(home / "state"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--load", type=int, default=0, help="CPU-bound processes meanwhile")
    args = parser.parse_args()
    script = shutil.which("qshell")
    version = [script, "--version"] if script else [sys.executable, "-m", "qshell", "--version"]
    home = Path(tempfile.mkdtemp(prefix="qshell-bench-startup-"))
    for directory in ("project", "tmp"):
        (home / directory).mkdir()
    server = ScriptedLLMServer(api_key="k").start()
    walls: dict[str, list[float]] = {}
    cpus: dict[str, list[float]] = {}
    probes: dict[str, Callable[[], tuple[float, float]]] = {
        "python -c pass": lambda: (version_s([sys.executable, "-c", "pass"]), 0.0),
        "qshell --version": lambda: (version_s(version), 0.0),
        "REPL first prompt": lambda: first_prompt(server, home),
        "ACP initialize": lambda: acp_initialize(home),
    }
    try:
        with loaded(args.load):
            for probe in probes.values():
                probe()  # warm the page cache and the sandbox probe's cache
            for _ in range(args.runs):
                for name, probe in probes.items():
                    wall, cpu = probe()
                    walls.setdefault(name, []).append(wall)
                    cpus.setdefault(name, []).append(cpu)
    finally:
        server.stop()
        shutil.rmtree(home, ignore_errors=True)
    print(f"start-up, {args.runs} runs interleaved, {args.load} CPU-bound processes meanwhile")
    for name in probes:
        print(report(f"{name} (wall)", walls[name]))
        if name.startswith(("REPL", "ACP")):
            print(report(f"{name} (CPU)", cpus[name]) + "   goal: median ≤ 500 ms")
    base = sorted(walls["python -c pass"])[len(walls["python -c pass"]) // 2]
    mine = sorted(walls["qshell --version"])[len(walls["qshell --version"]) // 2]
    print(f"qshell --version over the interpreter (medians): {(mine - base) * 1000:.1f} ms")


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    main()
