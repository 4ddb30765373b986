"""The embedded model on this machine: server start, first answer, cached-prefix answer.

Run: `python -m bench.local_model [--runs 5]`. Each run starts a fresh llama.cpp server
child with the bundled Qwen2.5-Coder-0.5B-Instruct model (the one-time join of its parts is
done before the runs, and timed separately), opens a session with `sessions.open_session`
as `qshell -p` does (compact system prompt and tool descriptions, round cap, toolless last
round) and
times, side by side in the same run: the server start (spawn → answering), the first
turn's answer (`Say hello.`, a cold prompt cache), and a second turn with a different
question (its prompt shares the first turn's prefix). Needs the
`local` extra. Prints median and p99 of each, and the cold/warm ratio.
"""

from __future__ import annotations

import argparse
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
    args = parser.parse_args()
    if not local_available():
        raise SystemExit("the `local` extra is not installed: pip install -e '.[local]'")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        project = root / "project"
        project.mkdir()
        (project / "hello.py").write_text("print('hi')\n")
        model = LocalModel.choose(model_path="", cache_dir=root / "cache", n_ctx=8192)
        join_started = time.perf_counter()
        first_start, _, _ = one_run(model, project, root)  # joins the model's parts once
        print(f"first start including the one-time join of the model's parts: {first_start:.2f} s")
        print(f"(that whole first run took {time.perf_counter() - join_started:.2f} s)")
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
