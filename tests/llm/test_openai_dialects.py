"""DashScope's explicit prompt cache, the reasoning-off dialects, the output limit's name and
Mistral's unasked usage (llm/openai_dialects.py): the bytes on the wire over real HTTP, and
that other base URLs get the plain body."""

from __future__ import annotations

import pytest

from qshell.cancel import CancelToken
from qshell.config import Toggle
from qshell.llm.base import StreamDone
from qshell.llm.fork import CacheSafeParams
from qshell.llm.messages import ChatRequest, Message, ToolSpec
from qshell.llm.openai import OpenAIProvider, build_body
from qshell.llm.openai_dialects import (
    dashscope_cache_on,
    is_dashscope,
    reasoning_off_fields,
    token_limit_name,
)
from tests.fakes.llm_server import Reply, ScriptedLLMServer, always

EPHEMERAL = {"type": "ephemeral"}
TOOLS = [
    ToolSpec(name=name, description=f"{name} a file.", parameters={"type": "object"})
    for name in ("read_file", "edit")
]
SYSTEM = "You are a careful coding agent. " * 40


def main_request(model: str = "qwen3-coder-plus", tools: list[ToolSpec] = TOOLS) -> ChatRequest:
    return ChatRequest(
        model=model, system=SYSTEM, messages=[Message.user("fix the bug")], tools=tools
    )


def provider(server: ScriptedLLMServer, setting: Toggle | None = None) -> OpenAIProvider:
    if setting is None:
        return OpenAIProvider(server.openai_base_url, server.api_key)
    return OpenAIProvider(server.openai_base_url, server.api_key, dashscope_cache=setting)


def run(provider: OpenAIProvider, request: ChatRequest) -> StreamDone:
    done = list(provider.stream(request, CancelToken()))[-1]
    assert isinstance(done, StreamDone)
    return done


@pytest.mark.parametrize(
    ("base_url", "expected"),
    [
        ("https://dashscope.aliyuncs.com/compatible-mode/v1", True),
        ("https://dashscope-intl.aliyuncs.com/compatible-mode/v1", True),
        ("https://dashscope-us.aliyuncs.com/compatible-mode/v1", True),
        ("https://eu.dashscope-intl.aliyuncs.com/v1", True),
        ("https://evil.example/dashscope.aliyuncs.com/v1", False),
        ("https://notdashscope.aliyuncs.com/v1", False),
        ("https://api.openai.com/v1", False),
    ],
)
def test_a_dashscope_host_is_one_of_its_hosts_or_a_subdomain(base_url, expected) -> None:
    assert is_dashscope(base_url) is expected
    assert dashscope_cache_on(Toggle.AUTO, base_url) is expected
    assert dashscope_cache_on(Toggle.ON, base_url) and not dashscope_cache_on(Toggle.OFF, base_url)


def test_dashscope_turns_thinking_off_with_enable_thinking_for_any_model() -> None:
    base_url = "https://dashscope.aliyuncs.com/compatible-mode/v1"
    for model in ("qwen3-coder-plus", "qwen-plus", "deepseek-v3.2", "glm-5.1"):
        assert reasoning_off_fields(model, base_url) == {"enable_thinking": False}


def test_with_the_cache_on_the_system_prompt_last_message_and_last_tool_are_marked(
    llm_server,
) -> None:
    llm_server.add_rule(always(), Reply.text("Fixed."))
    run(provider(llm_server, Toggle.ON), main_request())
    (sent,) = llm_server.requests
    assert sent.headers["x-dashscope-cachecontrol"] == "enable"
    system, user = sent.body["messages"]
    assert system == {
        "role": "system",
        "content": [{"type": "text", "text": SYSTEM, "cache_control": EPHEMERAL}],
    }
    assert user["content"] == [{"type": "text", "text": "fix the bug", "cache_control": EPHEMERAL}]
    assert [t.get("cache_control") for t in sent.body["tools"]] == [None, EPHEMERAL]


