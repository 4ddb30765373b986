"""A 20-turn REPL session with suggestions and speculation on and off, played in alternation.

Run: `python -m bench.session [--models folds,plain] [--right 0.3,0.0] [--think-min 2]
[--think-max 4] [--seed 11] [--calibration partly|well] [--load N] [--settings KEY=VALUE]…
[--requests]` (about 100 s a pair; the four default pairs, about 7 minutes). For each kind
of model (bench/session_turns.py: "folds" ends each answer with its guess of the next
prompt and a partly calibrated confidence; "plain" gives neither, so qshell asks for the
guess in a separate suggestion request) and each share of right guesses (`--right`), one
pair is played: the same scripted session on two `qshell` console scripts at once in
pseudo-terminals (bench/repl_session.py: REPL, line loop, Followup, controller, Speculator
and Conversation as shipped), each against a scripted server of its own over real HTTP
(its own prompt cache and bill), in auto-edit mode on a fresh copy of a small project:
(on) suggestions and speculation on at qshell's default settings — confidence gating on —
with `suggestions.fold` off for the plain model, and whatever `--settings` adds (e.g.
`QSHELL_SPECULATION__GATING=false`, the old ungated run; `QSHELL_SPECULATION__MIN_CONFIDENCE`);
(off) both off. The two are played in alternation, never two turns at once, so that the
machine's load falls on both alike: each user reads every answer for a seeded time drawn
uniformly from `--think-min`–`--think-max` seconds (the same draws on both sides), from
when their prompt came back, and the next turn goes to whichever user is done reading
first (at turn 1, on first in odd pairs, off first in even ones); a user whose reading ends
while the other side's turn is still playing reads on until it ends (the actual reading
times are printed). Done reading, the user looks at the screen once (tests/e2e/pty.py
`Term.ghost`, no waiting): if the ghost text there is their next prompt, they accept it
(Tab, Enter); otherwise — no ghost yet, or a wrong one — they type their own prompt and
press Enter. Turn 1 is typed; after turn 20 the user reads, then leaves with Ctrl-D.
First words = from Enter until the answer's first words are on the screen; whole answer =
from Enter until the prompt is back (`time.monotonic`, around pexpect's reads). Billed
tokens = uncached input × 1 + cached prefix × 0.1 + output × 1, every request each server
received, what streamed after Ctrl-D included; requests are told apart from outside
(bench/repl_session.py `kind`). `--load N` keeps N CPU-bound processes busy for the whole
run (bench/load.py), for the figure on a loaded machine. Prints, for each pair, on and off
side by side: first words and whole answer (mean, median, p99, ratio of the means), the
typed turns' whole answer (Roadmap 17 item 4's goal ≤ 1.02×), billed tokens and requests
by kind, the speculations run and those of wrong guesses, what the ghost text was when the
user finished reading, and the reading times; then every pair against Roadmap 17 item 5's
goals (at 30 % right, folds ≤ 1.15× billed and ≤ 0.75× Enter to answer, plain ≤ 1.5× and
≤ 0.80×; at 0 % right ≤ 1.15× billed for both), each "met" or "missed"; with `--requests`,
every request. It asserts nothing about time; it stops with an error when an answer does
not appear.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import tempfile
import time
from collections import Counter
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

from bench.load import loaded
from bench.repl_session import (
    CACHED_WEIGHT,
    KINDS,
    OUTPUT_WEIGHT,
    UNCACHED_WEIGHT,
    Run,
    bill,
    billed,
    enter,
    kind,
    leave,
    listing,
    settle,
    start,
)
from bench.scripted import last_prompt
from bench.session_turns import FILES, MODELS, PROMPTS, TURNS, confidences, right_turns, script
from bench.stats import percentile
from tests.e2e.pty import Term
from tests.fakes.llm_server import RecordedRequest, ScriptedLLMServer

SEED = 11
SIDES = ("on", "off")
# Roadmap 17 item 5, on / off, by kind of model and share of right guesses: billed tokens,
# and Enter to answer (the whole answer, means; None: no goal)
GOALS: dict[tuple[str, float], tuple[float, float | None]] = {
    ("folds", 0.3): (1.15, 0.75),
    ("plain", 0.3): (1.5, 0.80),
    ("folds", 0.0): (1.15, None),
    ("plain", 0.0): (1.15, None),
}
GOAL_TYPED = 1.02  # Roadmap 17 item 4: a typed turn with suggestions on, against off


@dataclass(frozen=True)
class Pair:
    """What one pair plays: the kind of model, the share of right guesses and which turns
    they are, the confidences of the guesses (folds), and which side plays turn 1 first."""

    model: str
    share: float
    right: list[int]
    sure: list[float]
    on_first: bool


@dataclass
class Side:
    """One qshell of a pair and where its user is in the session."""

    name: str
    child: Term
    run: Run
    turn: int = 0  # the next turn to play (len(TURNS): leave)
    back_at: float = 0.0  # when the prompt came back
    reads: list[float] = field(default_factory=list)  # the user's, before turns 2-20 and Ctrl-D
    seen: Counter[str] = field(default_factory=Counter)  # the ghost when done reading
    accepted: list[int] = field(default_factory=list)  # the turns (from 0) taken by Tab
    left: bool = False
    requests: list[RecordedRequest] = field(default_factory=list)


def sight(shown: str, prompt: str) -> str:
    return "none" if not shown else "right" if shown == prompt else "wrong"


def step(side: Side) -> None:
    """The user of `side` is done reading: play the next turn, or press Ctrl-D after the last."""
    index = side.turn
    side.turn += 1
    if index:
        side.reads.append(time.monotonic() - side.back_at)
    if index == len(TURNS):
        leave(side.child, side.run, think_s=0)  # the other side waits for the exit
        side.left = True
        return
    turn = TURNS[index]
    shown = side.child.ghost()
    if index:
        side.seen[sight(shown, turn.prompt)] += 1
    if shown == turn.prompt:
        side.accepted.append(index)
    enter(side.child, side.run, turn.prompt, turn.mark, accept=shown == turn.prompt)
    side.back_at = time.monotonic()


def alternate(sides: list[Side], reads: list[float]) -> None:
    """Play the session on every side, one turn at a time: the next goes to the side whose
    user is done reading first (`reads[i]`, the seconds they read before turn i; ties go in
    the order of `sides`)."""
    now = time.monotonic()
    for side in sides:
        side.back_at = now
    while pending := [side for side in sides if not side.left]:
        side = min(pending, key=lambda s: s.back_at + reads[s.turn])
        time.sleep(max(0.0, side.back_at + reads[side.turn] - time.monotonic()))
        step(side)


def play(pair: Pair, root: Path, reads: list[float], settings: dict[str, str]) -> list[Side]:
    """Both sides of `pair`, each with its server, played in alternation to the end; their
    requests once every one has ended. The sides come back in SIDES order."""
    with ExitStack() as stack:
        sides = []
        for name in SIDES:
            # a server, and so a prompt cache and a bill, of its own: each side starts cold
            server = stack.enter_context(ScriptedLLMServer(prompt_cache=True))
            script(server, pair.model, pair.right, pair.sure)
            on = name == "on"
            fold = pair.model == "folds"
            extra = settings if on else {}
            child = start(server, root / name, on=on, fold=fold, files=FILES, settings=extra)
            sides.append((Side(name, child, Run(name, PROMPTS)), server))
        order = [side for side, _ in sides]
        alternate(order if pair.on_first else order[::-1], reads)
        for side, server in sides:
            side.requests = settle(server)
            for violation in server.violations:
                print(f"server violation ({pair.model}, {side.name}): {violation}")
    return [side for side, _ in sides]


def met(ratio: float, goal: float | None) -> str:
    if goal is None:
        return f"{ratio:.2f}× (no goal)"
    return f"{ratio:.2f}× (goal ≤ {goal}×: {'met' if ratio <= goal else 'missed'})"


def rows(label: str, on: list[float], off: list[float]) -> list[str]:
    """Mean, median and p99 of on and off side by side, and the ratio of the means."""
    ratio = statistics.mean(on) / statistics.mean(off)
    figures = (
        ("mean", statistics.mean, f"   {ratio:.2f}×"),
        ("median", statistics.median, ""),
        ("p99", lambda s: percentile(s, 0.99), ""),
    )
    return [
        f"  {label if i == 0 else '':<13} {name:<6} {how(on):8.3f} s {how(off):8.3f} s{more}"
        for i, (name, how, more) in enumerate(figures)
    ]


def speculations(side: Side) -> tuple[int, int, float]:
    """The speculated turns that started (their first rounds), those of prompts the user
    never sent (wrong guesses), and the billed tokens of all the requests of the latter."""
    run = side.run
    started = wrong = 0
    wasted = 0.0
    for request in side.requests:
        if request.cached is None or kind(request, run) != "speculation":
            continue
        guessed = last_prompt(request, run.prompts) not in run.submitted
        first = bool(request.turns) and request.turns[-1].role == "user"
        started += first
        wrong += first and guessed
        if guessed:
            cached = request.cached
            wasted += billed(cached.uncached_tokens, cached.cached_tokens, request.sent_tokens)
    return started, wrong, wasted


def compared(pair: Pair, on: Side, off: Side, *, requests: bool) -> tuple[list[str], str]:
    """One pair, on and off side by side; and its line against the goals."""
    label = f"{pair.model}, {pair.share * 100:g} % right"
    on_s, off_s = on.run.enter_to_prompt_s, off.run.enter_to_prompt_s
    typed = [i for i in range(len(TURNS)) if i not in on.accepted]
    on_bill, off_bill = bill(on.requests, on.run), bill(off.requests, off.run)
    started, wrong, wasted = speculations(on)
    bill_goal, time_goal = GOALS.get((pair.model, pair.share), (None, None))
    bill_ratio = on_bill.billed / off_bill.billed
    time_ratio = statistics.mean(on_s) / statistics.mean(off_s)
    typed_on, typed_off = (statistics.mean(times[i] for i in typed) for times in (on_s, off_s))
    kinds = " · ".join(
        f"{k} {on_bill.kinds[k]} / {off_bill.kinds[k]} "
        f"({on_bill.by_kind[k]:,} / {off_bill.by_kind[k]:,} billed)"
        for k in KINDS
    )
    seen = ", ".join(f"{what} {on.seen[what]}" for what in ("right", "wrong", "none"))
    lines = [
        f"{label}: the model {MODELS[pair.model]}; "
        f"{'on' if pair.on_first else 'off'} plays turn 1 first",
        f"  the guess is the next prompt before turns {pair.right} "
        f"({len(pair.right)} of {len(TURNS) - 1})",
        *([confidence_line(pair)] if pair.model == "folds" else []),
        f"  {'':<13} {'':<6} {'on':>10} {'off':>10}   on/off",
        *rows("first words", on.run.enter_to_words_s, off.run.enter_to_words_s),
        *rows("whole answer", on_s, off_s),
        f"  typed turns on the on side ({len(typed)}), whole answer, mean: {typed_on:.3f} s, "
        f"off {typed_off:.3f} s: {met(typed_on / typed_off, GOAL_TYPED)}",
        f"  billed tokens {on_bill.billed:,.0f} / {off_bill.billed:,.0f}: {bill_ratio:.2f}×",
        f"  requests on / off: {kinds}",
        f"  speculations run {started}, of wrong guesses {wrong} ({wasted:,.0f} billed); "
        f"accepted with Tab {len(on.accepted)} ({on.run.accepted} shown as saved time)",
        f"  ghost text when the user was done reading, turns 2-{len(TURNS)}: {seen}",
        f"  reading, mean: on {statistics.mean(on.reads):.2f} s, off "
        f"{statistics.mean(off.reads):.2f} s; time to leave: on {on.run.exit_s:.2f} s, "
        f"off {off.run.exit_s:.2f} s",
    ]
    if requests:
        for side in (on, off):
            lines += [f"  requests of {side.name}:", *listing(side.requests, side.run)]
    verdict = f"  {label}: billed {met(bill_ratio, bill_goal)} · Enter to answer " + met(
        time_ratio, time_goal
    )
    return lines, verdict


def confidence_line(pair: Pair) -> str:
    drawn = ", ".join(
        f"{n + 2}:{c:.2f}{'*' if n + 2 in pair.right else ''}" for n, c in enumerate(pair.sure[:-1])
    )
    return f"  confidences of the guesses before turns 2-{len(TURNS)}: {drawn} (* right)"


def report(
    played: list[tuple[Pair, list[Side]]],
    reads: list[float],
    args: argparse.Namespace,
    averages: list[float],
) -> list[str]:
    """The run's conditions, each pair side by side, then every pair against the goals."""
    settings = "".join(f", {key}={value}" for key, value in args.settings.items())
    lines = [
        f"{len(TURNS)} turns a side; the user reads {args.think_min:g}-{args.think_max:g} s "
        f"(seed {args.seed}, drawn mean {statistics.mean(reads[1:]):.2f} s); "
        f"{args.load} CPU-bound processes meanwhile; load average {averages[0]:.2f} before, "
        + ", ".join(f"{a:.2f}" for a in averages[1:])
        + " after each pair",
        f"on: suggestions and speculation on at qshell's default settings{settings}; "
        f"off: both off; confidences {args.calibration} calibrated",
        f"billed = uncached × {UNCACHED_WEIGHT} + cached × {CACHED_WEIGHT} + output × "
        f"{OUTPUT_WEIGHT}",
    ]
    verdicts = []
    for pair, (on, off) in played:
        pair_lines, verdict = compared(pair, on, off, requests=args.requests)
        lines += ["", *pair_lines]
        verdicts.append(verdict)
    return [*lines, "", "on / off against Roadmap 17 item 5's goals:", *verdicts]


