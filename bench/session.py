"""A 20-turn REPL session in which 30 % of the suggestions are right, with and without them,
and with confidence gating off and on.

Run: `python -m bench.session [--think 2.0] [--right 0.3] [--seed 11] [--min-confidence C]
[--requests]` (about 6 minutes). The same scripted 20-turn session is played four times by
a user in a pseudo-terminal (bench/repl_session.py: pexpect drives the real `qshell` console
script — REPL, line loop, Followup, controller, Speculator and Conversation as shipped)
against the scripted server over real HTTP with its prompt cache modelled, in auto-edit
mode, on a fresh copy of a small project: (on) suggestions and speculation on, confidence
gating off (`speculation.gating: false`), qshell's default settings otherwise (the answer
itself ends with the predicted next prompt); (gated) the same with gating on, as by default
(followup/gating.py: a suggestion is speculated only when the chance this user accepts it —
the model's confidence, corrected by their outcomes at about that confidence — reaches
`speculation.minConfidence`; `--min-confidence` sets it, else the default); (gated, well
calibrated) the same with confidences that tell right from wrong better; (off) both off.
Every prediction line carries a seeded (`--seed`) confidence, drawn uniformly from one range
for a right prediction and another for a wrong one (CALIBRATIONS): partly calibrated, right
0.40–0.95 and wrong 0.10–0.70, so some wrong guesses outrank some right ones; well
calibrated, right 0.55–0.95 and wrong 0.05–0.60. The confidences are printed; (on) ignores
them, so it plays as before gating existed. Every run starts with no telemetry: the gate
learns this user's outcomes as the session goes.
Each turn is a tool round (ls, read_file, grep, glob or edit; 0.35 s to the first token)
then an answer of 150 tokens (0.45 s, then 4 ms a token). In (on) the model's prediction
after each turn is the user's next prompt for a seeded, printed choice of `--right` of the
19 suggestions (turns 2-20); for the others it guesses another plausible prompt, which
qshell speculates on all the same. The user reads each answer for `--think` seconds, waits
for the ghost text, and then accepts it with Tab, Enter when it is their next prompt, or
types their own prompt over it; in (off) they read as long and type every prompt. Turn 1
is typed in both runs; after turn 20 the user reads, then leaves with Ctrl-D. Enter to
answer = from Enter until the whole answer is on the screen and the prompt is back
(`time.monotonic`, around pexpect's reads). Prints the list of right turns, mean, median
and p99 Enter-to-answer time of each run, each run's bill and requests by kind, the ratios of
(on) to (off) against Roadmap 5's goals (means ≤ 0.70, billed ≤ 1.3×; billed = uncached
input × 1 + cached prefix × 0.1 + output × 1, every request the server received, including
what streamed after Ctrl-D), then (on) and both (gated) runs side by side against (off) with
Roadmap 13's goals (billed ≤ 1.15×, mean Enter to answer ≤ 0.75×), and with `--requests` every
request. It asserts nothing about time; it stops with an error when a ghost text or an
answer does not appear.
"""

from __future__ import annotations

import argparse
import random
import shutil
import statistics
import tempfile
from dataclasses import dataclass
from pathlib import Path

from bench.cost import ANSWER_LATENCY, ANSWER_TOKENS, TOOL_LATENCY, edit_args
from bench.repl_session import (
    CACHED_WEIGHT,
    OUTPUT_WEIGHT,
    PROJECT_FILES,
    UNCACHED_WEIGHT,
    Bill,
    Run,
    bill,
    billed,
    describe,
    kind,
    last_prompt,
    leave,
    listing,
    play_turn,
    settle,
    start,
)
from bench.scripted import after_call, asked_to_predict, asks, filler
from bench.stats import percentile
from qshell.agent.prediction import CLOSE, OPEN
from qshell.followup.suggestion import SUGGESTION_MARKER
from tests.fakes.llm_server import RecordedRequest, Reply, ScriptedLLMServer, ToolCallSpec

GOAL_TIME_RATIO = 0.70
GOAL_BILL_RATIO = 1.3
GOAL_GATED_TIME_RATIO = 0.75  # Roadmap 13, gating on, against the no-suggestion session
GOAL_GATED_BILL_RATIO = 1.15
SEED = 11
# where a right prediction's confidence is drawn from, and a wrong one's, by how well the
# model's confidence tells them apart
CALIBRATIONS = {
    "partly": ((0.40, 0.95), (0.10, 0.70)),  # overlapping over 0.40–0.70
    "well": ((0.55, 0.95), (0.05, 0.60)),  # overlapping over 0.55–0.60 only
}
GATED = {"QSHELL_SPECULATION__GATING": "true"}
RUNS = {  # name → (suggestions and speculation on, more settings, confidences)
    "on": (True, {"QSHELL_SPECULATION__GATING": "false"}, "partly"),
    "gated": (True, GATED, "partly"),
    "gated, well calibrated": (True, dict(GATED), "well"),
    "off": (False, {}, "partly"),
}


