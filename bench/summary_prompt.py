"""When the user can type again after a tool call, with the summary in background (D3) off and on.

Run: `python -m bench.summary_prompt [--runs 3] [--summary-s 3.0]`. Starts the real
`python -m qshell` REPL in a pseudo-terminal (TERM=xterm-256color, a private HOME) against
the scripted server on 127.0.0.1, once with `summarizeInBackground` off and once on. Each
run submits "read hello.txt": the first round asks for `read_file` at once (its result is
terminal), and the summary round then streams for about `--summary-s` seconds (a first
token after 0.3 s, the rest paced). It times, from the Enter, the moment a prompt is active
again (prompt_toolkit turns bracketed paste on for it: T_userIdle) and the moment the
summary's last word is on screen (the turn's total). Prints the medians side by side. It
does not assert a goal; the seed's expectation is that T_userIdle drops by about the
summary round's length while the total stays the same.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from tests.e2e.pty import PROMPT_ACTIVE, PROMPT_CLOSED, spawn_qshell
from tests.fakes.llm_server import (
    Latency,
    Reply,
    ScriptedLLMServer,
    ToolCallSpec,
    has_tool_result,
    last_user_text_contains,
)
from tests.fakes.wire import TOKEN_CHARS

END_WORD = "ENDOFSUMMARY"
FIRST_TOKEN_S = 0.3


def script(server: ScriptedLLMServer, summary_s: float) -> None:
    words = " ".join(f"word{n}" for n in range(60))
    text = f"{words} {END_WORD}"
    tokens = len(text) / TOKEN_CHARS
    pace = Latency(ttft_s=FIRST_TOKEN_S, tokens_per_s=tokens / max(summary_s - FIRST_TOKEN_S, 0.1))
    server.add_rule(has_tool_result(), Reply.text(text, latency=pace))
    server.add_rule(
        last_user_text_contains("read"),
        Reply.tool_calls([ToolCallSpec("read_file", {"path": "hello.txt"})]),
    )


def one_run(root: Path, summary_s: float, *, background: bool) -> tuple[float, float]:
    """(T_userIdle, total) in seconds from the Enter, for one turn."""
    with ScriptedLLMServer() as server:
        script(server, summary_s)
        home = root.parent / "home"
        env = {
            "HOME": str(home),
            "QSHELL_HOME": str(home / "qshell"),
            **{
                f"XDG_{d}_HOME": str(home / d.lower()) for d in ("CONFIG", "STATE", "CACHE", "DATA")
            },
            "QSHELL_SUMMARIZE_IN_BACKGROUND": "1" if background else "0",
        }
        child = spawn_qshell(server, root, extra_env=env)
        child.expect("for commands, Ctrl-D to exit")
        child.wait_prompt()
        started = time.monotonic()
        child.send("read hello.txt\r")
        child.wait_for(PROMPT_CLOSED)
        child.wait_for(PROMPT_ACTIVE, timeout_s=60)
        idle = time.monotonic() - started
        if END_WORD not in child.text:  # D3 off: it came before the prompt
            child.expect(END_WORD, timeout_s=60)
        total = time.monotonic() - started
        child.send("\x04")
        child.finish()
    return idle, total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--summary-s", type=float, default=3.0)
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "proj"
        root.mkdir()
        (root / "hello.txt").write_text("hello world\n")
        for background in (False, True):
            runs = [one_run(root, args.summary_s, background=background) for _ in range(args.runs)]
            idle = statistics.median(r[0] for r in runs)
            total = statistics.median(r[1] for r in runs)
            rows.append(("on" if background else "off", idle, total))
    print(f"summary round ≈ {args.summary_s:.1f} s, {args.runs} runs each, medians")
    print(f"{'D3':<4} {'T_userIdle':>11} {'total':>8}")
    for name, idle, total in rows:
        print(f"{name:<4} {idle:>10.2f}s {total:>7.2f}s")


if __name__ == "__main__":
    main()
