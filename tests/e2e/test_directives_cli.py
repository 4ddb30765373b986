"""Post-execution directives (D1) through the real CLI (`qshell -p`) and the scripted server.

A plugin tool whose results say `skip_llm_round` ends the turn with its output as the
answer — only when `toolPostExecAllowlist` names it and `alwaysSummarize` is off — and a
turn continued after such a skip is a valid request for both providers (the fake server
reports a pairing or, for Anthropic, an alternation problem as a test failure).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.helpers import provider_env, run_qshell
from tests.fakes.llm_server import Reply, ToolCallSpec, always
from tests.plugins.helpers import write_plugin

TOOL = (
    "from pydantic import BaseModel",
    "from qshell.tools.base import Kind, ToolResult",
    "class ListingArgs(BaseModel):",
    "    what: str",
    "class Listing:",
    "    name = 'listing'",
    "    kind = Kind.READ",
    "    description = 'list things'",
    "    Args = ListingArgs",
    "    def accesses(self, args, ctx):",
    "        return []",
    "    def run(self, args, ctx):",
    "        return ToolResult(llm_content='things: ' + args.what, skip_llm_round=True)",
    "register(Listing())",
)


@pytest.fixture
def plugin(tmp_path: Path) -> Path:
    return write_plugin(tmp_path / "listing.py", "qshell_register_tools(register)", *TOOL)


def _env(server, protocol: str, **settings: str) -> dict[str, str]:
    replies = [Reply.tool_calls([ToolCallSpec("listing", {"what": "a b"})]), Reply.text("read")]
    server.add_rule(always(), replies=replies, times=10)
    return {**provider_env(server, protocol), **settings}


def _run(plugin: Path, root: Path, env: dict[str, str], *args: str):
    return run_qshell("-y", "--plugin", str(plugin), *args, cwd=root, env=env)


ALLOWED = {"QSHELL_TOOL_POST_EXEC_ALLOWLIST": '["listing"]'}


@pytest.mark.parametrize("protocol", ["openai", "anthropic"])
def test_an_allowlisted_skip_answers_with_the_output_and_the_next_turn_is_valid(
    llm_server, plugin, tmp_path, protocol
):
    root = tmp_path / "proj"
    root.mkdir()
    env = _env(llm_server, protocol, **ALLOWED)
    run = _run(plugin, root, env, "-p", "list a b", "--output-format", "json")
    assert run.code == 0, run.stderr
    record = run.json()
    assert record["result"] == "things: a b" and record["skipped_llm_round"] is True
    assert record["num_rounds"] == 1 and len(llm_server.requests) == 1

    # the next turn follows a history that ends in the tool results
    run = _run(plugin, root, env, "--continue", "-p", "and now?")
    assert run.code == 0, run.stderr
    assert run.stdout == "read\n"
    messages = llm_server.requests[-1].body["messages"]
    if protocol == "openai":  # a tool message, then the prompt
        assert [m["role"] for m in messages[-3:]] == ["assistant", "tool", "user"]
        assert messages[-2]["content"] == "things: a b" and messages[-1]["content"] == "and now?"
    else:  # one user message: the results first, then the prompt (strict alternation)
        assert [m["role"] for m in messages] == ["user", "assistant", "user"]
        last = messages[-1]["content"]
        assert [b["type"] for b in last] == ["tool_result", "text"]
        assert last[-1]["text"] == "and now?"
    assert llm_server.violations == []


def test_a_plugin_tool_not_allowlisted_goes_back_to_the_model(llm_server, plugin, tmp_path):
    env = _env(llm_server, "openai")
    run = _run(plugin, tmp_path, env, "-p", "list a b")
    assert run.code == 0 and run.stdout == "read\n"
    assert len(llm_server.requests) == 2


def test_always_summarize_sends_even_an_allowlisted_result_back(llm_server, plugin, tmp_path):
    env = _env(llm_server, "anthropic", **ALLOWED, QSHELL_ALWAYS_SUMMARIZE="true")
    run = _run(plugin, tmp_path, env, "-p", "list a b", "--output-format", "json")
    assert run.code == 0 and run.json()["result"] == "read"
    assert "skipped_llm_round" not in run.json() and len(llm_server.requests) == 2


def test_stream_json_shows_the_skipped_answer_as_text(llm_server, plugin, tmp_path):
    env = _env(llm_server, "openai", **ALLOWED)
    run = _run(plugin, tmp_path, env, "-p", "list", "--output-format", "stream-json")
    assert run.code == 0, run.stderr
    lines = run.lines()
    assert lines[-1]["type"] == "result" and lines[-1]["result"] == "things: a b"
    assert any("things: a b" in str(line) for line in lines[:-1])
