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
import re
import shutil
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from bench.stats import report
from qshell.agent.prediction import CLOSE, OPEN, PREDICTION_PROMPT
from qshell.followup.suggestion import SUGGESTION_MARKER
from tests.e2e.pty import spawn_qshell
from tests.fakes.llm_server import (
    Latency,
    RecordedRequest,
    Reply,
    ScriptedLLMServer,
    ToolCallSpec,
)

CACHED_WEIGHT = 0.1  # a cached prompt token, in uncached input tokens
UNCACHED_WEIGHT = 1.0
OUTPUT_WEIGHT = 1.0
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
WAIT_S = 30.0
ROOT = Path(__file__).resolve().parents[1]  # the qshell beside this bench, whatever is installed
SETTLE_S = 30.0  # after exit, how long the server's streams may take to end

PROJECT_FILES = {
    "hello.py": 'def greet(name: str) -> str:\n    return f"hello, {name}"\n',
    "app.py": "from hello import greet\n\nfor user in ['ada', 'bob']:\n    print(greet(user))\n",
    "tests/test_hello.py": "from hello import greet\n\n\ndef test_greet():\n"
    "    assert greet('ada') == 'hello, ada'\n",
    "README.md": "# demo\n\nA tiny project for the cost benchmark.\n",
}


@dataclass(frozen=True)
class Turn:
    prompt: str
    call: ToolCallSpec
    mark: str  # the answer's first words, to wait for on the screen


def _edit(path: str, old: str, new: str) -> dict[str, str]:
    return {"path": path, "old_string": old, "new_string": new}


TURNS = (
    Turn("what is in this project", ToolCallSpec("ls", {}), "Four files make up"),
    Turn("show me hello.py", ToolCallSpec("read_file", {"path": "hello.py"}), "It defines greet"),
    Turn("where is greet used", ToolCallSpec("grep", {"pattern": "greet"}), "Two places call"),
    Turn(
        "add a docstring to greet",
        ToolCallSpec(
            "edit",
            _edit("hello.py", "-> str:\n", '-> str:\n    """Say hello."""\n'),
        ),
        "The docstring is in",
    ),
    Turn("now show me app.py", ToolCallSpec("read_file", {"path": "app.py"}), "The app loops"),
    Turn(
        "make app.py shout the greeting",
        ToolCallSpec("edit", _edit("app.py", "print(greet(user))", "print(greet(user).upper())")),
        "It shouts now",
    ),
    Turn(
        "check the test still matches",
        ToolCallSpec("read_file", {"path": "tests/test_hello.py"}),
        "The test still holds",
    ),
    Turn(
        "mention greet in the README",
        ToolCallSpec("edit", _edit("README.md", "benchmark.\n", "benchmark.\nSee greet.\n")),
        "The README names",
    ),
)
LAST_SUGGESTION = "explain the whole project in detail"  # predicted after turn 8, never sent
LAST_MARK = "Here is the whole project"
FILLER = "The change keeps the code small and every name says what it does. "


