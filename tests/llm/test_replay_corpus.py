"""Replays real provider streams through the real providers and checks what comes out.

Each entry of `tests/llm/streams/corpus.json` names a response body recorded from a real
API or server (the fixtures of the official SDKs and of other open clients: openai-python,
anthropic-sdk-python, pydantic-ai, vercel/ai, maruel/genai, …), where it came from
(`source`: repository, commit, path and test or cassette entry), how its bytes were changed
if at all (`derived`), and what those bytes contain in qshell's terms (`expect`: answer
text, reasoning text, client tool calls, stop reason, usage, in-stream error). The bytes
are served unchanged by `tests.fakes.replay.ReplayServer` to `OpenAIProvider` or
`AnthropicProvider`, and every field is compared: text (and the streamed deltas), reasoning
and Anthropic's signatures, each call's id, name, arguments and completeness, the stop
reason, usage with cache reads, cache writes and reasoning tokens, or the error.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from qshell.cancel import CancelToken
from qshell.errors import ProviderError
from qshell.llm.anthropic import AnthropicProvider
from qshell.llm.base import StreamDone, StreamEvent, StreamText, StreamToolCall
from qshell.llm.http import RetryPolicy
from qshell.llm.messages import FINISHED_STOPS, ChatRequest, Message
from qshell.llm.openai import OpenAIProvider
from tests.fakes.replay import ReplayServer

STREAMS_DIR = Path(__file__).parent / "streams"
CORPUS: list[dict[str, Any]] = json.loads((STREAMS_DIR / "corpus.json").read_text("utf-8"))
WIRES = {"openai", "anthropic"}
STOP_REASONS = {
    "end_turn",
    "tool_use",
    "max_tokens",
    "refusal",
    "content_filter",
    "pause_turn",
    "other",
}
EXPECT_KEYS = {"text", "reasoning", "signatures", "tool_calls", "stop_reason", "usage", "error"}
MIN_STREAMS = 30
MIN_PROVIDERS = 8
API_KEY = "sk-test"


def _provider(entry: Mapping[str, Any], server: ReplayServer) -> OpenAIProvider | AnthropicProvider:
    retry = RetryPolicy(max_attempts=1)
    if entry["wire"] == "anthropic":
        return AnthropicProvider(base_url=server.url, api_key=API_KEY, retry=retry)
    return OpenAIProvider(base_url=server.url + "/v1", api_key=API_KEY, retry=retry)


def _request(entry: Mapping[str, Any]) -> ChatRequest:
    return ChatRequest(model=entry["model"], system="", messages=[Message.user("replay")])


def _same(problems: list[str], what: str, actual: Any, expected: Any) -> None:
    if actual != expected:
        problems.append(f"{what}: {actual!r} != expected {expected!r}")


def _check_signatures(problems: list[str], message: Message, expected: list[Any]) -> None:
    """Anthropic's thinking signatures (and redacted data) in order, from `reasoning_blocks`."""
    actual: list[Any] = []
    for block in message.reasoning_blocks:
        if block.redacted:
            actual.append({"redacted": block.redacted})
        elif block.signature:
            actual.append(block.signature)
    _same(problems, "signatures", actual, expected)


def _check_done(done: StreamDone, streamed: str, expect: Mapping[str, Any]) -> list[str]:
    problems: list[str] = []
    message = done.message
    _same(problems, "text", message.text, expect["text"])
    _same(problems, "streamed text (StreamText deltas joined)", streamed, message.text)
    _same(problems, "reasoning", message.reasoning, expect["reasoning"])
    _check_signatures(problems, message, expect["signatures"])
    calls = message.tool_calls
    _same(problems, "tool call count", len(calls), len(expect["tool_calls"]))
    for number, (call, wanted) in enumerate(zip(calls, expect["tool_calls"], strict=False)):
        _same(problems, f"tool call {number} id", call.id, wanted["id"])
        _same(problems, f"tool call {number} name", call.name, wanted["name"])
        # the arguments as streamed, without surrounding blanks; no arguments at all are `{}`
        arguments = wanted["arguments"].strip() or "{}"
        _same(problems, f"tool call {number} arguments", call.arguments, arguments)
        _same(problems, f"tool call {number} complete", call.complete, wanted["complete"])
    _same(problems, "stop_reason", done.stop_reason, expect["stop_reason"])
    usage, wanted_usage = done.usage, expect["usage"]
    if wanted_usage is None:
        _same(problems, "usage.known (the stream reports no usage)", usage.known, False)
    else:
        _same(problems, "usage.known", usage.known, True)
        _same(problems, "usage.prompt_tokens", usage.prompt_tokens, wanted_usage["prompt"])
        _same(
            problems, "usage.completion_tokens", usage.completion_tokens, wanted_usage["completion"]
        )
        _same(problems, "usage.cached_tokens", usage.cached_tokens, wanted_usage["cached"])
        _same(
            problems,
            "usage.cache_creation_tokens",
            usage.cache_creation_tokens,
            wanted_usage["cache_write"],
        )
        _same(problems, "usage.reasoning_tokens", usage.reasoning_tokens, wanted_usage["reasoning"])
    return problems