@dataclass(frozen=True)
class Turn:
    prompt: str
    call: ToolCallSpec
    mark: str  # the answer's first words, to wait for on the screen
    guess: str  # the wrong prediction of this prompt (what the model guesses instead)


def read(path: str) -> ToolCallSpec:
    return ToolCallSpec("read_file", {"path": path})


def grep(pattern: str) -> ToolCallSpec:
    return ToolCallSpec("grep", {"pattern": pattern})


def edit(path: str, old: str, new: str) -> ToolCallSpec:
    return ToolCallSpec("edit", edit_args(path, old, new))


FILES = {
    **PROJECT_FILES,
    "util.py": "def slugify(text):\n    return text.lower().replace(' ', '-')\n\n\n"
    "def shout(text: str) -> str:\n    return text.upper()  # TODO: keep punctuation\n",
    "config.py": "import os\n\nDEFAULT_NAME = 'world'  # TODO: read a file too\n\n\n"
    "def name() -> str:\n    return os.environ.get('NAME', DEFAULT_NAME)  # TODO: validate\n",
}
TURNS = (
    Turn("what is in this project", ToolCallSpec("ls", {}), "Six files make up", ""),
    Turn("show me hello.py", read("hello.py"), "It defines greet", "show me app.py first"),
    Turn("where is greet used", grep("greet"), "Two places call", "explain greet in detail"),
    Turn(
        "add a docstring to greet",
        edit("hello.py", "-> str:\n", '-> str:\n    """Say hello."""\n'),
        "The docstring is in",
        "rename greet to welcome",
    ),
    Turn("now show me app.py", read("app.py"), "The app loops", "show me the test of greet"),
    Turn(
        "make app.py shout the greeting",
        edit("app.py", "print(greet(user))", "print(greet(user).upper())"),
        "It shouts now",
        "explain how app.py loads its users",
    ),
    Turn(
        "check the test still matches",
        read("tests/test_hello.py"),
        "The test still holds",
        "does anything else print greetings",
    ),
    Turn(
        "mention greet in the README",
        edit("README.md", "benchmark.\n", "benchmark.\nSee greet.\n"),
        "The README names",
        "show me the README",
    ),
    Turn(
        "what does util.py offer", read("util.py"), "util.py has two helpers", "what else is there"
    ),
    Turn("find every TODO", grep("TODO"), "Three TODOs are left", "is shout used anywhere"),
    Turn(
        "list the python files",
        ToolCallSpec("glob", {"pattern": "**/*.py"}),
        "There are five Python files",
        "fix the TODO in util.py",
    ),
    Turn("show me config.py", read("config.py"), "config.py reads one setting", "show me util.py"),
    Turn(
        "rename DEFAULT_NAME to FALLBACK_NAME in config.py",
        edit("config.py", "DEFAULT_NAME = 'world'", "FALLBACK_NAME = 'world'"),
        "The constant is renamed",
        "explain the NAME variable",
    ),
    Turn(
        "where is DEFAULT_NAME still used",
        grep("DEFAULT_NAME"),
        "One use is left",
        "show me config.py again",
    ),
    Turn(
        "add a type hint to slugify in util.py",
        edit("util.py", "def slugify(text):", "def slugify(text: str) -> str:"),
        "slugify is typed now",
        "where is DEFAULT_NAME defined",
    ),
    Turn(
        "show me the test again",
        read("tests/test_hello.py"),
        "The test checks one name",
        "explain what slugify does",
    ),
    Turn(
        "add a test for bob",
        edit(
            "tests/test_hello.py",
            "'hello, ada'\n",
            "'hello, ada'\n    assert greet('bob') == 'hello, bob'\n",
        ),
        "A second assertion checks",
        "what does the test import",
    ),
    Turn("what changed in hello.py", read("hello.py"), "hello.py now has", "is the test complete"),
    Turn("search for print calls", grep("print"), "One print call", "show me hello.py again"),
    Turn(
        "summarise the project in two lines",
        read("README.md"),
        "The project greets users",
        "where else could greet be used",
    ),
)
LAST_GUESS = "what should I do next"  # predicted after turn 20, never sent
GUESS_CALL = read("README.md")


def right_turns(fraction: float, seed: int) -> list[int]:
    """Which turns (numbered from 1; turn 1 has no suggestion) the suggestion gets right."""
    suggested = range(2, len(TURNS) + 1)
    return sorted(random.Random(seed).sample(suggested, round(fraction * len(suggested))))


