"""How much of each suggestion request is the main request's cached prefix, and how fast it is.

Run: `python -m bench.suggestion_prefix [--runs 5]`. A scripted 10-turn coding session
(OpenAI wire format, the real system prompt and tools, real file reads of qshell's own
sources, most turns with one or two tool rounds, some plain answers) runs against the
scripted server; after each turn a suggestion is generated from `session.cache_safe`.
For each suggestion request it takes the bodies the server recorded and serializes the
prompt exactly as sent (`json.dumps` of `tools`, then of each message), and reports the
share of those characters that are an identical prefix of the last main request's tools
and messages followed by its reply. Goal: ≥ 99 % overall. Side by side, from the same
data, the share a Qwen-Code-style fork would get (history cut to the last 40 entries,
tools removed), and with the cut alone (tools kept). Also prints the median and p99 of
the suggestion latency (a loopback server, so this is qshell's own overhead). Then the
suggestion is speculated (a real `Speculation` on `session.fork()`, on a private overlay,
discarded afterwards) and its first request is measured the same way: that is the share
the prompt cache serves when a speculation starts. It talks only to 127.0.0.1, asserts no
timing, and runs in one thread besides the server's own (and each speculation's run).
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import qshell
from bench.stats import report
from qshell.agent.events import TurnFinished
from qshell.agent.loop import run_turn
from qshell.agent.prompt import build_system_prompt
from qshell.agent.session import Session
from qshell.cancel import CancelToken
from qshell.config import ApprovalMode
from qshell.followup.speculation import Speculation
from qshell.followup.states import Status
from qshell.followup.suggestion import SUGGESTION_MARKER, SUGGESTION_PROMPT, generate_suggestion
from qshell.llm.fork import CacheSafeParams
from qshell.llm.messages import Message
from qshell.llm.openai import OpenAIProvider, build_body
from qshell.overlay import Overlay
from qshell.permissions.runner import MainToolRunner
from qshell.tools import default_tools
from qshell.tools.base import ToolContext
from qshell.tools.paths import PathResolver
from tests.fakes.llm_server import (
    RecordedRequest,
    Reply,
    Rule,
    ScriptedLLMServer,
    ToolCallSpec,
    last_user_text_contains,
)
from tests.fakes.prefix import common_prefix, reference, serialize, shared_share

QWEN_HISTORY_ENTRIES = 40  # Qwen Code's MAX_HISTORY_FOR_CACHE
GOAL_SHARE = 0.99
SOURCES = (  # copied into the bench project so file reads have realistic sizes
    "agent/loop.py",
    "agent/session.py",
    "llm/openai.py",
    "llm/anthropic.py",
    "llm/http.py",
    "llm/fork.py",
    "llm/messages.py",
    "llm/sse_provider.py",
    "config.py",
)


def _answer(*paragraphs: str) -> str:
    return "\n\n".join(paragraphs)


def _call(name: str, **arguments: Any) -> ToolCallSpec:
    return ToolCallSpec(name, arguments)


@dataclass(frozen=True)
class Turn:
    """One user turn: its prompt, zero or more tool rounds, and the final answer."""

    prompt: str
    rounds: tuple[tuple[ToolCallSpec, ...], ...]
    answer: str


TURNS: tuple[Turn, ...] = (
    Turn(
        "give me an overview of this project, what are the main packages?",
        ((_call("ls", path="."), _call("glob", pattern="**/*.py")),),
        _answer(
            "This is a small Python package, `qshell`, laid out in layers:",
            "- `qshell/agent/` holds the agent loop (`loop.py`) and the session state "
            "(`session.py`): history, system prompt, usage totals and the request builder.\n"
            "- `qshell/llm/` holds the providers: `openai.py` and `anthropic.py` translate the "
            "neutral `ChatRequest` into each wire format, `http.py` does transport, retries and "
            "cancellation, and `fork.py` captures the cache-safe parameters for side requests.\n"
            "- `config.py` assembles the settings from files, environment and flags.",
            "The arrows point one way: the agent depends on llm and tools, never the reverse. "
            "If you want, I can go through the loop next, since that is where most behaviour is.",
        ),
    ),
    Turn(
        "yes, how does the agent loop handle cancellation?",
        (
            (_call("grep", pattern="CancelToken", path="qshell"),),
            (_call("read_file", path="qshell/agent/loop.py"),),
        ),
        _answer(
            "Cancellation is a single `CancelToken` shared by the loop, the provider and the "
            "tools. The loop checks it before each round; the provider registers a callback on "
            "it that aborts the open HTTP response, so a blocked read ends at once; tools get "
            "it through their context and the shell tool kills its process group.",
            "When a round is cancelled the loop yields `TurnFailed(kind=CANCELLED)` and returns. "
            "The history invariant holds: any tool call already in the history gets a result "
            "(cancelled calls are answered with an error result), and a partial assistant "
            "message is never appended.",
            "One detail: after a tool batch the loop appends the results first and only then "
            "checks the token, which is what keeps the pairing intact.",
        ),
    ),
    Turn(
        "what's the difference between the openai and anthropic providers?",
        (
            (
                _call("read_file", path="qshell/llm/openai.py"),
                _call("read_file", path="qshell/llm/anthropic.py"),
            ),
            (_call("read_file", path="qshell/llm/sse_provider.py"),),
        ),
        _answer(
            "Both subclass `SSEProvider` and differ only in body building and stream parsing:",
            "- OpenAI puts the system prompt in a `system` message, turns tool results into "
            "`tool` role messages and accumulates tool-call deltas by index, tolerating servers "
            "that repeat ids or still send the legacy `function_call`.\n"
            "- Anthropic sends the system prompt as a cached text block, puts a cache "
            "breakpoint on the last tool and on the last block of the last message, merges "
            "consecutive same-role messages and counts cache reads and writes into the prompt "
            "tokens.",
            "Transport, retries and error mapping are shared in `http.py`.",
        ),
    ),
    Turn(
        "ok, explain CacheSafeParams briefly",
        (),
        _answer(
            "`CacheSafeParams` is the last successful main request exactly as sent plus the "
            "assistant reply it produced. A fork appends the reply and one new user message, "
            "so everything before it — model, system prompt, tools, parameters and every "
            "earlier message — is byte-identical to what the provider just cached.",
            "That is why forks never remove tools or cut the history: either would change the "
            "prefix and the cache would miss.",
        ),
    ),
    Turn(
        "find where max_tokens is set for a request",
        (
            (_call("grep", pattern="max_tokens", path="qshell"),),
            (_call("read_file", path="qshell/agent/session.py"),),
        ),
        _answer(
            "`max_tokens` comes from the settings (`maxTokens`, default 8192), is stored on the "
            "`Session` and copied into every `ChatRequest` by `Session.request()`. Both "
            "providers send it unchanged: OpenAI as `max_tokens`, Anthropic as the required "
            "`max_tokens` field.",
            "Forks keep it as is, so a suggestion request has the same value as the main one.",
        ),
    ),
    Turn(
        "and what does the config precedence look like?",
        (
            (_call("read_file", path="qshell/config.py"),),
            (_call("grep", pattern="QSHELL_", path="qshell"),),
        ),
        _answer(
            "Lowest first: defaults, the user `settings.json`, the project "
            "`.qshell/settings.json`, `QSHELL_*` environment variables, then command-line "
            "flags. Each layer is validated on its own first so an error names the file, "
            "variable or flag; then the layers are merged key by key.",
            "Nested settings use `__` in environment names, e.g. `QSHELL_SUGGESTIONS__ENABLED`.",
        ),
    ),
    Turn(
        "write a short NOTES.md summarising what we found",
        (
            (
                _call(
                    "write_file",
                    path="NOTES.md",
                    content="# Notes\n\n- Cancellation: one CancelToken for loop, HTTP and "
                    "tools.\n- Providers differ only in body and parsing.\n- Forks reuse the "
                    "cached prefix; never drop tools or cut history.\n- Config: defaults < "
                    "user < project < env < flags.\n",
                ),
            ),
        ),
        "Written `NOTES.md` with four bullets: cancellation, providers, forks and config "
        "precedence. Want me to commit it?",
    ),
    Turn(
        "does anything import qshell.llm.http directly?",
        (
            (_call("grep", pattern="qshell\\.llm\\.http", path="qshell"),),
            (_call("read_file", path="qshell/llm/sse_provider.py", limit=60),),
        ),
        _answer(
            "Only the provider layer: `sse_provider.py`, `openai.py` and `anthropic.py` import "
            "from `qshell.llm.http`. Nothing in `agent/` or `tools/` does, which matches the "
            "layering rule (tools may not import the HTTP module at all).",
        ),
    ),
    Turn(
        "summarise the retry policy in two sentences",
        (),
        "Requests are retried up to four attempts with jittered exponential backoff (or the "
        "server's Retry-After, capped at 60 s), but only before the first content arrives. "
        "Once any text or tool call has streamed, an error is final so nothing is duplicated.",
    ),
    Turn(
        "list what is in the llm package",
        (
            (_call("ls", path="qshell/llm"),),
            (_call("read_file", path="qshell/llm/messages.py"),),
        ),
        "`qshell/llm/` has `anthropic.py`, `openai.py`, `sse_provider.py`, `http.py`, "
        "`fork.py`, `messages.py` and `base.py`. Shall I run the tests now?",
    ),
)


SUGGESTION = "run the tests"


def script(server: ScriptedLLMServer) -> None:
    server.add_rule(last_user_text_contains(SUGGESTION_MARKER), Reply.text(SUGGESTION))
    # the speculated suggestion (after the marker rule: the prediction prompt quotes it)
    server.add_rule(last_user_text_contains(SUGGESTION), Reply.text("All 48 tests pass."))
    for number, turn in enumerate(TURNS, 1):
        tag = f"(t{number:02d})"
        replies = [Reply.tool_calls(list(calls)) for calls in turn.rounds]
        server.add_rule(
            Rule(last_user_text_contains(tag), replies=[*replies, Reply.text(turn.answer)])
        )


def make_project(root: Path) -> None:
    package = Path(qshell.__file__).parent
    for relative in SOURCES:
        target = root / "qshell" / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(package / relative, target)
    (root / "README.md").write_text("# qshell\n\nA terminal coding agent.\n")


def qwen_style(params: CacheSafeParams, *, keep_tools: bool) -> str:
    """The same fork built the Qwen Code way: last 40 history entries, tools removed."""
    history = [*params.request.messages, params.reply][-QWEN_HISTORY_ENTRIES:]
    update: dict[str, Any] = {"messages": [*history, Message.user(SUGGESTION_PROMPT)]}
    if not keep_tools:
        update["tools"] = []
    return serialize(build_body(params.request.model_copy(update=update)))


VARIANTS = ("qshell", "qwen-style", "cut only")


@dataclass
class Row:
    """One suggestion: prompt characters sent and shared, per fork variant."""

    turn: int
    entries: int  # history messages in the fork before the prompt (main request + reply)
    reference: int  # characters of the main request's tools + messages + its reply
    sent: dict[str, int]  # characters each variant's fork would send
    shared: dict[str, int]  # of those, the identical prefix of the reference
    speculation_share: float  # the same measure for the speculation's first request


def one_session(server: ScriptedLLMServer, root: Path) -> tuple[list[Row], list[float]]:
    provider = OpenAIProvider(server.openai_base_url, server.api_key)
    session = Session(
        provider=provider,
        model="bench",
        system_prompt=build_system_prompt(root),
        tools=default_tools(),
        tool_context=ToolContext(paths=PathResolver(root, home=root)),
    )
    runner = MainToolRunner(ApprovalMode.YOLO, interactive=False)
    rows: list[Row] = []
    latencies: list[float] = []
    for number, turn in enumerate(TURNS, 1):
        events = list(run_turn(session, f"{turn.prompt} (t{number:02d})", runner, CancelToken()))
        if not isinstance(events[-1], TurnFinished):
            raise SystemExit(f"turn {number} did not finish: {events[-1]}")
        params = session.cache_safe
        assert params is not None
        main_body: dict[str, Any] = server.requests[-1].body
        started = time.perf_counter()
        result = generate_suggestion(provider, params, CancelToken())
        latencies.append(time.perf_counter() - started)
        if result.text is None:
            raise SystemExit(f"turn {number}: no suggestion ({result.reason})")
        fork: RecordedRequest = server.requests[-1]
        speculation = speculate(server, session, result.text, root.parent / "overlays").body
        cached = reference(main_body, params.reply)
        forks = {
            "qshell": serialize(fork.body),
            "qwen-style": qwen_style(params, keep_tools=False),
            "cut only": qwen_style(params, keep_tools=True),
        }
        rows.append(
            Row(
                turn=number,
                entries=len(params.request.messages) + 1,
                reference=len(cached),
                sent={k: len(v) for k, v in forks.items()},
                shared={k: common_prefix(v, cached) for k, v in forks.items()},
                speculation_share=shared_share(speculation, main_body, params.reply),
            )
        )
    provider.close()
    return rows, latencies


def speculate(
    server: ScriptedLLMServer, session: Session, prompt: str, base: Path
) -> RecordedRequest:
    """Speculate `prompt` on a fork of `session` (on a private overlay under `base`, then
    discarded); returns the speculation's first request as the server received it."""
    before = len(server.requests)
    overlay = Overlay.create(session.project_root, session.tool_context.paths, base_dir=base)
    spec = Speculation(session, prompt, overlay)
    spec.run()
    overlay.discard()
    if spec.status is not Status.COMPLETED:
        raise SystemExit(f"the speculation of {prompt!r} ended {spec.status}")
    return server.requests[before]


