"""Time to answer "run the tests", with speculation of commands in the sandbox and without.

Run: `python -m bench.run_the_tests [--runs 5] [--think 6]`. A user in a pseudo-terminal
(pexpect drives the real `qshell` REPL in yolo mode, so the live runs ask nothing either) asks a first question about a
small project with a real pytest suite, reads the answer for `--think` seconds while the
ghost text "run the tests" is shown, then accepts it with Tab, Enter; the time from Enter
to the answer ("all tests pass") on screen is measured. The scripted server answers over
real HTTP at 0.8 s to the first token, then 5 ms a token; the model's turn is a real
`python -m pytest -q` (a shell call) and then its answer. Three set-ups, interleaved run by
run so machine noise hits all alike: (commands) speculation runs the command in the sandbox
on a kernel overlay (`sandbox.speculateCommands`, the default); (boundary) speculation
stops at the command, as before the sandbox, and the accepted turn goes on live from
there; (off) no speculation. Prints median and p99 of each and the ratios. It asserts
nothing about time; it stops with an error when an answer does not arrive, and with the
probe's reason where the machine cannot speculate commands.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from bench.stats import report
from qshell.followup.suggestion import SUGGESTION_MARKER
from qshell.sandbox import probe
from tests.e2e.pty import spawn_qshell
from tests.fakes.llm_server import (
    Latency,
    Reply,
    ScriptedLLMServer,
    ToolCallSpec,
    always,
    has_tool_result,
    last_user_text_contains,
)

SETUPS = {
    "commands": {"QSHELL_SPECULATION": "1"},
    "boundary": {"QSHELL_SPECULATION": "1", "QSHELL_SANDBOX__SPECULATE_COMMANDS": "false"},
    "off": {"QSHELL_SPECULATION": "0"},
}
LATENCY = Latency(ttft_s=0.8, tokens_per_s=200)
TESTS = 40
WAIT_S = 60.0


def make_project(root: Path) -> None:
    root.mkdir()
    (root / "app.py").write_text("def add(a, b):\n    return a + b\n")
    cases = "\n".join(
        f"def test_add_{n}():\n    assert add({n}, 1) == {n + 1}\n" for n in range(TESTS)
    )
    (root / "test_app.py").write_text("from app import add\n\n\n" + cases)
    (root / "notes.txt").write_text("the project adds numbers\n")


def script(server: ScriptedLLMServer) -> None:
    server.add_rule(last_user_text_contains(SUGGESTION_MARKER), Reply.text("run the tests"))
    pytest_call = ToolCallSpec("shell", {"command": f"{sys.executable} -m pytest -q"})
    server.add_rule(has_tool_result(f"{TESTS} passed"), Reply.text("all tests pass"))
    server.add_rule(last_user_text_contains("run the tests"), Reply.tool_calls([pytest_call]))
    server.add_rule(has_tool_result(), Reply.text("it adds numbers"))
    server.add_rule(always(), Reply.tool_calls([ToolCallSpec("read_file", {"path": "notes.txt"})]))


def one_run(setup: str, think_s: float) -> float:
    """Seconds from Enter on the accepted suggestion to the answer on screen."""
    with tempfile.TemporaryDirectory(prefix="qshell-bench-tests-") as tmp:
        project = Path(tmp) / "proj"
        make_project(project)
        server = ScriptedLLMServer(latency=LATENCY).start()
        try:
            script(server)
            env = {"QSHELL_SUGGESTIONS": "1", **SETUPS[setup]}
            child = spawn_qshell(server, project, "--approval-mode", "yolo", extra_env=env)
            child.expect("for commands, Ctrl-D to exit", timeout_s=WAIT_S)
            child.wait_prompt()
            child.submit("what does this project do?")
            child.expect("it adds numbers", timeout_s=WAIT_S)
            child.expect("run the tests", timeout_s=WAIT_S)
            time.sleep(think_s)
            child.send("\t")
            started = time.monotonic()
            child.submit("")
            child.expect("all tests pass", timeout_s=WAIT_S)
            elapsed = time.monotonic() - started
            child.wait_prompt()
            child.send("\x04")
            child.finish()
            return elapsed
        finally:
            server.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--think", type=float, default=6.0)
    args = parser.parse_args()
    found = probe()
    if not found.overlay:
        print(f"commands cannot be speculated here: {found.reason}", file=sys.stderr)
        return 1
    if shutil.which("bwrap") is None:
        print("bwrap is not installed", file=sys.stderr)
        return 1
    times: dict[str, list[float]] = {name: [] for name in SETUPS}
    for _ in range(args.runs):
        for name in SETUPS:
            times[name].append(one_run(name, args.think))
    print(f'"run the tests" ({TESTS} real tests), {args.runs} runs each, think {args.think} s')
    for name, seconds in times.items():
        print("  " + report(f"{name:>8}", seconds))
    base = statistics.median(times["commands"])
    for name in ("boundary", "off"):
        ratio = statistics.median(times[name]) / base
        print(f"  {name} / commands: {ratio:.1f}× (median)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
