"""What suggestions and speculation cost in billed tokens, in their best case (every one right).

Run: `python -m bench.cost [--think 2.0] [--requests]` (about 60 s). The same scripted
8-turn REPL session is played twice by a user in a pseudo-terminal (pexpect drives the real
`qshell` console script — REPL, line loop, Followup, controller, Speculator and Conversation
as shipped) against the scripted server over real HTTP, in auto-edit mode on a fresh copy of
a tiny project: (on) with suggestions and speculation on, the user reads each answer for
`--think` seconds, waits for the ghost text if it is not there yet, and accepts it with Tab,
Enter — the prediction is right every time; (off) with both off, the user reads as long and
types the same prompt. Turn 1 is typed in both runs (no suggestion before it); after turn 8
the user reads, then leaves with Ctrl-D. Each turn is a tool round (ls, read_file, grep or
edit) then an answer; replies stream at 0.35-0.45 s to the first token, then 4 ms a token.
The scripted server models a provider's prompt cache (tests/fakes/prompt_cache.py: the
longest common prefix with any earlier prompt of the model, prompts only, never replies) and
counts every request it received, including the ones still streaming at exit, and the output
tokens it actually sent before a stream closed. Billed tokens = uncached input × 1 + cached
prefix × 0.1 + output × 1. Requests are told apart from outside: suggestions by the
prediction marker; a request for a prompt that arrived once the user had submitted that
prompt is a main turn, one before (or for a prompt never submitted) a speculation. Prints
both runs' bills, request counts and billed tokens by kind, the time to leave,
Enter-to-prompt times, the ratio on/off against the goal ≤ 1.3, and with `--requests` every
request (a stream still running when the user left says how long after Ctrl-D it ended).
It asserts nothing about time; it stops with an error when a prediction is not shown or an
answer does not arrive.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from bench.repl_session import (
    CACHED_WEIGHT,
    OUTPUT_WEIGHT,
    UNCACHED_WEIGHT,
    Run,
    bill,
    describe,
    leave,
    listing,
    play_turn,
    settle,
    start,
)
from bench.scripted import after_call, asked_to_predict, asks, filler, suggestion_after
from qshell.agent.prediction import CLOSE, OPEN
from tests.fakes.llm_server import Latency, Reply, ScriptedLLMServer, ToolCallSpec

GOAL_RATIO = 1.3
# each run: its name, suggestions and speculation on, the prediction folded into the answer
PLAYS = (
    ("on (the answer predicts)", True, True),
    ("on (suggestion requests)", True, False),
    ("off", False, False),
)
TOKENS_PER_S = 250.0  # 4 ms a token after the first
TOOL_LATENCY = Latency(ttft_s=0.35, tokens_per_s=TOKENS_PER_S)
ANSWER_LATENCY = Latency(ttft_s=0.45, tokens_per_s=TOKENS_PER_S)
SUGGESTION_LATENCY = Latency(ttft_s=0.4, tokens_per_s=TOKENS_PER_S)
ANSWER_TOKENS = 150
FINAL_ANSWER_TOKENS = 1500  # the answer to the last suggestion, still streaming at exit


@dataclass(frozen=True)
class Turn:
    prompt: str
    call: ToolCallSpec
    mark: str  # the answer's first words, to wait for on the screen


def edit_args(path: str, old: str, new: str) -> dict[str, str]:
    return {"path": path, "old_string": old, "new_string": new}


TURNS = (
    Turn("what is in this project", ToolCallSpec("ls", {}), "Four files make up"),
    Turn("show me hello.py", ToolCallSpec("read_file", {"path": "hello.py"}), "It defines greet"),
    Turn("where is greet used", ToolCallSpec("grep", {"pattern": "greet"}), "Two places call"),
    Turn(
        "add a docstring to greet",
        ToolCallSpec(
            "edit",
            edit_args("hello.py", "-> str:\n", '-> str:\n    """Say hello."""\n'),
        ),
        "The docstring is in",
    ),
    Turn("now show me app.py", ToolCallSpec("read_file", {"path": "app.py"}), "The app loops"),
    Turn(
        "make app.py shout the greeting",
        ToolCallSpec(
            "edit", edit_args("app.py", "print(greet(user))", "print(greet(user).upper())")
        ),
        "It shouts now",
    ),
    Turn(
        "check the test still matches",
        ToolCallSpec("read_file", {"path": "tests/test_hello.py"}),
        "The test still holds",
    ),
    Turn(
        "mention greet in the README",
        ToolCallSpec("edit", edit_args("README.md", "benchmark.\n", "benchmark.\nSee greet.\n")),
        "The README names",
    ),
)
LAST_SUGGESTION = "explain the whole project in detail"  # predicted after turn 8, never sent
LAST_MARK = "Here is the whole project"
PROMPTS = frozenset({t.prompt for t in TURNS} | {LAST_SUGGESTION})


def script(server: ScriptedLLMServer) -> None:
    """Answers by content: a suggestion names the prompt after the newest one it saw."""
    prompts = [t.prompt for t in TURNS]
    nexts = dict(zip(prompts, [*prompts[1:], LAST_SUGGESTION], strict=True))
    for prompt in prompts:
        reply = Reply.text(nexts[prompt], latency=SUGGESTION_LATENCY)
        server.add_rule(suggestion_after(prompt, frozenset(nexts)), reply)
    for index, turn in enumerate(TURNS):
        call = ToolCallSpec(turn.call.name, turn.call.arguments, id=f"call{index}")
        answer = filler(turn.mark, ANSWER_TOKENS)
        # a model that does as its system prompt asks: the answer ends with the prediction
        trailer = f"\n\n{OPEN}{nexts[turn.prompt]}{CLOSE}"
        folding = Reply.text(answer + trailer, latency=ANSWER_LATENCY)
        server.add_rule(after_call(call.id or "") & asked_to_predict, folding)
        server.add_rule(after_call(call.id or ""), Reply.text(answer, latency=ANSWER_LATENCY))
        server.add_rule(asks(turn.prompt), Reply.tool_calls([call], latency=TOOL_LATENCY))
    final = Reply.text(filler(LAST_MARK, FINAL_ANSWER_TOKENS), latency=ANSWER_LATENCY)
    server.add_rule(asks(LAST_SUGGESTION), final)


def play(
    server: ScriptedLLMServer, work: Path, name: str, *, on: bool, fold: bool, think_s: float
) -> Run:
    root = work / name.split()[0] / ("fold" if fold else "fork")
    child = start(server, root, on=on, fold=fold)
    run = Run(name, PROMPTS)
    for index, turn in enumerate(TURNS):
        ghost = turn.prompt if on and index > 0 else None
        play_turn(child, run, turn.prompt, turn.mark, think_s=think_s if index else 0, ghost=ghost)
    leave(child, run, think_s=think_s)
    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--think", type=float, default=2.0, help="seconds the user reads")
    parser.add_argument("--requests", action="store_true", help="list every request")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="qshell-bench-cost-"))
    results = []
    try:
        for name, on, fold in PLAYS:
            # a server, and so a prompt cache, of its own: each run starts cold
            with ScriptedLLMServer(prompt_cache=True) as server:
                script(server)
                run = play(server, work, name, on=on, fold=fold, think_s=args.think)
                requests = settle(server)
                results.append((run, bill(requests, run), listing(requests, run)))
            for violation in server.violations:
                print(f"server violation ({run.name}): {violation}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(
        f"8 turns, user reads {args.think:.1f} s; billed = uncached input × {UNCACHED_WEIGHT} "
        f"+ cached prefix × {CACHED_WEIGHT} + output × {OUTPUT_WEIGHT}"
    )
    for run, total, lines in results:
        print("\n".join(describe(run, total) + (lines if args.requests else [])))
    off_bill = results[-1][1]
    for run, total, _ in results[:-1]:
        ratio = total.billed / off_bill.billed
        verdict = "met" if ratio <= GOAL_RATIO else "missed"
        print(f"{run.name} / off: {ratio:.2f}× (goal ≤ {GOAL_RATIO}×: {verdict})")


if __name__ == "__main__":
    main()
