"""Enter-to-answer time of an accepted, completed speculation next to the same turn run live.

Run: `python -m bench.speculation [--runs 12]` (about 11 s per run). The scripted server
answers one prompt in 3 model rounds of ~3.5 s each (0.5 s to the first token, then the
rest of the reply paced over 3 s): a `read_file` call, a `grep` call, then a Markdown
answer. Each run builds two fresh conversations over the real settings, tools and
transcripts in a fresh project directory, gives both the same short first turn, then:
(a) normal: times `Conversation.turn(prompt)` driven by `drive` into a `RichRenderer` on an
`io.StringIO` (force_terminal), from the call to the end of rendering; (b) accepted: a
`Speculation` of the same prompt on the other conversation (default approval mode; the
tools are read-only, so it completes) runs in a background thread while (a) runs, and once
it has completed — not timed — the same span is timed for `Conversation.run_prepared` over
`accept()`, driven through the same kind of renderer. Prints median and p99 of both, the
ratio of medians, and the goals (accepted ≤ 50 ms, ratio ≤ 0.01). It checks that each
accepted turn replayed a completed speculation without a new model request and rendered
the answer, and stops with an error otherwise; it does not assert the goals, and the
figures include neither the suggestion request nor the REPL's prompt handling.
"""

from __future__ import annotations

import argparse
import io
import shutil
import statistics
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from bench.scripted import after_call, paced
from bench.stats import report
from qshell import compose, sessions
from qshell.agent.conversation import Conversation, PreparedTurn
from qshell.agent.events import (
    Event,
    PermissionAnswer,
    PermissionReply,
    PermissionRequested,
    SpeculationAccepted,
    TurnFinished,
)
from qshell.agent.session import Session, SessionRequest
from qshell.cancel import CancelToken
from qshell.config import load_settings
from qshell.followup.acceptance import accept
from qshell.followup.speculation import Speculation
from qshell.followup.states import Status
from qshell.overlay import Overlay
from qshell.permissions.runner import MainToolRunner
from qshell.ui.driver import drive
from qshell.ui.render_rich import RichRenderer
from tests.fakes.llm_server import (
    Latency,
    Reply,
    ScriptedLLMServer,
    ToolCallSpec,
    last_user_text_contains,
)
from tests.fakes.wire import TOKEN_CHARS, reply_tokens

WARM_PROMPT = "warm up: what is this project"
PROMPT = "explain how greet is used across the project"
TTFT_S = 0.5
STREAM_S = 3.0  # after the first token; a round is TTFT_S + STREAM_S ≈ 3.5 s
TOOL_TOKENS = 60  # tokens of a tool-call round (its text plus the call)
ANSWER_MARK = "greet is defined once"
ANSWER = f"""{ANSWER_MARK}, in `hello.py`, and called from two places.

## Where it is used

- `app.py` calls `greet(name)` for every user it loads, then prints the result.
- `tests/test_hello.py` checks the exact greeting for two names.

```python
def greet(name: str) -> str:
    return f"hello, {{name}}"
```

Nothing else imports it, so changing its signature touches **three files**: the
definition, the call in `app.py`, and the two assertions in the test. The greeting text
is not read anywhere else, and there is no configuration for it; if you want it to be
configurable, the simplest place is a keyword argument with the current text as default.
"""
PROJECT_FILES = {
    "hello.py": 'def greet(name: str) -> str:\n    return f"hello, {name}"\n',
    "app.py": "from hello import greet\n\nfor user in ['ada', 'bob']:\n    print(greet(user))\n",
    "tests/test_hello.py": "from hello import greet\n\n\ndef test_greet():\n"
    "    assert greet('ada') == 'hello, ada'\n    assert greet('bob') == 'hello, bob'\n",
    "README.md": "# demo\n\nA tiny project for the speculation benchmark.\n",
}
SPECULATION_WAIT_S = 60.0
GOAL_S = 0.050
GOAL_RATIO = 0.01


def paced_round(reply: Reply) -> Reply:
    """The reply with a latency that makes its whole stream take TTFT_S + STREAM_S."""
    return paced(reply, ttft_s=TTFT_S, total_s=TTFT_S + STREAM_S)


def tool_round(text: str, call: ToolCallSpec) -> Reply:
    """A round of `text` padded to TOOL_TOKENS tokens in all, then `call`."""
    call_tokens = reply_tokens(Reply(calls=(call,)))
    length = max(TOOL_TOKENS - call_tokens, 1) * TOKEN_CHARS
    padded = " ".join([text, *["I will check it before answering."] * 20])[:length]
    return paced_round(Reply.tool_calls([call], padded))


def script(server: ScriptedLLMServer) -> None:
    read = ToolCallSpec("read_file", {"path": "hello.py"}, id="read1")
    grep = ToolCallSpec("grep", {"pattern": "greet"}, id="grep1")
    server.add_rule(last_user_text_contains(WARM_PROMPT), Reply.text("a demo.", latency=Latency()))
    server.add_rule(after_call("grep1"), paced_round(Reply.text(ANSWER)))
    server.add_rule(after_call("read1"), tool_round("Now where it is used.", grep))
    server.add_rule(last_user_text_contains(PROMPT), tool_round("Let me read it first.", read))