def listed(text: str) -> list[str]:
    return [item.strip() for item in text.split(",") if item.strip()]


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="folds,plain", help="kinds of model: folds,plain")
    parser.add_argument("--right", default="0.3,0.0", help="shares of right guesses")
    parser.add_argument("--think-min", type=float, default=2.0, help="shortest read, s")
    parser.add_argument("--think-max", type=float, default=4.0, help="longest read, s")
    parser.add_argument("--seed", type=int, default=SEED, help="right turns, confidences, reads")
    parser.add_argument("--calibration", choices=("partly", "well"), default="partly")
    parser.add_argument("--load", type=int, default=0, help="CPU-bound processes meanwhile")
    parser.add_argument(
        "--settings", action="append", default=[], metavar="KEY=VALUE", help="QSHELL_… for on"
    )
    parser.add_argument("--requests", action="store_true", help="list every request")
    args = parser.parse_args()
    args.models = listed(args.models)
    if unknown := [m for m in args.models if m not in MODELS]:
        parser.error(f"unknown model {unknown[0]!r}: choose from {', '.join(MODELS)}")
    try:
        args.right = [float(share) for share in listed(args.right)]
    except ValueError:
        parser.error(f"--right takes shares from 0 to 1, comma-separated, not {args.right!r}")
    if not args.right or any(not 0 <= share <= 1 for share in args.right):
        parser.error("--right takes shares from 0 to 1, comma-separated")
    if not 0 <= args.think_min <= args.think_max:
        parser.error("--think-min must be at least 0 and at most --think-max")
    pairs = [item.partition("=") for item in args.settings]
    if bad := [key for key, eq, _ in pairs if not (key.startswith("QSHELL_") and eq)]:
        parser.error(f"--settings takes QSHELL_KEY=VALUE, not {bad[0]!r}")
    args.settings = {key: value for key, _, value in pairs}
    return args


def main() -> None:
    args = arguments()
    draw = random.Random(args.seed + 2)
    # turn 1 is typed at once; then a read before each of turns 2-20 and before leaving
    reads = [0.0] + [draw.uniform(args.think_min, args.think_max) for _ in TURNS]
    chosen = [(model, share) for share in args.right for model in args.models]
    pairs = []
    for index, (model, share) in enumerate(chosen):
        right = right_turns(share, args.seed)
        sure = confidences(right, args.seed, args.calibration)
        pairs.append(Pair(model, share, right, sure, on_first=index % 2 == 0))
    work = Path(tempfile.mkdtemp(prefix="qshell-bench-session-"))
    played = []
    averages = [os.getloadavg()[0]]
    try:
        with loaded(args.load):
            for index, pair in enumerate(pairs):
                played.append((pair, play(pair, work / str(index), reads, args.settings)))
                averages.append(os.getloadavg()[0])
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print("\n".join(report(played, reads, args, averages)))


if __name__ == "__main__":
    main()
