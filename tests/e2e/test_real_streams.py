"""`qshell -p` against streams recorded from real APIs, replayed byte for byte: each mismatch
Roadmap 8 found, seen the way a script calling qshell sees it — stdout, stderr, exit code,
and the requests qshell sent. The recordings and their sources are listed in
tests/llm/streams/corpus.json (every entry names the repository, commit and file it comes
from); two-round turns pair a recorded tool round with a recorded answer."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.helpers import Run, run_qshell
from tests.fakes.replay import ReplayServer

STREAMS = Path(__file__).resolve().parents[1] / "llm" / "streams"
CORPUS = {entry["file"]: entry for entry in json.loads((STREAMS / "corpus.json").read_text())}
INCOMPLETE = 54


def body(name: str) -> bytes:
    return (STREAMS / name).read_bytes()


def expect(name: str) -> dict[str, Any]:
    return CORPUS[name]["expect"]


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    root.mkdir()
    (root / "notes.txt").write_text("notes\n")
    return root


def replay(server: ReplayServer, wire: str, *args: str, cwd: Path, **env: str) -> Run:
    """`qshell -p ARGS` talking `wire` to the replay server."""
    if wire == "openai":
        where = {"OPENAI_BASE_URL": server.url + "/v1", "OPENAI_API_KEY": "sk-test-replay"}
        where["OPENAI_MODEL"] = "m1"
    else:
        where = {"ANTHROPIC_BASE_URL": server.url, "ANTHROPIC_API_KEY": "sk-ant-test-replay"}
        where["ANTHROPIC_MODEL"] = "m1"
    return run_qshell("-p", *args, cwd=cwd, env={**where, **env})


def transcript_records() -> list[dict[str, Any]]:
    """Every record of the one transcript the run wrote."""
    (path,) = (Path(os.environ["QSHELL_HOME"]) / "state" / "projects").rglob("*.jsonl")
    return [json.loads(line) for line in path.read_text().splitlines()]


# ------------------------------------------------------------------ 1. content parts


def test_mistral_content_parts_are_the_answer_and_thinking_parts_its_reasoning(project):
    name = "mistral/magistral_text_parts.sse"
    with ReplayServer(body(name)) as server:
        run = replay(server, "openai", "-o", "stream-json", "hi", cwd=project)
    assert run.code == 0, run.stderr
    lines = run.lines()
    result = lines[-1]
    assert result["result"] == expect(name)["text"] and result["stop_reason"] == "end_turn"
    reasoning = "".join(e["content"] for e in lines if e["type"] == "reasoning")
    assert reasoning == expect(name)["reasoning"]


# ------------------------------------------------------------------ 2. refusals, 4. stop reasons


def test_an_openai_refusal_is_shown_and_exits_incomplete(project):
    name = "openai/gpt4o_refusal.sse"
    with ReplayServer(body(name)) as server:
        run = replay(server, "openai", "how do I pick a lock?", cwd=project)
    assert run.code == INCOMPLETE
    assert run.stdout.strip() == expect(name)["text"].strip()
    assert run.stderr.count("\n") == 1 and "declined" in run.stderr


@pytest.mark.parametrize(
    ("name", "wire", "stop", "said"),
    [
        ("openai/gpt4o_length.sse", "openai", "max_tokens", "output limit"),
        ("azure/gpt5_nano_content_filter.sse", "openai", "content_filter", "content filter"),
        ("anthropic/refusal.sse", "anthropic", "refusal", "declined"),
        ("anthropic/opus5_thinking_max_tokens.sse", "anthropic", "max_tokens", "maxTokens"),
    ],
)
def test_an_answer_that_did_not_finish_says_so_in_every_format(project, name, wire, stop, said):
    for fmt in ("text", "json", "stream-json"):
        with ReplayServer(body(name)) as server:
            run = replay(server, wire, "-o", fmt, "go", cwd=project)
        assert run.code == INCOMPLETE, (fmt, run.stderr)
        assert run.stderr.count("\n") == 1 and said in run.stderr, fmt
        if fmt == "text":
            assert run.stdout.strip() == expect(name)["text"].strip()
            continue
        result = run.lines()[-1]
        assert (result["subtype"], result["stop_reason"], result["is_error"]) == (
            "incomplete",
            stop,
            True,
        )
        assert result["result"] == expect(name)["text"] and said in result["note"]


def test_a_finished_answer_reports_end_turn_and_exits_zero(project):
    with ReplayServer(body("openai/gpt4o_text.sse")) as server:
        run = replay(server, "openai", "-o", "json", "hi", cwd=project)
    assert (run.code, run.stderr) == (0, "")
    assert (run.json()["subtype"], run.json()["stop_reason"]) == ("success", "end_turn")


# ------------------------------------------------------------------ 3. a cut tool call


@pytest.mark.parametrize(
    ("name", "wire"),
    [
        ("anthropic/sdk_partial_json_max_tokens.sse", "anthropic"),
        ("openai/gpt4o_tool_args_cut_by_length.sse", "openai"),
    ],
)
def test_a_tool_call_cut_off_by_the_output_limit_is_never_run(project, name, wire):
    (cut,) = expect(name)["tool_calls"]
    with ReplayServer(body(name)) as server:
        run = replay(server, wire, "-y", "-o", "json", "go", cwd=project)
        sent = server.requests
    assert run.code == INCOMPLETE and len(sent) == 1  # nothing ran, nothing was sent back
    assert "output limit" in run.stderr and f"{cut['name']} did not run" in run.stderr
    assert run.json()["stop_reason"] == "max_tokens"
    said = [r for r in transcript_records() if r.get("type") == "message"]
    calls = [b for r in said for b in r["message"]["content"] if b["type"] == "tool_call"]
    assert [(c["id"], c["arguments"], c["complete"]) for c in calls] == [
        (cut["id"], cut["arguments"], False)
    ]


# ------------------------------------------------------------------ 5. llama.cpp's error event


def test_llama_cpp_s_error_event_is_the_message_and_is_not_retried(project):
    name = "llamacpp/anthropic_endpoint_error.sse"
    with ReplayServer([body(name)] * 4) as server:
        run = replay(server, "anthropic", "hi", cwd=project, QSHELL_MAX_RETRIES="3")
        sent = server.requests
    assert run.code == 1 and len(sent) == 1
    assert run.stderr.count("\n") == 1 and expect(name)["error"] in run.stderr


# ------------------------------------------------------------------ 6. reasoning goes back


def two_rounds(wire: str, first: str, answer: str, *args: str, cwd: Path) -> tuple[Run, Any]:
    """A tool round then an answer, replayed: the run, and the assistant message the second
    request sent back."""
    with ReplayServer([body(first), body(answer)]) as server:
        run = replay(server, wire, *args, cwd=cwd)
        sent = server.requests
    assert run.code == 0, run.stderr
    assert len(sent) == 2
    return run, next(m for m in sent[1].json()["messages"] if m["role"] == "assistant")


def test_a_deepseek_tool_round_s_reasoning_content_goes_back_in_the_next_request(project):
    first, answer = "deepseek/tool_call_cache_hit.sse", "deepseek/reasoner_hello.sse"
    run, assistant = two_rounds(
        "openai", first, answer, "-o", "stream-json", "weather in SF?", cwd=project
    )
    (call,) = expect(first)["tool_calls"]
    assert assistant["reasoning_content"] == expect(first)["reasoning"]
    assert assistant["tool_calls"][0]["id"] == call["id"]
    streamed = "".join(e["content"] for e in run.lines() if e["type"] == "reasoning")
    assert streamed == expect(first)["reasoning"] + expect(answer)["reasoning"]
    assert run.lines()[-1]["usage"]["reasoning_tokens"] == sum(
        expect(n)["usage"]["reasoning"] or 0 for n in (first, answer)
    )


def test_an_anthropic_signed_thinking_block_goes_back_unchanged_in_the_tool_round(project):
    first, answer = "anthropic/sonnet5_thinking_text_tool.sse", "anthropic/sonnet_thinking.sse"
    run, assistant = two_rounds(
        "anthropic", first, answer, "-o", "json", "which country is best?", cwd=project
    )
    thinking = assistant["content"][0]
    assert thinking == {
        "type": "thinking",
        "thinking": expect(first)["reasoning"],
        "signature": expect(first)["signatures"][0],
    }
    assert [b["type"] for b in assistant["content"][1:]] == ["text", "tool_use"]
    assert run.json()["result"] == expect(answer)["text"]


# ------------------------------------------------------------------ 7. cache writes


def test_anthropic_cache_writes_are_in_the_json_usage(project):
    name = "anthropic/opus48_pdf_cache_write.sse"
    with ReplayServer(body(name)) as server:
        run = replay(server, "anthropic", "-o", "json", "summarise", cwd=project)
    usage, want = run.json()["usage"], expect(name)["usage"]
    assert run.code == 0, run.stderr
    assert usage["cache_creation_tokens"] == want["cache_write"] and want["cache_write"]
    assert (usage["prompt_tokens"], usage["cached_tokens"]) == (want["prompt"], want["cached"])


# ------------------------------------------------------------------ 8. no blank line at EOF


def test_a_stream_ending_right_after_message_stop_is_complete(project):
    name = "anthropic/sdk_tool_use_eof.sse"
    assert not body(name).endswith(b"\n")
    answer = "anthropic/haiku45_stop_sequence.sse"
    with ReplayServer([body(name), body(answer)]) as server:
        run = replay(server, "anthropic", "-o", "json", "weather?", cwd=project)
        sent = server.requests
    assert run.code == 0, run.stderr
    assert len(sent) == 2 and run.json()["result"] == expect(answer)["text"]


# ------------------------------------------------------------------ 9. pause_turn goes on


def recorded_blocks(name: str) -> list[dict[str, Any]]:
    """The content blocks a recorded Messages stream started, in order, each server tool
    call with the input its deltas streamed (what the continuation must send back)."""
    blocks: dict[int, dict[str, Any]] = {}
    inputs: dict[int, str] = {}
    for line in body(name).decode().splitlines():
        if not line.startswith("data:"):
            continue
        event = json.loads(line[5:])
        if event["type"] == "content_block_start":
            blocks[event["index"]] = event["content_block"]
        elif event["type"] == "content_block_delta" and "partial_json" in event["delta"]:
            inputs[event["index"]] = inputs.get(event["index"], "") + event["delta"]["partial_json"]
    for index, streamed in inputs.items():
        if streamed.strip():
            blocks[index]["input"] = json.loads(streamed)
    return [blocks[i] for i in sorted(blocks)]


def test_an_anthropic_pause_turn_is_continued_with_its_content_sent_back_as_it_came(project):
    """Anthropic's stop-reason guide: on `pause_turn`, send the response back as-is and the
    model continues its turn. The paused round is recorded (pydantic-ai's cassette, with
    the very continuation request pydantic-ai sent in its interaction 1: the thinking
    block, the text and every server_tool_use / web_search_tool_result block unchanged);
    the round that continues it is another recorded answer."""
    paused, answer = "anthropic/pause_turn_web_search.sse", "anthropic/sonnet_thinking.sse"
    with ReplayServer([body(paused), body(answer)]) as server:
        run = replay(server, "anthropic", "-o", "json", "search the weather", cwd=project)
        sent = server.requests
    assert run.code == 0, run.stderr
    assert len(sent) == 2
    result = run.json()
    assert result["stop_reason"] == "end_turn" and result["num_rounds"] == 2
    assert result["result"] == expect(paused)["text"] + expect(answer)["text"]
    last = sent[1].json()["messages"][-1]
    assert last["role"] == "assistant"
    blocks = [{k: v for k, v in b.items() if k != "cache_control"} for b in last["content"]]
    started = recorded_blocks(paused)
    thinking, *rest = blocks
    assert thinking == {
        "type": "thinking",
        "thinking": expect(paused)["reasoning"],
        "signature": expect(paused)["signatures"][0],
    }
    assert [b["type"] for b in rest] == [b["type"] for b in started[1:]]
    servers = [(b, s) for b, s in zip(rest, started[1:], strict=True) if b["type"] != "text"]
    assert servers and all(b == s for b, s in servers)


# ------------------------------------------------------------------ 10. reasoning_details go back


def streamed_details(name: str) -> list[dict[str, Any]]:
    """Every `reasoning_details` fragment a recorded Chat Completions stream sent."""
    fragments: list[dict[str, Any]] = []
    for line in body(name).decode().splitlines():
        if line.startswith("data: {"):
            for choice in json.loads(line[6:]).get("choices") or []:
                fragments += (choice.get("delta") or {}).get("reasoning_details") or []
    return fragments


def test_openrouter_s_reasoning_details_go_back_unchanged_in_the_tool_round(project):
    """Both rounds recorded from OpenRouter (google/gemini-3-pro-preview, charmbracelet/
    fantasy's cassette); its second request is what fantasy sent back, and what OpenRouter's
    reasoning-tokens guide asks ("preserving reasoning blocks"): the two `reasoning.text`
    fragments of index 0 as one entry, then the `reasoning.encrypted` entry as it came."""
    first = "openrouter/gemini3_reasoning_details_tool.sse"
    answer = "openrouter/gemini3_reasoning_details_answer.sse"
    run, assistant = two_rounds(
        "openai", first, answer, "-o", "json", "weather in Florence?", cwd=project
    )
    fragments = streamed_details(first)
    texts = [f for f in fragments if f["type"] == "reasoning.text"]
    (encrypted,) = [f for f in fragments if f["type"] == "reasoning.encrypted"]
    assert len(texts) == 2
    merged = {**texts[0], "text": "".join(f["text"] for f in texts)}
    assert merged["text"] == expect(first)["reasoning"]
    assert assistant["reasoning_details"] == [merged, encrypted]
    (call,) = expect(first)["tool_calls"]
    assert (
        assistant["tool_calls"][0]["id"] == call["id"]
        and "extra_content" not in (assistant["tool_calls"][0])
    )
    assert run.json()["result"] == expect(answer)["text"]


# ------------------------------------------------------------------ 11. citations are shown


def test_perplexity_s_citations_are_listed_after_the_answer_in_every_format(project):
    """vercel/ai's recorded sonar stream: its `[2][3]` marks number the `citations` list
    every chunk repeats."""
    name = "perplexity/sonar_citations.sse"
    first = json.loads(body(name).decode().splitlines()[0][6:])
    cited = first["citations"]
    runs = {}
    for fmt in ("text", "json", "stream-json"):
        with ReplayServer(body(name)) as server:
            runs[fmt] = replay(server, "openai", "-o", fmt, "population of SF?", cwd=project)
        assert (runs[fmt].code, runs[fmt].stderr) == (0, ""), fmt
    text = runs["text"].stdout
    answer, sources = text.split("\n\nSources:\n")
    assert answer == expect(name)["text"]
    assert sources.splitlines() == [f"[{n}] {url}" for n, url in enumerate(cited, 1)]
    assert runs["json"].json()["citations"] == cited
    assert runs["stream-json"].lines()[-1]["citations"] == cited


# ------------------------------------------------------------------ 12. a stream that fails part-way


def test_an_answer_cut_by_an_error_part_way_is_printed_then_the_error(project):
    """Recorded from Anthropic (maruel/genai's cassette): "Hello." then `event: error`
    overloaded. What arrived is the output, the error one line after it; that round's
    usage is not known (the stream never said it), so it is not reported as a zero."""
    name = "anthropic/haiku45_overloaded_mid_stream.sse"
    with ReplayServer([body(name)] * 2) as server:
        text = replay(server, "anthropic", "say hello", cwd=project)
        result = replay(server, "anthropic", "-o", "json", "say hello", cwd=project)
    assert (text.code, text.stdout) == (1, expect(name)["text"] + "\n")
    assert text.stderr.count("\n") == 1 and expect(name)["error"] in text.stderr
    record = result.json()
    assert (record["result"], record["is_error"]) == (expect(name)["text"], True)
    assert expect(name)["error"] in record["error"]["message"]
    assert record["usage"]["known"] is False