def predictions(right: list[int]) -> list[str]:
    """What the answer of each turn predicts: the next prompt when it is right, else a guess."""
    nexts = [TURNS[n].prompt if n + 1 in right else TURNS[n].guess for n in range(1, len(TURNS))]
    return [*nexts, LAST_GUESS]


def confidences(right: list[int], seed: int, calibration: str = "partly") -> list[float]:
    """The confidence each turn's prediction line gives (seeded): from the calibration's
    right range when the prediction is right, else from its wrong range."""
    rng = random.Random(seed + 1)
    right_span, wrong_span = CALIBRATIONS[calibration]
    spans = [right_span if n + 1 in right else wrong_span for n in range(1, len(TURNS))]
    return [round(rng.uniform(*span), 2) for span in [*spans, wrong_span]]


def script(server: ScriptedLLMServer, right: list[int], sure: list[float]) -> None:
    """Every prompt a request may carry — the turns' and the wrong guesses — answered by
    content: a tool round, then an answer that ends with the prediction, and its confidence
    `sure`, when asked for one."""
    guesses = [t.guess for t in TURNS[1:]] + [LAST_GUESS]
    nexts = zip(TURNS, predictions(right), sure, strict=True)
    for index, (turn, nxt, confidence) in enumerate(nexts):
        answer(server, f"t{index}", turn.prompt, turn.call, turn.mark, nxt, confidence)
    for index, guess in enumerate(guesses):
        answer(server, f"g{index}", guess, GUESS_CALL, f"About {guess}", "", None)
    # a suggestion request only when an answer carried no prediction: none is expected
    server.add_rule(lambda r: SUGGESTION_MARKER in r.last_user_text, Reply.text(""))


def answer(
    server: ScriptedLLMServer,
    name: str,
    prompt: str,
    call: ToolCallSpec,
    mark: str,
    nxt: str,
    confidence: float | None,
) -> None:
    called = ToolCallSpec(call.name, call.arguments, id=f"call_{name}")
    text = filler(mark, ANSWER_TOKENS)
    tag = OPEN if confidence is None else f'<next-prompt confidence="{confidence:.2f}">'
    folding = Reply.text(f"{text}\n\n{tag}{nxt}{CLOSE}", latency=ANSWER_LATENCY)
    server.add_rule(after_call(called.id or "") & asked_to_predict, folding)
    server.add_rule(after_call(called.id or ""), Reply.text(text, latency=ANSWER_LATENCY))
    server.add_rule(asks(prompt), Reply.tool_calls([called], latency=TOOL_LATENCY))


def play(
    server: ScriptedLLMServer, work: Path, name: str, *, right: list[int], think_s: float
) -> Run:
    on, settings, _ = RUNS[name]
    child = start(server, work / name, on=on, fold=True, files=FILES, settings=settings)
    prompts = frozenset({t.prompt for t in TURNS} | {t.guess for t in TURNS[1:]} | {LAST_GUESS})
    run = Run(f"suggestions + speculation {name}", prompts)
    shown = predictions(right)
    for index, turn in enumerate(TURNS):
        ghost = shown[index - 1] if on and index > 0 else None
        play_turn(child, run, turn.prompt, turn.mark, think_s=think_s if index else 0, ghost=ghost)
    leave(child, run, think_s=think_s)
    return run


def wasted(requests: list[RecordedRequest], run: Run) -> str:
    """The billed tokens of the speculations of prompts the user never sent (wrong guesses)."""
    spent = [
        billed(r.cached.uncached_tokens, r.cached.cached_tokens, r.sent_tokens)
        for r in requests
        if r.cached is not None
        and kind(r, run) == "speculation"
        and last_prompt(r, run.prompts) not in run.submitted
    ]
    return (
        f"  of which speculations of wrong guesses: {len(spent)} requests, {sum(spent):,.0f} billed"
    )