def share(rows: list[Row], variant: str) -> float:
    """Shared prompt characters over all prompt characters sent, across `rows`."""
    return sum(r.shared[variant] for r in rows) / sum(r.sent[variant] for r in rows)


def reused(rows: list[Row], variant: str) -> float:
    """Shared characters over the main requests' cacheable characters, across `rows`."""
    return sum(r.shared[variant] for r in rows) / sum(r.reference for r in rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.suggestion_prefix")
    parser.add_argument("--runs", type=int, default=5, help="repeat the 10-turn session")
    args = parser.parse_args(argv)
    latencies: list[float] = []
    rows: list[Row] = []
    with ScriptedLLMServer(api_key="bench-key") as server, tempfile.TemporaryDirectory() as tmp:
        for run in range(args.runs):
            root = Path(tmp) / f"run{run}"
            root.mkdir()
            make_project(root)
            server.clear_rules()
            script(server)
            run_rows, run_latencies = one_session(server, root)
            rows = rows or run_rows
            latencies += run_latencies
        violations = list(server.violations)
    print("share = identical-prefix chars / chars sent; reused = of the main request + reply")
    header = "".join(f"  {v + ' share':>16} {'reused':>7}" for v in VARIANTS)
    print(f"turn  entries  prompt chars{header}  speculation share")
    for r in rows:
        cells = "".join(
            f"  {r.shared[v] / r.sent[v]:>16.2%} {r.shared[v] / r.reference:>7.1%}"
            for v in VARIANTS
        )
        print(
            f"{r.turn:>4}  {r.entries:>7}  {r.sent['qshell']:>12,}{cells}"
            f"  {r.speculation_share:>17.2%}"
        )
    cells = "".join(f"  {share(rows, v):>16.2%} {reused(rows, v):>7.1%}" for v in VARIANTS)
    print(f" all  {'':>7}  {sum(r.sent['qshell'] for r in rows):>12,}{cells}")
    overall = share(rows, "qshell")
    print(
        f"overall qshell share {overall:.2%} (goal ≥ {GOAL_SHARE:.0%}: "
        f"{'met' if overall >= GOAL_SHARE else 'not met'}); the unshared tail of every qshell "
        f"fork is the prompt message alone ({len(SUGGESTION_PROMPT):,} chars of prompt)"
    )
    lowest = min(r.speculation_share for r in rows)
    print(
        f"speculation first requests: lowest share {lowest:.2%} (goal ≥ {GOAL_SHARE:.0%}: "
        f"{'met' if lowest >= GOAL_SHARE else 'not met'}); their tail is the prompt alone"
    )
    print(report("suggestion latency", latencies))
    for violation in violations:
        print(f"server violation: {violation}")
    return 1 if violations else 0


if __name__ == "__main__":
    raise SystemExit(main())