def _check_announced(events: list[StreamEvent], done: StreamDone) -> list[str]:
    """StreamToolCall: in index order, each the very call the message holds, all before
    StreamDone; a finished round announces every call, a cut one only complete ones."""
    problems: list[str] = []
    announced = [e for e in events if isinstance(e, StreamToolCall)]
    calls = done.message.tool_calls
    _same(problems, "announced indexes", [e.index for e in announced], list(range(len(announced))))
    _same(problems, "announced calls", [e.call for e in announced], calls[: len(announced)])
    if done.stop_reason in FINISHED_STOPS:
        _same(problems, "calls announced in a finished round", len(announced), len(calls))
    elif any(not e.call.complete for e in announced):
        problems.append("an incomplete call was announced")
    last = max((i for i, e in enumerate(events) if isinstance(e, StreamToolCall)), default=-1)
    _same(problems, "StreamDone is last", events.index(done), len(events) - 1)
    if last > events.index(done):
        problems.append("a call was announced after StreamDone")
    return problems


def _described(entry: Mapping[str, Any], problems: list[str]) -> str:
    lines = [f"{entry['file']} ({entry['provider']} {entry['model']}): {entry['exercises']}"]
    lines.append(f"  source: {entry['source']}")
    if entry["derived"]:
        lines.append(f"  derived: {entry['derived']}")
    return "\n".join(lines + [f"  - {p}" for p in problems])


@pytest.mark.parametrize("entry", [pytest.param(e, id=e["file"]) for e in CORPUS])
def test_a_recorded_stream_yields_what_its_bytes_contain(entry: dict[str, Any]) -> None:
    """Serve the recorded body (its source is in `entry["source"]`) and compare the outcome."""
    expect = entry["expect"]
    body = (STREAMS_DIR / entry["file"]).read_bytes()
    with ReplayServer(body) as server:
        provider = _provider(entry, server)
        try:
            if expect["error"] is not None:
                with pytest.raises(ProviderError) as caught:
                    list(provider.stream(_request(entry), CancelToken()))
                problems: list[str] = []
                if expect["error"] not in str(caught.value):
                    problems.append(f"error {str(caught.value)!r} lacks {expect['error']!r}")
                assert not problems, _described(entry, problems)
                return
            try:
                events: list[StreamEvent] = list(provider.stream(_request(entry), CancelToken()))
            except ProviderError as error:
                pytest.fail(_described(entry, [f"raised {type(error).__name__}: {error}"]))
        finally:
            provider.close()
    done = events[-1]
    assert isinstance(done, StreamDone), _described(entry, [f"last event is {done!r}"])
    streamed = "".join(e.text for e in events if isinstance(e, StreamText))
    problems = _check_done(done, streamed, expect) + _check_announced(events, done)
    assert not problems, _described(entry, problems)


def test_the_corpus_spans_enough_providers_and_every_entry_names_its_source() -> None:
    assert len(CORPUS) >= MIN_STREAMS
    assert len({e["provider"] for e in CORPUS}) >= MIN_PROVIDERS
    files = [e["file"] for e in CORPUS]
    assert len(files) == len(set(files)), "two entries share a file"
    for entry in CORPUS:
        assert (STREAMS_DIR / entry["file"]).is_file(), entry["file"]
        assert entry["source"].startswith("github:"), entry["file"]
        assert entry["wire"] in WIRES, entry["file"]
        assert entry["model"] and entry["exercises"], entry["file"]
        assert entry["derived"] is None or entry["derived"].strip(), entry["file"]
        assert set(entry["expect"]) == EXPECT_KEYS, entry["file"]
        assert entry["expect"]["stop_reason"] in STOP_REASONS, entry["file"]
    on_disk = {p.relative_to(STREAMS_DIR).as_posix() for p in STREAMS_DIR.rglob("*.sse")}
    assert on_disk == set(files), "a stream file is missing from corpus.json"


def test_the_replay_server_serves_bodies_in_order_and_records_each_request() -> None:
    by_file = {e["file"]: e for e in CORPUS}
    first, second = by_file["openai/gpt4o_tool_strict.sse"], by_file["openai/gpt4o_text.sse"]
    bodies = [(STREAMS_DIR / e["file"]).read_bytes() for e in (first, second)]
    with ReplayServer(bodies, write_size=7) as server:
        provider = _provider(first, server)
        try:
            rounds = [list(provider.stream(_request(e), CancelToken())) for e in (first, second)]
            with pytest.raises(ProviderError, match="no recorded body left"):
                list(provider.stream(_request(second), CancelToken()))
        finally:
            provider.close()
    calls = [r[-1].message.tool_calls for r in rounds if isinstance(r[-1], StreamDone)]
    assert [c.id for c in calls[0]] == [first["expect"]["tool_calls"][0]["id"]]
    assert isinstance(rounds[1][-1], StreamDone)
    assert rounds[1][-1].message.text == second["expect"]["text"]
    sent = server.requests
    assert [r.path for r in sent] == ["/v1/chat/completions"] * 3
    assert sent[1].json()["model"] == second["model"]
    assert sent[0].headers["authorization"] == f"Bearer {API_KEY}"