@pytest.mark.parametrize("setting", [None, Toggle.AUTO, Toggle.OFF])
def test_other_base_urls_get_the_plain_body_by_default(llm_server, setting) -> None:
    llm_server.add_rule(always(), Reply.text("Fixed."))
    run(provider(llm_server, setting), main_request())
    (sent,) = llm_server.requests
    assert "x-dashscope-cachecontrol" not in sent.headers
    assert b"cache_control" not in sent.raw
    assert [m["content"] for m in sent.body["messages"]] == [SYSTEM, "fix the bug"]


def test_a_glm_model_asked_without_tools_keeps_plain_strings(llm_server) -> None:
    llm_server.add_rule(always(), Reply.text("Fixed."))
    run(provider(llm_server, Toggle.ON), main_request("glm-5.1", tools=[]))
    (sent,) = llm_server.requests
    assert b"cache_control" not in sent.raw


def fork_after_main(server: ScriptedLLMServer, setting: Toggle) -> tuple[dict, dict, int]:
    """A main request, then a suggestion fork of it: both bodies and the fork's prompt
    tokens the (fake) provider's cache served."""
    server.add_rule(always(), Reply.text("Fixed."))
    chat = provider(server, setting)
    request = main_request()
    reply = run(chat, request).message
    run(chat, CacheSafeParams.capture(request, reply).fork("what next?"))
    main, fork = server.requests
    assert fork.cached is not None
    return main.body, fork.body, fork.cached.cached_tokens


def test_the_moving_last_message_marker_keeps_a_forks_cached_prefix(llm_server_factory) -> None:
    main, fork, cached = fork_after_main(llm_server_factory(prompt_cache=True), Toggle.ON)
    _, _, cached_plain = fork_after_main(llm_server_factory(prompt_cache=True), Toggle.OFF)
    assert cached == cached_plain > 0  # the markers cost no cached token
    # the main request's last message goes back as a plain string, the marker moves on
    assert fork["messages"][1] == {"role": "user", "content": "fix the bug"}
    assert main["messages"][1]["content"][0]["cache_control"] == EPHEMERAL
    assert fork["messages"][-1]["content"][-1]["cache_control"] == EPHEMERAL
    assert fork["messages"][0] == main["messages"][0] and fork["tools"] == main["tools"]


@pytest.mark.parametrize(
    ("model", "name"),
    [
        ("gpt-5", "max_completion_tokens"),
        ("gpt-5-nano", "max_completion_tokens"),
        ("gpt-5.1-codex", "max_completion_tokens"),
        ("openai/gpt-5.2", "max_completion_tokens"),
        ("o1", "max_completion_tokens"),
        ("o3-mini", "max_completion_tokens"),
        ("o4-mini-2025-04-16", "max_completion_tokens"),
        ("gpt-4o", "max_tokens"),
        ("gpt-4.1-mini", "max_tokens"),
        ("gpt-oss-120b", "max_tokens"),
        ("olmo2", "max_tokens"),
        ("qwen3-coder-plus", "max_tokens"),
    ],
)
def test_the_output_limit_is_named_as_the_model_family_wants(model, name) -> None:
    body = build_body(ChatRequest(model=model, system="", messages=[Message.user("hi")]))
    other = ({"max_tokens", "max_completion_tokens"} - {name}).pop()
    assert body[name] == 8192 and other not in body
    assert token_limit_name(model, swapped=True) == other


@pytest.mark.parametrize(
    ("base_url", "asked"),
    [
        ("https://api.mistral.ai/v1", False),
        ("https://codestral.mistral.ai/v1", False),
        ("https://api.openai.com/v1", True),
        ("https://mistral.example.com/v1", True),
    ],
)
def test_usage_is_asked_of_the_stream_except_on_mistral_s_hosts(base_url, asked) -> None:
    chat = ChatRequest(model="mistral-small-latest", system="", messages=[Message.user("hi")])
    assert ("stream_options" in build_body(chat, base_url=base_url)) is asked
