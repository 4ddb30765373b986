"""The request settings of the latency plan through the real `qshell -p`: `conciseReplies`
in the system prompt, `dashscopeCache` on the wire, each with its default."""

from __future__ import annotations

from pathlib import Path

import pytest

from qshell.agent.prompt import CONCISE_PROMPT
from tests.e2e.helpers import provider_env, run_qshell
from tests.fakes.llm_server import Reply, always

PROTOCOLS = ["openai", "anthropic"]


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    root.mkdir()
    return root


def system_prompt(body: dict) -> str:
    if isinstance(body.get("system"), list):  # Anthropic
        return "".join(block["text"] for block in body["system"])
    content = body["messages"][0]["content"]
    return content if isinstance(content, str) else "".join(p["text"] for p in content)


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize(("value", "asked"), [(None, True), ("1", True), ("0", False)])
def test_concise_replies_puts_its_instruction_in_the_system_prompt(
    llm_server, project, protocol, value, asked
) -> None:
    llm_server.add_rule(always(), Reply.text("Done."))
    env = provider_env(llm_server, protocol)
    if value is not None:
        env["QSHELL_CONCISE_REPLIES"] = value
    run = run_qshell("-p", "hello", cwd=project, env=env)
    assert run.code == 0, run.stderr
    (sent,) = llm_server.requests
    assert (CONCISE_PROMPT in system_prompt(sent.body)) is asked


@pytest.mark.parametrize(("value", "marked"), [(None, False), ("auto", False), ("on", True)])
def test_dashscope_cache_is_on_only_when_asked_off_its_hosts(
    llm_server, project, value, marked
) -> None:
    llm_server.add_rule(always(), Reply.text("Done."))
    env = provider_env(llm_server, "openai")
    if value is not None:
        env["QSHELL_DASHSCOPE_CACHE"] = value
    run = run_qshell("-p", "hello", cwd=project, env=env)
    assert run.code == 0, run.stderr
    (sent,) = llm_server.requests
    assert ("x-dashscope-cachecontrol" in sent.headers) is marked
    assert (b'"cache_control": {"type": "ephemeral"}' in sent.raw) is marked
    assert system_prompt(sent.body).startswith("You are qshell")
