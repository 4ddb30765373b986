"""qshell against a server nobody here wrote: llama.cpp's OpenAI-compatible server with the
bundled Qwen2.5-Coder-0.5B-Instruct model, through qshell's own provider, loop and command line.

Timings are printed side by side (run with `-s` to see them), never asserted as absolute
numbers; the one timing assertion compares two requests measured in the same test.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import httpx

from qshell.agent.events import ToolFinished, TurnFailed, TurnFinished
from qshell.agent.loop import run_turn
from qshell.agent.session import Session, check_history
from qshell.cancel import CancelToken
from qshell.config import BUNDLED_MODEL_NAME, ApprovalMode
from qshell.errors import Cancelled, ContextTooLong
from qshell.followup.suggestion import generate_suggestion
from qshell.llm.base import StreamDone, StreamEvent, StreamText
from qshell.llm.fork import CacheSafeParams
from qshell.llm.local import LocalServer
from qshell.llm.local_provider import LocalProvider
from qshell.llm.messages import ChatRequest, Message, ToolSpec
from qshell.permissions.runner import MainToolRunner
from qshell.tools import default_tools
from tests.agent.scripted import session_for
from tests.e2e.helpers import run_qshell
from tests.local.procs import alive, children_of
from tests.waiting import wait_until

MODEL = BUNDLED_MODEL_NAME
READ_FILE = ToolSpec(
    name="read_file",
    description="Read a text file.",
    parameters={
        "type": "object",
        "properties": {"path": {"type": "string"}},
        "required": ["path"],
    },
)


def ask(text: str, **fields: object) -> ChatRequest:
    return ChatRequest(
        model=MODEL,
        system="You are a helpful assistant.",
        messages=[Message.user(text)],
        **fields,
    )


def collect(events: Iterator[StreamEvent]) -> tuple[list[str], StreamDone]:
    texts: list[str] = []
    done = None
    for event in events:
        if isinstance(event, StreamText):
            texts.append(event.text)
        else:
            done = event
    assert isinstance(done, StreamDone)
    return texts, done


def test_text_streams_in_pieces_and_ends_with_the_streams_usage(local_provider):
    texts, done = collect(
        local_provider.stream(ask("Name three colours.", max_tokens=40), CancelToken())
    )
    assert len(texts) > 1, "the answer should arrive as several deltas"
    assert "".join(texts).strip() == done.message.text.strip() != ""
    assert done.stop_reason in ("end_turn", "max_tokens")
    # llama.cpp's server honours stream_options.include_usage
    assert done.usage.known is True
    assert done.usage.prompt_tokens > 0 and done.usage.completion_tokens > 0


def test_a_forced_tool_call_is_held_to_the_calls_schema_and_becomes_one_call(
    local_server: LocalServer, local_provider: LocalProvider
):
    request = ask("Read the file notes.txt", tools=[READ_FILE], tool_choice="read_file")
    # first look at the wire: the reply is text held to the call's JSON schema
    body = local_provider._body(request)
    assert body["stream"] is True and "tools" not in body
    assert body["response_format"]["type"] == "json_schema"
    pieces = []
    with (
        httpx.Client(timeout=120) as client,
        client.stream(
            "POST",
            f"{local_server.base_url}/chat/completions",
            json=body,
            headers={"authorization": f"Bearer {local_server.api_key}"},
        ) as response,
    ):
        for line in response.iter_lines():
            if line.startswith("data:") and line[5:].strip() != "[DONE]":
                for choice in json.loads(line[5:])["choices"]:
                    pieces.append((choice.get("delta") or {}).get("content") or "")
    reply = json.loads("".join(pieces))
    assert reply["name"] == "read_file" and set(reply["arguments"]) == {"path"}
    assert isinstance(reply["arguments"]["path"], str)
    # then through qshell's provider: one call, its arguments a JSON object
    _, done = collect(local_provider.stream(request, CancelToken()))
    calls = done.message.tool_calls
    assert len(calls) == 1
    assert calls[0].name == "read_file"
    assert isinstance(calls[0].parsed_arguments(), dict)
    assert done.stop_reason == "tool_use"


def test_cancelling_mid_stream_frees_the_server_for_the_next_request(local_provider):
    cancel = CancelToken()
    started = time.monotonic()
    seen = 0
    try:
        for event in local_provider.stream(
            ask("Write a very long story about a lighthouse keeper.", max_tokens=2000), cancel
        ):
            if isinstance(event, StreamText):
                seen += 1
                if seen == 5:
                    cancel.cancel()
    except Cancelled:
        pass
    else:
        raise AssertionError("the cancelled stream ended without Cancelled")
    cancelled_after = time.monotonic() - started
    started = time.monotonic()
    _, done = collect(local_provider.stream(ask("Say OK.", max_tokens=10), CancelToken()))
    next_took = time.monotonic() - started
    print(f"\ncancelled after {cancelled_after:.2f} s; the next request took {next_took:.2f} s")
    assert done.message.text.strip()
    # had the 2,000-token story kept the single slot busy, the next answer would wait for it
    assert next_took < 10 * max(cancelled_after, 0.2)


def test_two_requests_at_once_queue_and_both_complete(local_provider):
    from concurrent.futures import ThreadPoolExecutor

    def answer(topic: str) -> StreamDone:
        request = ask(f"Write a long story about {topic}.", max_tokens=40)
        return collect(local_provider.stream(request, CancelToken()))[1]

    with ThreadPoolExecutor(2) as pool:
        first = pool.submit(answer, "a cat")
        second = pool.submit(answer, "a dog")
        answers = [first.result(timeout=120), second.result(timeout=120)]
    # Both ran to their token limit. With llama.cpp's default (interrupt_requests) the
    # second request would have cut the first short, which then ends without a reason.
    assert [a.stop_reason for a in answers] == ["max_tokens", "max_tokens"]


def test_a_second_request_sharing_a_long_prefix_is_much_faster(local_provider):
    facts = " ".join(f"Fact {i}: the project keeps module {i} in src/m{i}.py." for i in range(120))
    system = f"You answer questions about a project.\n{facts}"

    def timed(question: str) -> float:
        request = ChatRequest(
            model=MODEL, system=system, messages=[Message.user(question)], max_tokens=16
        )
        started = time.monotonic()
        collect(local_provider.stream(request, CancelToken()))
        return time.monotonic() - started

    cold = timed("Where is module 7?")
    warm = timed("Where is module 99?")
    print(f"\nlong prefix: first answer {cold:.2f} s, shared-prefix answer {warm:.2f} s")
    assert warm < cold / 2


def local_session(provider: LocalProvider, tmp_path, **options: Any) -> Session:
    return session_for(
        provider,
        tmp_path,
        default_tools(),
        environ={},
        model=MODEL,
        system_prompt="You are a coding assistant. Use the tools.",
        compact_tools=True,
        final_round_without_tools=True,
        **options,
    )


class ForcedFirstRound:
    """The local provider, forcing one tool on the first round and recording requests."""

    name = "local"

    def __init__(self, inner: LocalProvider, tool: str) -> None:
        self.inner = inner
        self.tool = tool
        self.requests: list[ChatRequest] = []

    def stream(self, request: ChatRequest, cancel: CancelToken) -> Iterator[StreamEvent]:
        if not self.requests:
            request = request.model_copy(update={"tool_choice": self.tool})
        self.requests.append(request)
        return self.inner.stream(request, cancel)


def test_the_tiny_models_nonsense_tool_arguments_become_tool_errors_it_sees(
    local_provider, tmp_path
):
    (tmp_path / "app.py").write_text("print('hello')\n")
    forced = ForcedFirstRound(local_provider, "edit")
    session = local_session(forced, tmp_path, max_turns=2)  # type: ignore[arg-type]
    runner = MainToolRunner(ApprovalMode.AUTO_EDIT, interactive=False)
    events = list(run_turn(session, "Fix the bug in app.py", runner, CancelToken()))
    finished = [e for e in events if isinstance(e, ToolFinished)]
    assert finished and finished[0].name == "edit"
    assert finished[0].result.error is not None, "nonsense arguments should fail as a tool error"
    assert isinstance(events[-1], TurnFinished), events[-1]
    assert check_history(session.history) == []
    assert (tmp_path / "app.py").read_text() == "print('hello')\n"
    # the next (answer) round shows the model its error, as user text before the prompt
    second = local_provider._body(forced.requests[1])
    prompt = second["messages"][-1]["content"]
    assert "The edit call failed: Error:" in prompt
    assert finished[0].result.error.message.splitlines()[0] in prompt


def test_a_turn_with_tools_always_ends_in_an_answer(local_provider, tmp_path):
    (tmp_path / "notes.txt").write_text("remember the milk\n")
    session = local_session(local_provider, tmp_path, max_turns=3)
    runner = MainToolRunner(ApprovalMode.DEFAULT, interactive=False)
    events = list(run_turn(session, "What is in notes.txt?", runner, CancelToken()))
    assert not any(isinstance(e, TurnFailed) for e in events), events[-1]
    assert isinstance(events[-1], TurnFinished)
    assert session.stats.rounds <= 3
    assert check_history(session.history) == []


def test_a_suggestion_request_is_served_by_the_local_model(local_provider, tmp_path):
    session = local_session(local_provider, tmp_path, max_turns=1)
    runner = MainToolRunner(ApprovalMode.DEFAULT, interactive=False)
    list(run_turn(session, "Say hello.", runner, CancelToken()))
    list(run_turn(session, "Now say goodbye.", runner, CancelToken()))
    params = session.cache_safe
    assert isinstance(params, CacheSafeParams)
    result = generate_suggestion(local_provider, params, CancelToken())
    # the small model predicts poorly; what matters is a served request and a named outcome
    assert result.reason != "error", result
    if result.reason != "too_long":  # a reply that ran on is cut before its usage comes
        assert result.usage is not None and result.candidate is not None
        assert (result.text is None) != (result.reason is None)
    print(f"\nsuggestion candidate {result.candidate!r}: {result.reason or 'shown'}")


def test_print_mode_with_json_output_runs_offline_by_default(tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    (project / "hello.py").write_text("print('hi')\n")
    started = time.monotonic()
    run = run_qshell("-p", "Say hello.", "-o", "json", cwd=project, timeout_s=300)
    took = time.monotonic() - started
    assert run.code == 0, run.stderr
    record = json.loads(run.stdout)
    assert record["type"] == "result" and record["is_error"] is False
    assert isinstance(record["result"], str) and record["result"].strip()
    assert "offline model" in run.stderr and "OPENAI_API_KEY" in run.stderr
    assert "Traceback" not in run.stderr
    print(f"\nqshell -p (start the server, join the model once, answer): {took:.2f} s")


# The project root is in the system prompt, so the exact words change with the temporary
# directory's name ("Hello, I'm a coder. What can I help you with?" in one, "I'm ready to
# help. What's the question?" in another): the test accepts any greeting or offer of help.
GREETING = re.compile(r"\b(?:hello|hi|hey|greetings|welcome|help|assist)\b", re.IGNORECASE)
TOOL_TALK = re.compile(r"\b(?:tools?|read_file|write_file|edit|shell|I used)\b", re.IGNORECASE)


def test_say_hello_on_the_default_offline_model_answers_with_a_greeting_not_tool_talk(
    tmp_path, local_model_cache
):
    """The first command a new user types: before, the model asked for write_file, print
    mode refused it, and the answer round told it "(I used the write_file tool.)", which it
    repeated as its answer."""
    project = tmp_path / "project"
    project.mkdir()
    (project / "README.md").write_text("# demo\n\nA small demo project.\n")
    (project / "notes.txt").write_text("- buy milk\n")
    run = run_qshell("-p", "say hello", "-o", "stream-json", cwd=project, timeout_s=300)
    assert run.code == 0, run.stderr
    records = [json.loads(line) for line in run.stdout.splitlines()]
    assert [r for r in records if r["type"] == "tool_use"] == [], "a greeting needs no tool"
    answer = records[-1]["result"]
    assert GREETING.search(answer), answer
    assert not TOOL_TALK.search(answer), answer
    assert sorted(p.name for p in project.iterdir()) == ["README.md", "notes.txt"]


PRICETAG = {
    "app.py": "def discount(price, pct):\n    return price * pct / 100\n\n\n"
    "def add_vat(price, rate=0.2):\n    return round(price * (1 + rate), 2)\n",
    "test_app.py": "from app import add_vat, discount\n\n\ndef test_discount():\n"
    "    assert discount(100, 20) == 80\n\n\ndef test_add_vat():\n"
    "    assert add_vat(10) == 12\n",
}


def everyday(tmp_path, prompt: str, *flags: str) -> tuple[list[dict[str, Any]], str]:
    """`qshell -p PROMPT` on the default offline model in a two-file Python project: its
    stream-json records and its final answer."""
    project = tmp_path / "pricetag"
    project.mkdir()
    for name, text in PRICETAG.items():
        (project / name).write_text(text)
    run = run_qshell("-p", prompt, "-o", "stream-json", *flags, cwd=project, timeout_s=300)
    assert run.code == 0, run.stderr
    records = [json.loads(line) for line in run.stdout.splitlines()]
    assert {p.name: p.read_text() for p in project.glob("*.py")} == PRICETAG  # unchanged
    return records, str(records[-1]["result"])


def test_asked_to_explain_a_file_the_offline_model_is_shown_it_and_names_what_it_holds(
    tmp_path, local_model_cache
):
    records, answer = everyday(tmp_path, "explain app.py")
    assert [r for r in records if r["type"] == "tool_use"] == []  # app.py came attached
    assert "discount" in answer and "add_vat" in answer, answer
    assert not TOOL_TALK.search(answer), answer


def test_asked_to_run_the_tests_the_offline_model_runs_them_and_names_the_failing_one(
    tmp_path, local_model_cache
):
    records, answer = everyday(tmp_path, "run the tests", "-y")
    [call] = [r for r in records if r["type"] == "tool_use"]
    assert call["tool_name"] == "shell" and "pytest" in call["parameters"]["command"]
    assert "discount" in answer, answer  # the failing test, or the function it tests


def test_the_server_never_outlives_qshell_even_when_qshell_is_killed(local_model_cache, tmp_path):
    script = (
        "import sys, time\n"
        "from pathlib import Path\n"
        "from qshell.llm.local import LocalModel, LocalServer\n"
        f"model = LocalModel.choose(model_path='', cache_dir=Path({str(local_model_cache)!r}), n_ctx=2048)\n"
        f"server = LocalServer(model, log_dir=Path({str(tmp_path)!r}))\n"
        "server.start()\n"
        "print(server.process.pid, flush=True)\n"
        "time.sleep(600)\n"
    )
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert parent.stdout is not None
    child_pid = int(parent.stdout.readline())
    assert alive(child_pid)
    parent.send_signal(signal.SIGKILL)  # no atexit, no finally: only the pipe is left
    parent.wait()
    assert wait_until(lambda: not alive(child_pid), 30), (
        f"server process {child_pid} outlived its killed parent"
    )


def too_long_error(provider: LocalProvider) -> ContextTooLong:
    request = ask("word " * 9000, max_tokens=10)  # the server has 8,192 tokens of context
    try:
        collect(provider.stream(request, CancelToken()))
    except ContextTooLong as error:
        return error
    raise AssertionError("an over-long prompt was accepted")


def test_a_prompt_longer_than_the_context_window_is_context_too_long(local_provider):
    error = too_long_error(local_provider)
    assert "context" in str(error)
    _, done = collect(local_provider.stream(ask("Say OK.", max_tokens=5), CancelToken()))
    assert done.message.text.strip()


def test_a_prompt_too_long_for_the_local_model_says_which_setting_raises_its_context(
    local_provider,
):
    assert "local.contextSize" in str(too_long_error(local_provider))


def test_ctrl_c_in_print_mode_exits_130_and_stops_the_server(tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    qshell = subprocess.Popen(
        [sys.executable, "-m", "qshell", "-p", "Write a very long story about the sea."],
        cwd=project,
        env={**os.environ, "QSHELL_MAX_TURNS": "1"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert qshell.stderr is not None
    for line in qshell.stderr:
        if "local model ready" in line:
            break
    servers = children_of(qshell.pid)
    assert len(servers) == 1
    time.sleep(1.0)  # the turn is under way
    qshell.send_signal(signal.SIGINT)
    assert qshell.wait(60) == 130
    assert wait_until(lambda: not alive(servers[0]), 15), (
        "the model server outlived qshell after Ctrl-C"
    )


def test_a_wrong_key_is_an_auth_error_from_the_real_server(local_server: LocalServer):
    from qshell.errors import AuthError
    from qshell.llm.openai import OpenAIProvider

    provider = OpenAIProvider(local_server.base_url, "not-the-key")
    try:
        collect(provider.stream(ask("Say OK.", max_tokens=5), CancelToken()))
    except AuthError as error:
        assert "not-the-key" not in str(error)
    else:
        raise AssertionError("the server accepted a wrong key")
    finally:
        provider.close()