def _text(mark: str, tokens: int) -> str:
    body = f"{mark}. " + FILLER * (tokens * 4 // len(FILLER) + 1)
    return body[: tokens * 4].rstrip() + "."


def script(server: ScriptedLLMServer) -> None:
    """Answers by content: a suggestion names the prompt after the newest one it saw."""
    prompts = [t.prompt for t in TURNS]
    nexts = dict(zip(prompts, [*prompts[1:], LAST_SUGGESTION], strict=True))

    def suggestion_for(request: RecordedRequest) -> bool:
        return SUGGESTION_MARKER in request.last_user_text

    def predicted(prompt: str) -> Callable[[RecordedRequest], bool]:
        def test(request: RecordedRequest) -> bool:
            if not suggestion_for(request):
                return False
            seen = [t.text for t in request.turns if t.role == "user" and t.text in nexts]
            return bool(seen) and seen[-1] == prompt

        return test

    for prompt in prompts:
        server.add_rule(predicted(prompt), Reply.text(nexts[prompt], latency=SUGGESTION_LATENCY))
    for index, turn in enumerate(TURNS):
        call = ToolCallSpec(turn.call.name, turn.call.arguments, id=f"call{index}")
        answer = _text(turn.mark, ANSWER_TOKENS)
        # a model that does as its system prompt asks: the answer ends with the prediction
        trailer = f"\n\n{OPEN}{nexts[turn.prompt]}{CLOSE}"
        folding = Reply.text(answer + trailer, latency=ANSWER_LATENCY)
        server.add_rule(_both(_after(call.id or ""), _asked_to_predict), folding)
        server.add_rule(_after(call.id or ""), Reply.text(answer, latency=ANSWER_LATENCY))
        server.add_rule(_asks(turn.prompt), Reply.tool_calls([call], latency=TOOL_LATENCY))
    final = Reply.text(_text(LAST_MARK, FINAL_ANSWER_TOKENS), latency=ANSWER_LATENCY)
    server.add_rule(_asks(LAST_SUGGESTION), final)


def _asked_to_predict(request: RecordedRequest) -> bool:
    first = (request.body.get("messages") or [{}])[0]
    return first.get("role") == "system" and PREDICTION_PROMPT in str(first.get("content"))


def _both(
    a: Callable[[RecordedRequest], bool], b: Callable[[RecordedRequest], bool]
) -> Callable[[RecordedRequest], bool]:
    return lambda request: a(request) and b(request)


def _after(call_id: str) -> Callable[[RecordedRequest], bool]:
    def test(request: RecordedRequest) -> bool:
        return any(r.tool_call_id == call_id for r in request.last_tool_results)

    return test


def _asks(prompt: str) -> Callable[[RecordedRequest], bool]:
    def test(request: RecordedRequest) -> bool:
        turns = request.turns
        return bool(turns) and turns[-1].role == "user" and turns[-1].text == prompt

    return test


@dataclass
class Run:
    """One played session: when the user waited on turns, and how long leaving took."""

    name: str
    waits: list[tuple[float, float]] = field(default_factory=list)
    submitted: dict[str, float] = field(default_factory=dict)  # prompt -> when Enter went
    exit_s: float = 0.0
    left_at: float = 0.0  # when Ctrl-D went
    accepted: int = 0
    completed: int = 0


def play(
    server: ScriptedLLMServer, work: Path, name: str, *, on: bool, fold: bool, think_s: float
) -> Run:
    root = work / name.split()[0] / ("fold" if fold else "fork")
    project = root / "project"
    for rel, text in PROJECT_FILES.items():
        (project / rel).parent.mkdir(parents=True, exist_ok=True)
        (project / rel).write_text(text)
    home = root / "home"
    env = {
        "HOME": str(home),
        "QSHELL_HOME": str(home / "qshell"),
        "TMPDIR": str(root / "tmp"),
        "PYTHONPATH": str(ROOT),
        "QSHELL_LOAD_PLUGINS": "",
        "QSHELL_SUGGESTIONS": "1" if on else "0",
        "QSHELL_SPECULATION": "1" if on else "0",
        "QSHELL_SUGGESTIONS__FOLD": "true" if fold else "false",
        **{f"XDG_{n}_HOME": str(home / n.lower()) for n in ("CONFIG", "STATE", "CACHE", "DATA")},
    }
    (root / "tmp").mkdir(parents=True)
    run = Run(name)
    child = spawn_qshell(server, project, "--approval-mode", "auto-edit", extra_env=env)
    child.expect("for commands, Ctrl-D to exit", timeout_s=WAIT_S)
    child.wait_prompt(WAIT_S)
    for index, turn in enumerate(TURNS):
        if index:
            time.sleep(think_s)
        accept = on and index > 0
        if accept:
            child.expect(re.escape(turn.prompt), timeout_s=WAIT_S)  # the ghost text
            child.send("\t")
        start = run.submitted[turn.prompt] = time.monotonic()
        child.submit("" if accept else turn.prompt, WAIT_S)
        child.expect(re.escape(turn.mark), timeout_s=WAIT_S)
        child.wait_prompt(WAIT_S)
        run.waits.append((start, time.monotonic()))
    time.sleep(think_s)
    left = run.left_at = time.monotonic()
    child.send("\x04")
    code = child.finish()
    run.exit_s = time.monotonic() - left
    if code != 0:
        raise RuntimeError(f"qshell exited with {code}: {child.text[-800:]}")
    run.accepted = len(re.findall(r"⚡ \d+\.\d s saved", child.text))
    run.completed = run.accepted - child.text.count("continuing from where it stopped")
    return run


@dataclass
class Bill:
    """Billed tokens and request counts of one run, from the server's records."""

    uncached: int = 0
    cached: int = 0
    output: int = 0
    kinds: Counter[str] = field(default_factory=Counter)
    by_kind: Counter[str] = field(default_factory=Counter)  # billed tokens of each kind

    @property
    def billed(self) -> float:
        return billed(self.uncached, self.cached, self.output)


def billed(uncached: int, cached: int, output: int) -> float:
    return uncached * UNCACHED_WEIGHT + cached * CACHED_WEIGHT + output * OUTPUT_WEIGHT


def kind(request: RecordedRequest, run: Run) -> str:
    """A suggestion has the marker; a request for a prompt is a main turn once the user
    submitted that prompt, and a speculation before (or when it never was)."""
    if SUGGESTION_MARKER in request.last_user_text:
        return "suggestion"
    sent = run.submitted.get(_last_prompt(request))
    return "main turn" if sent is not None and request.received_at >= sent else "speculation"


def bill(requests: list[RecordedRequest], run: Run) -> Bill:
    total = Bill()
    for request in requests:
        if request.cached is None:
            raise RuntimeError("the server did not model the prompt cache")
        total.uncached += request.cached.uncached_tokens
        total.cached += request.cached.cached_tokens
        total.output += request.sent_tokens
        what = kind(request, run)
        total.kinds[what] += 1
        cost = billed(
            request.cached.uncached_tokens, request.cached.cached_tokens, request.sent_tokens
        )
        total.by_kind[what] += round(cost)
    return total


def settle(server: ScriptedLLMServer) -> list[RecordedRequest]:
    """The run's requests, once every one of them has ended (streams cut by exit included)."""
    deadline = time.monotonic() + SETTLE_S
    requests = server.requests
    for request in requests:
        if not request.completed.wait(max(0.0, deadline - time.monotonic())):
            raise RuntimeError(f"request #{request.index} still streams {SETTLE_S} s after exit")
    return requests


def listing(requests: list[RecordedRequest], run: Run) -> list[str]:
    """One line a request: when (since the first), kind, tokens, what it asked."""
    if not requests:
        return []
    first = requests[0].received_at
    lines = []
    for request in requests:
        cached = request.cached
        assert cached is not None
        cut = " (closed early)" if request.disconnected.is_set() else ""
        ended = request.ended_at or 0.0
        if ended > run.left_at:
            cut += f" (ended {ended - run.left_at:.2f} s after Ctrl-D)"
        lines.append(
            f"    {request.received_at - first:6.2f} s  {kind(request, run):<11} "
            f"uncached {cached.uncached_tokens:>5} cached {cached.cached_tokens:>5} "
            f"out {request.sent_tokens:>4}{cut}  {_asked(request)[:48]!r}"
        )
    return lines


def _asked(request: RecordedRequest) -> str:
    last = request.turns[-1] if request.turns else None
    if last is not None and last.role == "tool":
        return "tool result " + ",".join(r.tool_call_id for r in request.last_tool_results)
    text = request.last_user_text
    return "prediction after " + _last_prompt(request) if SUGGESTION_MARKER in text else text


def _last_prompt(request: RecordedRequest) -> str:
    prompts = {t.prompt for t in TURNS} | {LAST_SUGGESTION}
    seen = [t.text for t in request.turns if t.role == "user" and t.text in prompts]
    return seen[-1] if seen else "?"


def describe(run: Run, total: Bill) -> list[str]:
    kinds = " · ".join(
        f"{k} {total.kinds[k]} ({total.by_kind[k]:,} billed)"
        for k in ("main turn", "suggestion", "speculation")
    )
    lines = [
        f"{run.name}: billed {total.billed:,.0f} tokens (uncached input {total.uncached:,}, "
        f"cached {total.cached:,}, output {total.output:,})",
        f"  requests {sum(total.kinds.values())}: {kinds}",
        f"  time to leave (Ctrl-D to exit) {run.exit_s:.2f} s",
        "  " + report("Enter -> next prompt", [end - start for start, end in run.waits]),
    ]
    if run.accepted:
        lines.append(f"  accepted speculations {run.accepted} ({run.completed} completed)")
    return lines


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
