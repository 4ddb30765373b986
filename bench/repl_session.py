"""A scripted REPL session played by pexpect on the real `qshell`, and what it was billed.

Shared by bench/cost.py and bench/session.py. `start` writes a fresh copy of a tiny project
and starts the `qshell` console script of this checkout in a pseudo-terminal (tests/e2e/pty)
against the scripted server, in auto-edit mode, with suggestions and speculation on or off
and every user directory in the run's own folder; `play_turn` is one turn as a user plays
it — reads for a while, waits for the ghost text when suggestions are on, then `enter`:
accepts it with Tab, Enter or types their own prompt, and waits for the answer's first
words and for the prompt after it (the run notes both times); `leave` reads once more and
presses Ctrl-D. The bill comes from the server's records: with its prompt cache modelled
(tests/fakes/prompt_cache.py), billed tokens = uncached input × 1 + cached prefix × 0.1 +
output × 1, and each request is told apart from outside — a suggestion by its marker, a
request for a prompt that arrived once the user had submitted that prompt is a main turn,
one before (or for a prompt never submitted) a speculation. `settle` waits for every
request to end, the streams that exit cut included. One thread: the caller's; the server
answers on its own threads.
"""

from __future__ import annotations

import re
import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from bench.scripted import last_prompt
from bench.stats import report
from qshell.followup.suggestion import SUGGESTION_MARKER
from tests.e2e.pty import Term, spawn_qshell
from tests.fakes.llm_server import RecordedRequest, ScriptedLLMServer

CACHED_WEIGHT = 0.1  # a cached prompt token, in uncached input tokens
UNCACHED_WEIGHT = 1.0
OUTPUT_WEIGHT = 1.0
WAIT_S = 30.0
ROOT = Path(__file__).resolve().parents[1]  # the qshell beside this bench, whatever is installed
SETTLE_S = 30.0  # after exit, how long the server's streams may take to end
KINDS = ("main turn", "suggestion", "speculation")

PROJECT_FILES = {
    "hello.py": 'def greet(name: str) -> str:\n    return f"hello, {name}"\n',
    "app.py": "from hello import greet\n\nfor user in ['ada', 'bob']:\n    print(greet(user))\n",
    "tests/test_hello.py": "from hello import greet\n\n\ndef test_greet():\n"
    "    assert greet('ada') == 'hello, ada'\n",
    "README.md": "# demo\n\nA tiny project for the cost benchmark.\n",
}


@dataclass
class Run:
    """One played session: when the user waited on turns, and how long leaving took.
    `prompts` is every prompt a request of the session may carry (turns and guesses)."""

    name: str
    prompts: frozenset[str]
    waits: list[tuple[float, float]] = field(default_factory=list)  # Enter, next prompt
    words_at: list[float] = field(default_factory=list)  # when each answer's first words came
    submitted: dict[str, float] = field(default_factory=dict)  # prompt -> when Enter went
    exit_s: float = 0.0
    left_at: float = 0.0  # when Ctrl-D went
    accepted: int = 0
    completed: int = 0

    @property
    def enter_to_prompt_s(self) -> list[float]:
        return [end - start for start, end in self.waits]

    @property
    def enter_to_words_s(self) -> list[float]:
        return [words - start for (start, _), words in zip(self.waits, self.words_at, strict=True)]


def start(
    server: ScriptedLLMServer,
    root: Path,
    *,
    on: bool,
    fold: bool,
    files: Mapping[str, str] = PROJECT_FILES,
    settings: Mapping[str, str] | None = None,
) -> Term:
    """qshell in `root`/project on a fresh copy of `files`, at its first prompt; `settings`
    are more environment variables (QSHELL_…) for it."""
    project = root / "project"
    for rel, text in files.items():
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
        **(settings or {}),
    }
    (root / "tmp").mkdir(parents=True)
    child = spawn_qshell(server, project, "--approval-mode", "auto-edit", extra_env=env)
    child.expect("for commands, Ctrl-D to exit", timeout_s=WAIT_S)
    child.wait_prompt(WAIT_S)
    return child


def play_turn(
    child: Term,
    run: Run,
    prompt: str,
    mark: str,
    *,
    think_s: float,
    ghost: str | None = None,
) -> None:
    """One turn: read `think_s`; when `ghost` is given, wait for that ghost text and accept
    it (Tab, Enter) if it is `prompt`, else type `prompt`; wait for `mark`, then the prompt."""
    time.sleep(think_s)
    if ghost is not None:
        child.expect(re.escape(ghost), timeout_s=WAIT_S)
    enter(child, run, prompt, mark, accept=ghost == prompt)


def enter(child: Term, run: Run, prompt: str, mark: str, *, accept: bool) -> None:
    """The user is done reading: Tab then Enter when `accept` (the ghost text shown is
    `prompt`), else type `prompt` and Enter; then wait for `mark` (the answer's first
    words) and for the prompt after the answer, and note when each came."""
    if accept:
        child.send("\t")
    child.pass_over()  # the prompt redrawn under the last turn's end is not this turn's
    start_at = run.submitted[prompt] = time.monotonic()
    child.submit("" if accept else prompt, WAIT_S)
    child.expect(re.escape(mark), timeout_s=WAIT_S)
    words_at = time.monotonic()
    child.wait_prompt(WAIT_S)
    run.waits.append((start_at, time.monotonic()))
    run.words_at.append(words_at)


def leave(child: Term, run: Run, *, think_s: float) -> None:
    """Read once more, press Ctrl-D, and note how long exit took and what was accepted."""
    time.sleep(think_s)
    left = run.left_at = time.monotonic()
    child.send("\x04")
    code = child.finish()
    run.exit_s = time.monotonic() - left
    if code != 0:
        raise RuntimeError(f"qshell exited with {code}: {child.text[-800:]}")
    run.accepted = len(re.findall(r"⚡ \d+\.\d s saved", child.text))
    run.completed = run.accepted - child.text.count("continuing from where it stopped")


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
    sent = run.submitted.get(last_prompt(request, run.prompts))
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
            f"out {request.sent_tokens:>4}{cut}  {asked(request, run.prompts)[:48]!r}"
        )
    return lines


def asked(request: RecordedRequest, prompts: frozenset[str]) -> str:
    last = request.turns[-1] if request.turns else None
    if last is not None and last.role == "tool":
        return "tool result " + ",".join(r.tool_call_id for r in request.last_tool_results)
    text = request.last_user_text
    if SUGGESTION_MARKER in text:
        return "prediction after " + last_prompt(request, prompts)
    return text


def describe(run: Run, total: Bill) -> list[str]:
    kinds = " · ".join(f"{k} {total.kinds[k]} ({total.by_kind[k]:,} billed)" for k in KINDS)
    lines = [
        f"{run.name}: billed {total.billed:,.0f} tokens (uncached input {total.uncached:,}, "
        f"cached {total.cached:,}, output {total.output:,})",
        f"  requests {sum(total.kinds.values())}: {kinds}",
        f"  time to leave (Ctrl-D to exit) {run.exit_s:.2f} s",
        "  " + report("Enter -> next prompt", run.enter_to_prompt_s),
    ]
    if run.accepted:
        lines.append(f"  accepted speculations {run.accepted} ({run.completed} completed)")
    return lines
