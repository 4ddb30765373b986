"""What the sandbox costs a command qshell runs on its own: the same commands through the
shell tool, jailed and not, interleaved in one run.

Run: `python -m bench.sandbox [--reps 40]`. On a throwaway copy-sized project (200 files,
a `.env` to mask) it runs each command of COMMANDS `--reps` times through `ShellTool` with
`proven_context` — once with the session's sandbox (permissions/confine.py: bubblewrap, masks,
limits) and once with none, alternating so machine noise hits both alike — and prints the
median and p99 of each, the per-command overhead (median jailed − median plain) and the
ratio, plus the cost of finding the secrets to mask on a cold and a warm `SecretIndex`.
It asserts nothing; it stops with the probe's reason where the machine cannot sandbox.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from bench.stats import report
from qshell.config import SandboxMode
from qshell.permissions.confine import confinement
from qshell.permissions.policy import proven_context
from qshell.sandbox import SecretIndex, probe
from qshell.tools.base import ToolContext
from qshell.tools.paths import PathResolver
from qshell.tools.shell import ShellArgs, ShellTool

COMMANDS = ("true", "cat README.md", "grep -rn needle src", "git status --short")
FILES = 200


def make_project(root: Path) -> None:
    (root / "src").mkdir(parents=True)
    for n in range(FILES):
        (root / "src" / f"m{n}.py").write_text(f"# module {n}\nneedle = {n}\n")
    (root / "README.md").write_text("a project\n")
    (root / ".env").write_text("TOKEN=secret\n")
    os.system(f"git -C {root} init -q && git -C {root} add -A && git -C {root} commit -qm x")


def timed(ctx: ToolContext, command: str) -> float:
    started = time.perf_counter()
    ShellTool().run(ShellArgs(command=command), ctx)
    return time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=40)
    args = parser.parse_args()
    found = probe(None)
    if not found.jail:
        print(f"no sandbox here: {found.reason}", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory(prefix="qshell-bench-sandbox-") as tmp:
        root = Path(tmp) / "proj"
        make_project(root)
        paths = PathResolver(root, home=Path(tmp) / "home")
        confined = confinement(SandboxMode.ON, paths, os.environ, None)
        jailed = proven_context(ToolContext(paths=paths, sandbox=confined.launcher))
        plain = replace(jailed, launcher=None)
        print(f"sandbox: {found.mode}; {args.reps} runs of each command, interleaved")
        for command in COMMANDS:
            inside: list[float] = []
            outside: list[float] = []
            for _ in range(args.reps):
                inside.append(timed(jailed, command))
                outside.append(timed(plain, command))
            extra = (statistics.median(inside) - statistics.median(outside)) * 1000
            ratio = statistics.median(inside) / statistics.median(outside)
            print(f"  {command}")
            print("    " + report("sandboxed", inside))
            print("    " + report("plain    ", outside))
            print(f"    overhead: {extra:+.1f} ms per command (median), {ratio:.2f}×")
        cold: list[float] = []
        warm: list[float] = []
        for _ in range(10):
            index = SecretIndex(root, paths.is_secret)
            cold.append(_time(index.paths))
            warm.append(_time(index.paths))
        print("  secrets to mask (" + f"{FILES} files):")
        print("    " + report("cold index", cold))
        print("    " + report("warm index", warm))
    return 0


def _time(work: object) -> float:
    assert callable(work)
    started = time.perf_counter()
    work()
    return time.perf_counter() - started


if __name__ == "__main__":
    raise SystemExit(main())
