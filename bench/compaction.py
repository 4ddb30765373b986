"""A 60-turn session past the context window, its summary written ahead and not.

Run: `python -m bench.compaction [--turns 60] [--think 2.0] [--window 8000]`. Two
conversations as the REPL opens them (compose's sessions, the scripted server over real
HTTP with a realistic pace: 0.35 s to the first token, 200 tokens a second) play the same
session turn by turn, interleaved: each answer is about 400 tokens, so the history passes
the compaction threshold (0.8 of `--window`, qshell's default) every dozen turns, and a summary
is about twice an answer (as a thorough one is); the user
reads each answer for `--think` seconds. One writes the summary ahead (agent/summary_ahead.py,
as the REPL and ACP do); the other compacts at the start of the turn that needs it, as
before. Prints per-turn time (median, p99, the slowest) of each, the compacting turns'
times against a normal turn's, and the largest request each sent (bounded by the window).
Asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from bench.speculation import render
from bench.stats import report
from qshell import sessions
from qshell.agent.conversation import Conversation
from qshell.agent.events import HistoryCompacted, TurnFinished
from qshell.agent.session import Session, SessionRequest
from qshell.config import load_settings
from tests.fakes.llm_server import (
    Latency,
    Reply,
    ScriptedLLMServer,
    always,
    last_user_text_contains,
)

ANSWER = " ".join(["the next step of the plan"] * 80)  # about 400 tokens
PACE = Latency(ttft_s=0.35, tokens_per_s=200)


def conversation(server: ScriptedLLMServer, work: Path, ahead: bool, window: int) -> Conversation:
    root = work / ("ahead" if ahead else "inline")
    home = root / "home"
    (root / "project").mkdir(parents=True)
    environ = {
        "HOME": str(home),
        "QSHELL_HOME": str(home / "qshell"),
        "TMPDIR": str(work),
        "QSHELL_MAX_RETRIES": "0",
        "QSHELL_SUGGESTIONS": "0",
        "QSHELL_SPECULATION": "0",
        "QSHELL_CONTEXT_WINDOW": str(window),
        "OPENAI_BASE_URL": server.openai_base_url,
        "OPENAI_API_KEY": "bench",
        "OPENAI_MODEL": "m1",
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
    }
    settings = load_settings(project_root=root / "project", environ=environ)

    def open_session(request: SessionRequest) -> Session:
        return sessions.open_session(settings, request, root=root / "project", environ=environ)

    return Conversation(open_session, SessionRequest(summary_ahead=ahead))


def turn(chat: Conversation, prompt: str) -> tuple[float, bool]:
    """Seconds from the prompt to the whole answer, and whether the turn compacted."""
    started = time.monotonic()
    last, seen = render(chat.turn(prompt), chat.cancel_token)
    if not isinstance(last, TurnFinished):
        raise SystemExit(f"a turn did not finish: {last!r}")
    return time.monotonic() - started, any(isinstance(e, HistoryCompacted) for e in seen)


def played(
    chats: dict[str, Conversation], turns: int, think: float
) -> Iterator[tuple[str, float, bool]]:
    for n in range(turns):
        for name, chat in chats.items():
            seconds, compacted = turn(chat, f"step {n}: go on with the plan")
            yield name, seconds, compacted
        time.sleep(think)  # the user reads (both conversations' background work meanwhile)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=60)
    parser.add_argument("--think", type=float, default=2.0, help="seconds the user reads")
    parser.add_argument("--window", type=int, default=8000, help="context window, tokens")
    options = parser.parse_args()
    server = ScriptedLLMServer(api_key="bench", latency=PACE).start()
    server.add_rule(last_user_text_contains("summary"), Reply.text("SUMMARY: " + ANSWER * 2))
    server.add_rule(always(), Reply.text(ANSWER))
    work = Path(tempfile.mkdtemp(prefix="qshell-bench-compaction-"))
    chats = {"ahead": conversation(server, work, True, options.window)}
    chats["inline"] = conversation(server, work, False, options.window)
    times: dict[str, list[float]] = {name: [] for name in chats}
    compacting: dict[str, list[float]] = {name: [] for name in chats}
    try:
        for name, seconds, compacted in played(chats, options.turns, options.think):
            (compacting if compacted else times)[name].append(seconds)
    finally:
        for chat in chats.values():
            chat.close()
        server.stop()
    largest = max(len(r.raw) for r in server.requests) // 4
    print(f"{options.turns} turns, a {options.window}-token window, {options.think} s read")
    for name in chats:
        normal = statistics.median(times[name])
        print(report(f"{name}: a normal turn", times[name]))
        if compacting[name]:
            worst = max(compacting[name])
            print(
                report(f"{name}: a compacting turn", compacting[name])
                + f", {worst / normal:.2f}x a normal turn at worst (goal <= 1.0x for ahead)"
            )
    print(f"largest request: about {largest} tokens (window {options.window})")


if __name__ == "__main__":
    main()