def times(label: str, seconds: list[float]) -> str:
    return (
        f"{label}: mean {statistics.mean(seconds):.3f} s, median {statistics.median(seconds):.3f} s,"
        f" p99 {percentile(seconds, 0.99):.3f} s, n={len(seconds)}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--think", type=float, default=2.0, help="seconds the user reads")
    parser.add_argument("--right", type=float, default=0.3, help="share of right suggestions")
    parser.add_argument("--seed", type=int, default=SEED, help="chooses the right turns")
    parser.add_argument("--requests", action="store_true", help="list every request")
    parser.add_argument(
        "--min-confidence", type=float, help="speculation.minConfidence of the gated run"
    )
    args = parser.parse_args()
    if args.min_confidence is not None:
        for name in ("gated", "gated, well calibrated"):
            RUNS[name][1]["QSHELL_SPECULATION__MIN_CONFIDENCE"] = str(args.min_confidence)
    right = right_turns(args.right, args.seed)
    sure = {name: confidences(right, args.seed, name) for name in CALIBRATIONS}
    work = Path(tempfile.mkdtemp(prefix="qshell-bench-session-"))
    played: list[tuple[Run, list[RecordedRequest]]] = []
    try:
        for name in RUNS:
            # a server, and so a prompt cache, of its own: each run starts cold
            with ScriptedLLMServer(prompt_cache=True) as server:
                script(server, right, sure[RUNS[name][2]])
                run = play(server, work, name, right=right, think_s=args.think)
                played.append((run, settle(server)))
            for violation in server.violations:
                print(f"server violation ({run.name}): {violation}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(
        f"{len(TURNS)} turns, user reads {args.think:.1f} s; the suggestion is the next prompt "
        f"before turns {right} ({len(right)} of {len(TURNS) - 1}, seed {args.seed})"
    )
    for calibration, drawn in sure.items():
        print(
            f"confidences ({calibration} calibrated) of the predictions before turns 2-20: "
            + ", ".join(
                f"{n + 2}:{c:.2f}{'*' if n + 2 in right else ''}" for n, c in enumerate(drawn[:-1])
            )
            + " (* right)"
        )
    print("\n".join(summary(played, right, listed=args.requests)))


def summary(
    played: list[tuple[Run, list[RecordedRequest]]], right: list[int], *, listed: bool
) -> list[str]:
    """Both runs' bills and times, then the two ratios against their goals."""
    lines: list[str] = []
    bills = []
    for index, (run, requests) in enumerate(played):
        total = bill(requests, run)
        bills.append(total)
        lines += describe(run, total)
        lines += [] if index == len(played) - 1 else [wasted(requests, run)]
        lines += listing(requests, run) if listed else []
    (on_run, _), *_, (off_run, _) = played
    on_s, off_s = on_run.enter_to_prompt_s, off_run.enter_to_prompt_s
    lines += [times("Enter to answer, on ", on_s), times("Enter to answer, off", off_s)]
    for label, is_right in (("right turns", True), ("other turns", False)):
        chosen = [i for i in range(len(TURNS)) if (i + 1 in right) == is_right]
        lines.append(
            f"  {label}: mean on {statistics.mean(on_s[i] for i in chosen):.3f} s, "
            f"off {statistics.mean(off_s[i] for i in chosen):.3f} s"
        )
    time_ratio = statistics.mean(on_s) / statistics.mean(off_s)
    bill_ratio = bills[0].billed / bills[-1].billed
    met = "met" if time_ratio <= GOAL_TIME_RATIO else "missed"
    lines.append(
        f"Enter to answer on / off (means): {time_ratio:.2f} (goal ≤ {GOAL_TIME_RATIO}: {met})"
    )
    met = "met" if bill_ratio <= GOAL_BILL_RATIO else "missed"
    lines.append(
        f"billed tokens on / off: {bill_ratio:.2f}× (goal ≤ {GOAL_BILL_RATIO}×: {met}; billed = "
        f"uncached × {UNCACHED_WEIGHT} + cached × {CACHED_WEIGHT} + output × {OUTPUT_WEIGHT})"
    )
    return lines + side_by_side(played, bills)


def side_by_side(played: list[tuple[Run, list[RecordedRequest]]], bills: list[Bill]) -> list[str]:
    """Gating off and on (with partly and well calibrated confidences) against the
    no-suggestion run, with Roadmap 13's goals."""
    off_s = statistics.mean(played[-1][0].enter_to_prompt_s)
    lines = [
        "against no suggestions   gating off   gating on: partly   well calibrated   goal",
    ]
    ran = played[:-1]
    times_ = [statistics.mean(run.enter_to_prompt_s) / off_s for run, _ in ran]
    billed_ = [total.billed / bills[-1].billed for total in bills[:-1]]
    started = [sum(kind(r, run) == "speculation" for r in reqs) for run, reqs in ran]
    for label, (a, b, c), goal in (
        ("billed tokens        ", billed_, GOAL_GATED_BILL_RATIO),
        ("mean Enter to answer ", times_, GOAL_GATED_TIME_RATIO),
    ):
        met = ", ".join("met" if x <= goal else "missed" for x in (b, c))
        lines.append(f"  {label} {a:10.2f}× {b:17.2f}× {c:16.2f}×   ≤ {goal}× ({met} gated)")
    lines.append(f"  speculation requests  {started[0]:10d} {started[1]:18d} {started[2]:17d}")
    return lines


if __name__ == "__main__":
    main()
