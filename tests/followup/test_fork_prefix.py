"""Over real HTTP, for both wire formats: a suggestion request and a speculation's first
request start with exactly the last main request (model, tools, parameters, messages)
followed by that request's reply; measured as bench/suggestion_prefix.py measures it. Under
`backgroundReasoning: inherit` nothing else differs; under the default `off` the one
difference is the reasoning-off field outside the messages (none on Anthropic)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from qshell.agent.events import TurnFinished
from qshell.agent.loop import run_turn
from qshell.agent.session import Session
from qshell.cancel import CancelToken
from qshell.config import ApprovalMode, BackgroundReasoning
from qshell.followup.speculation import Speculation
from qshell.followup.states import Status
from qshell.followup.suggestion import SUGGESTION_MARKER, SUGGESTION_PROMPT, generate_suggestion
from qshell.llm.messages import Message
from qshell.overlay import Overlay
from qshell.permissions.runner import MainToolRunner
from qshell.tools import default_tools
from tests.agent.scripted import session_for
from tests.fakes.llm_server import (
    Reply,
    ScriptedLLMServer,
    ToolCallSpec,
    has_tool_result,
    last_user_text_contains,
)
from tests.fakes.prefix import shared_share
from tests.fakes.providers import provider_for

FINAL_ANSWER = "The bug was an off-by-one in a.py; it is fixed. Shall I run the tests?"


def make_session(
    server: ScriptedLLMServer,
    protocol: str,
    root: Path,
    reasoning: BackgroundReasoning = BackgroundReasoning.INHERIT,
) -> Session:
    return session_for(
        provider_for(server, protocol),
        root,
        default_tools(),
        model="m1",
        system_prompt="You are a careful coding agent.",
        max_tokens=4096,
        background_reasoning=reasoning,
    )


def script(server: ScriptedLLMServer) -> None:
    server.add_rule(last_user_text_contains(SUGGESTION_MARKER), Reply.text("run the tests"))
    server.add_rule(last_user_text_contains("hello"), Reply.text("Hello! What shall we do?"))
    server.add_rule(has_tool_result(), Reply.text(FINAL_ANSWER))
    server.add_rule(
        last_user_text_contains("fix the bug"),
        Reply.tool_calls([ToolCallSpec("read_file", {"path": "a.py"}, id="call_1")], "Reading."),
    )


def drive(session: Session, prompt: str) -> None:
    runner = MainToolRunner(ApprovalMode.YOLO, interactive=False)
    events = list(run_turn(session, prompt, runner, CancelToken()))
    assert isinstance(events[-1], TurnFinished), events[-1]


def without_cache_control(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: without_cache_control(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [without_cache_control(v) for v in value]
    return value


def expected_tail(protocol: str) -> list[dict[str, Any]]:
    if protocol == "openai":
        return [
            {"role": "assistant", "content": FINAL_ANSWER},
            {"role": "user", "content": SUGGESTION_PROMPT},
        ]
    return [
        {"role": "assistant", "content": [{"type": "text", "text": FINAL_ANSWER}]},
        {"role": "user", "content": [{"type": "text", "text": SUGGESTION_PROMPT}]},
    ]


def run_session_and_suggest(
    server, protocol, root, reasoning=BackgroundReasoning.INHERIT, **kw
) -> tuple[dict, dict]:
    """Two main turns (the second with a tool round), then one suggestion: the bodies of
    the last main request and of the suggestion request."""
    script(server)
    (root / "a.py").write_text("def f(xs):\n    return xs[len(xs)]\n")
    session = make_session(server, protocol, root, reasoning)
    drive(session, "hello")
    drive(session, "fix the bug in a.py")
    assert session.cache_safe is not None
    result = generate_suggestion(session.provider, session.cache_safe, CancelToken(), **kw)
    assert (result.text, result.reason) == ("run the tests", None)
    requests = server.requests
    assert len(requests) == 4
    return requests[2].body, requests[3].body


@pytest.mark.parametrize("protocol", ["openai", "anthropic"])
def test_the_suggestion_request_extends_the_last_main_request_unchanged(
    llm_server, tmp_path, protocol
):
    main, fork = run_session_and_suggest(llm_server, protocol, tmp_path)
    if protocol == "anthropic":  # the last-message breakpoint moves to the new last message
        main, fork = without_cache_control(main), without_cache_control(fork)
    assert {k: v for k, v in fork.items() if k != "messages"} == {
        k: v for k, v in main.items() if k != "messages"
    }
    assert fork["tools"] and fork["model"] == "m1" and fork["max_tokens"] == 4096
    count = len(main["messages"])
    assert fork["messages"][:count] == main["messages"]
    assert fork["messages"][count:] == expected_tail(protocol)


def test_anthropic_keeps_system_and_tool_breakpoints_and_marks_only_the_new_last_block(
    llm_server, tmp_path
):
    main, fork = run_session_and_suggest(llm_server, "anthropic", tmp_path)
    assert fork["system"] == main["system"] and fork["tools"] == main["tools"]
    marked = [
        (i, j)
        for i, message in enumerate(fork["messages"])
        for j, block in enumerate(message["content"])
        if "cache_control" in block
    ]
    last = len(fork["messages"]) - 1
    assert marked == [(last, len(fork["messages"][last]["content"]) - 1)]


@pytest.mark.parametrize("protocol", ["openai", "anthropic"])
def test_the_fast_model_changes_only_the_model_field(llm_server, tmp_path, protocol):
    main, fork = run_session_and_suggest(llm_server, protocol, tmp_path, model="fast-1")
    assert fork["model"] == "fast-1"
    main, fork = without_cache_control(main), without_cache_control(fork)
    rest = {k: v for k, v in fork.items() if k not in ("model", "messages")}
    assert rest == {k: v for k, v in main.items() if k not in ("model", "messages")}
    assert fork["messages"][: len(main["messages"])] == main["messages"]


SPECULATED = "run the tests"


def run_session_and_speculate(
    server, protocol, root, reasoning=BackgroundReasoning.INHERIT, **kw
) -> tuple[dict, dict, Message]:
    """Two main turns, then a real Speculation of the suggestion on `session.fork()`: the
    bodies of the last main request and of the speculation's first request, and the reply
    the main request got."""
    server.add_rule(last_user_text_contains(SUGGESTION_MARKER), Reply.text(SPECULATED))
    server.add_rule(last_user_text_contains(SPECULATED), Reply.text("All tests pass."))
    script(server)
    (root / "a.py").write_text("def f(xs):\n    return xs[len(xs)]\n")
    session = make_session(server, protocol, root, reasoning)
    drive(session, "hello")
    drive(session, "fix the bug in a.py")
    assert session.cache_safe is not None
    reply = session.cache_safe.reply
    main = len(server.requests) - 1
    # never inside the project root (base_dir.py refuses that)
    overlay = Overlay.create(root, session.tool_context.paths, base_dir=root.parent / "overlays")
    spec = Speculation(session, SPECULATED, overlay, **kw)
    spec.run()
    overlay.discard()
    assert spec.status is Status.COMPLETED, spec.status
    assert len(server.requests) == main + 2
    return server.requests[main].body, server.requests[main + 1].body, reply


@pytest.mark.parametrize("protocol", ["openai", "anthropic"])
def test_the_speculation_request_extends_the_last_main_request_unchanged(
    llm_server, tmp_path, protocol
):
    main, fork, _ = run_session_and_speculate(llm_server, protocol, tmp_path)
    if protocol == "anthropic":  # the last-message breakpoint moves to the new last message
        main, fork = without_cache_control(main), without_cache_control(fork)
    assert {k: v for k, v in fork.items() if k != "messages"} == {
        k: v for k, v in main.items() if k != "messages"
    }
    count = len(main["messages"])
    assert fork["messages"][:count] == main["messages"]
    assert len(fork["messages"]) == count + 2  # the main reply, then the speculated prompt


def test_the_speculation_request_shares_at_least_99_percent_of_its_characters(llm_server, tmp_path):
    main, fork, reply = run_session_and_speculate(llm_server, "openai", tmp_path)
    assert shared_share(fork, main, reply) >= 0.99
    assert shared_share(fork, main, reply) < 1  # the new prompt itself is not cached


def test_a_speculation_on_the_fast_model_changes_only_the_model_field(llm_server, tmp_path):
    main, fork, _ = run_session_and_speculate(llm_server, "openai", tmp_path, model="fast-1")
    assert fork["model"] == "fast-1"
    rest = {k: v for k, v in fork.items() if k not in ("model", "messages")}
    assert rest == {k: v for k, v in main.items() if k not in ("model", "messages")}
    assert fork["messages"][: len(main["messages"])] == main["messages"]


def test_a_speculation_round_is_a_background_request(llm_server, tmp_path):
    script(llm_server)
    session = make_session(llm_server, "openai", tmp_path)
    drive(session, "hello")
    assert session.fork().request().background  # one retry, paused after a 429
    assert not session.request().background


REASONING_OFF = {"openai": {"reasoning_effort": "low"}, "anthropic": {}}


@pytest.mark.parametrize("protocol", ["openai", "anthropic"])
def test_by_default_suggestion_and_speculation_requests_ask_for_reasoning_off(
    llm_server_factory, tmp_path, protocol
):
    for index, run_and_fork in enumerate((run_session_and_suggest, run_session_and_speculate)):
        root = tmp_path / str(index) / "project"
        root.mkdir(parents=True)
        main, fork, *_ = run_and_fork(
            llm_server_factory(), protocol, root, reasoning=BackgroundReasoning.OFF
        )
        main, fork = without_cache_control(main), without_cache_control(fork)
        assert {k: v for k, v in fork.items() if k not in main} == REASONING_OFF[protocol]
        assert {k: v for k, v in fork.items() if k in main and k != "messages"} == {
            k: v for k, v in main.items() if k != "messages"
        }
        assert fork["messages"][: len(main["messages"])] == main["messages"]
