"""The embedded model on this machine: server start, first answer, cached-prefix answer.

Run: `python -m bench.local_model [--runs 5] [--build]`. Each run starts a fresh
`llama_cpp.server` child with the bundled SmolLM2-135M model (the Q8_0 conversion is
done once, before the runs, and timed separately), opens a session with `sessions.open_session`
as `qshell -p` does (compact system prompt and tool descriptions, round cap, toolless last
round) and
times, side by side in the same run: the server start (spawn → answering), the first
turn's answer (`Say hello.`, a cold prompt cache), and a second turn with a different
question (its prompt shares the first turn's prefix). `--build` also times the one-time
source build of llama-cpp-python (`pip wheel --no-cache-dir`, several minutes). Needs the
`local` extra. Prints median and p99 of each, and the cold/warm ratio.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.stats import report
from qshell.agent.events import TurnFailed
from qshell.agent.loop import run_turn
from qshell.agent.session import SessionRequest
from qshell.cancel import CancelToken
from qshell.config import ApprovalMode, ProviderName, Settings
from qshell.llm.local import LocalModel, LocalServer, local_available
from qshell.llm.local_provider import LocalProvider
from qshell.permissions.runner import MainToolRunner
from qshell.sessions import open_session


def time_build() -> float:
    """Seconds for a from-source wheel build of llama-cpp-python[server], cache bypassed."""
    with tempfile.TemporaryDirectory() as out:
        env = {"CMAKE_ARGS": "-DGGML_NATIVE=OFF -DLLAVA_BUILD=OFF"}
        started = time.perf_counter()
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "wheel",
                "-q",
                "--no-cache-dir",
                "--no-deps",
                "-w",
                out,
                "llama-cpp-python",
            ],
            check=True,
            env={**os.environ, **env},
        )
        return time.perf_counter() - started


def one_run(model: LocalModel, project: Path, log_dir: Path) -> tuple[float, float, float]:
    started = time.perf_counter()
    server = LocalServer(model, log_dir=log_dir)
    server.start()
    start_s = time.perf_counter() - started
    provider = LocalProvider(server)
    try:
        session = open_session(
            Settings(provider=ProviderName.LOCAL),
            SessionRequest(),
            root=project,
            environ={"QSHELL_HOME": str(log_dir / "home")},
            provider=provider,
        )
        runner = MainToolRunner(ApprovalMode.DEFAULT, interactive=False)
        times = []
        for prompt in ("Say hello.", "Now say goodbye."):
            began = time.perf_counter()
            events = list(run_turn(session, prompt, runner, CancelToken()))
            if isinstance(events[-1], TurnFailed):
                raise SystemExit(f"turn failed: {events[-1].message}")
            times.append(time.perf_counter() - began)
        return start_s, times[0], times[1]
    finally:
        provider.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--build", action="store_true", help="also time the source build")
    args = parser.parse_args()
    if not local_available():
        raise SystemExit("the `local` extra is not installed: pip install -e '.[local]'")
    if args.build:
        print(f"llama-cpp-python source build (pip wheel, 2 cores): {time_build():.0f} s")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        project = root / "project"
        project.mkdir()
        (project / "hello.py").write_text("print('hi')\n")
        model = LocalModel.choose(model_path="", cache_dir=root / "cache", n_ctx=8192)
        convert_started = time.perf_counter()
        first_start, _, _ = one_run(model, project, root)  # converts to Q8_0 once
        print(f"first start including the one-time Q8_0 conversion: {first_start:.2f} s")
        print(f"(that whole first run took {time.perf_counter() - convert_started:.2f} s)")
        starts, firsts, warms = [], [], []
        for _ in range(args.runs):
            start_s, first_s, warm_s = one_run(model, project, root)
            starts.append(start_s)
            firsts.append(first_s)
            warms.append(warm_s)
    print(report("server start (spawn → answering)", starts))
    print(report("first answer (cold prompt cache)", firsts))
    print(report("next answer (shared prefix)", warms))
    cold = sorted(firsts)[len(firsts) // 2]
    warm = sorted(warms)[len(warms) // 2]
    print(f"shared-prefix / cold (medians): {warm / cold:.2f}")


if __name__ == "__main__":
    main()