@dataclass
class Bench:
    server: ScriptedLLMServer
    work: Path
    root: Path
    opened: list[Conversation] = field(default_factory=list)

    def conversation(self) -> Conversation:
        """A fresh conversation over real settings and tools, after the short first turn."""
        home = Path(tempfile.mkdtemp(prefix="home-", dir=self.work))
        environ = {
            "HOME": str(home),
            "QSHELL_HOME": str(home / "qshell"),
            "QSHELL_MAX_RETRIES": "0",
            "QSHELL_LOAD_PLUGINS": "",
            "OPENAI_BASE_URL": self.server.openai_base_url,
            "OPENAI_API_KEY": "bench",
            "OPENAI_MODEL": "m1",
        }
        settings = load_settings(project_root=self.root, environ=environ)

        def open_session(request: SessionRequest) -> Session:
            return sessions.open_session(settings, request, root=self.root, environ=environ)

        router = compose.open_router(settings, environ)
        conversation = Conversation(open_session, SessionRequest(), router=router)
        self.opened.append(conversation)
        finished, _ = render(conversation.turn(WARM_PROMPT), conversation.cancel_token)
        if not isinstance(finished, TurnFinished):
            raise RuntimeError(f"the first turn did not finish: {finished!r}")
        return conversation

    def close(self) -> None:
        for conversation in self.opened:
            conversation.close()
        self.opened.clear()


def allow(request: PermissionRequested) -> PermissionReply:
    """Never expected (read-only tools); answered so a surprise cannot hang the run."""
    return PermissionReply(PermissionAnswer.ALLOW_ONCE)


def render(events: Iterator[Event], cancel: CancelToken) -> tuple[Event | None, list[Event]]:
    """Drive `events` into a rich renderer on a string buffer; the last event and all seen."""
    seen: list[Event] = []

    def recorded() -> Iterator[Event]:
        for event in events:
            seen.append(event)
            yield event

    renderer = RichRenderer(file=io.StringIO(), force_terminal=True, width=100, environ={})
    last = drive(recorded(), renderer, allow, cancel)
    return last, seen


def prepared(spec: Speculation, conversation: Conversation) -> PreparedTurn:
    """What Speculator.prepared_turn hands the Conversation, without the telemetry."""

    def run(
        runner: MainToolRunner, cancel: CancelToken, checkpoint: Callable[[list[str]], None]
    ) -> Iterator[Event]:
        yield from accept(spec, conversation.session, runner, cancel, on_apply=checkpoint).events

    return run


def timed(conversation: Conversation, events: Iterator[Event]) -> tuple[float, list[Event]]:
    start = time.perf_counter()
    last, seen = render(events, conversation.cancel_token)
    elapsed = time.perf_counter() - start
    if not isinstance(last, TurnFinished) or ANSWER_MARK not in last.text:
        raise RuntimeError(f"the turn did not end with the answer: {last!r}")
    return elapsed, seen


def one_run(bench: Bench) -> tuple[float, float]:
    """(normal turn, accepted completed speculation), Enter to the end of rendering."""
    live, ahead = bench.conversation(), bench.conversation()
    session = ahead.session
    overlay = Overlay.create(
        session.project_root, session.tool_context.paths, base_dir=bench.work / "overlays"
    )
    spec = Speculation(session, PROMPT, overlay)
    runner = threading.Thread(target=spec.run, name="speculation", daemon=True)
    runner.start()
    try:
        normal, _ = timed(live, live.turn(PROMPT))
        if not spec.done.wait(SPECULATION_WAIT_S) or spec.status is not Status.COMPLETED:
            raise RuntimeError(f"the speculation did not complete: {spec.status}")
        requests = len(bench.server.requests)
        accepted, seen = timed(ahead, ahead.run_prepared(prepared(spec, ahead)))
    finally:
        if not spec.done.is_set() or runner.is_alive():
            spec.abort()
        runner.join(SPECULATION_WAIT_S)
        overlay.discard()
        bench.close()
    replayed = [e for e in seen if isinstance(e, SpeculationAccepted)]
    if not replayed or not replayed[0].completed or len(bench.server.requests) != requests:
        raise RuntimeError("the accepted turn did not replay a completed speculation")
    return normal, accepted


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=12)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="qshell-bench-speculation-"))
    server = ScriptedLLMServer().start()
    normal: list[float] = []
    accepted: list[float] = []
    try:
        script(server)
        root = (work / "project").resolve()
        for rel, text in PROJECT_FILES.items():
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_text(text)
        bench = Bench(server, work, root)
        for _ in range(max(args.runs, 1)):
            live, ahead = one_run(bench)
            normal.append(live)
            accepted.append(ahead)
    finally:
        server.stop()
        shutil.rmtree(work, ignore_errors=True)
    for violation in server.violations:
        print(f"server violation: {violation}")
    print(f"3 rounds of ~{TTFT_S + STREAM_S:.1f} s each (read_file, grep, answer)")
    print(report("normal turn: Enter -> answer rendered", normal))
    print(report("accepted completed speculation: Enter -> answer rendered", accepted))
    ratio = statistics.median(accepted) / statistics.median(normal)
    print(f"accepted / normal (medians): {ratio:.5f}")
    met = statistics.median(accepted) <= GOAL_S and ratio <= GOAL_RATIO
    print(
        f"goal: accepted median ≤ {GOAL_S * 1000:.0f} ms and ratio ≤ {GOAL_RATIO}: "
        f"{'met' if met else 'missed'}"
    )


if __name__ == "__main__":
    main()
