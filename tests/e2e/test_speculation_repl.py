"""Speculative execution in the full REPL (pexpect) against the scripted server."""

from __future__ import annotations

import json
import os
import re
import tempfile
from pathlib import Path

from qshell.followup.suggestion import SUGGESTION_MARKER
from tests.e2e.helpers import run_qshell
from tests.e2e.pty import Term, spawn_qshell
from tests.fakes.llm_server import (
    Reply,
    ToolCallSpec,
    Usage,
    always,
    has_tool_result,
    last_user_text_contains,
)
from tests.waiting import wait_until

READ = ToolCallSpec("read_file", {"path": "hello.txt"})


def start(server, project: Path, *args: str, env: dict[str, str] | None = None) -> Term:
    """qshell in `project` with suggestions and speculation on (and `env` on top), at its
    first prompt."""
    extra = {"QSHELL_SUGGESTIONS": "1", "QSHELL_SPECULATION": "1", **(env or {})}
    child = spawn_qshell(server, project, *args, extra_env=extra)
    child.expect("for commands, Ctrl-D to exit")
    child.wait_prompt()
    return child


def suggests(server, text: str, *, after: str | None = None):
    """A suggestion rule; `after` narrows it to requests whose context contains that text."""

    def match(request) -> bool:
        if SUGGESTION_MARKER not in request.last_user_text:
            return False
        return after is None or after in request.all_text

    return server.add_rule(match, Reply.text(text))


def first_turn(child: Term) -> None:
    child.submit("read hello.txt")
    child.expect("it says hello")
    child.wait_prompt()


def mains_for(server, prompt: str) -> list:
    """Requests that end with `prompt` itself as the newest message (not a later round)."""
    return [
        r for r in server.requests if r.body["messages"][-1] == {"role": "user", "content": prompt}
    ]


def speculated(server, prompt: str, timeout_s: float = 20.0):
    """Wait until the server has fully answered the speculative request for `prompt`."""

    def answered():
        found = mains_for(server, prompt)
        return found[0] if found and found[0].completed.is_set() else None

    request = wait_until(answered, timeout_s)
    if request is None:
        raise AssertionError(f"no speculative request for {prompt!r}")
    return request


def test_accepting_a_completed_speculation_shows_the_answer_without_a_new_request(
    llm_server, project
):
    suggests(llm_server, "commit this", after="all 12 tests pass")
    suggests(llm_server, "run the tests")
    answer = llm_server.add_rule(
        last_user_text_contains("run the tests"), Reply.text("all 12 tests pass")
    )
    llm_server.add_rule(has_tool_result(), Reply.text("it says hello"))
    llm_server.add_rule(always(), Reply.tool_calls([READ]))
    child = start(llm_server, project)
    first_turn(child)
    child.expect("run the tests")
    speculated(llm_server, "run the tests")
    assert answer.hits == 1
    child.send("\t")
    child.submit("")
    child.expect("all 12 tests pass")
    child.expect("saved")
    child.wait_prompt()
    child.expect("commit this")  # the pipelined suggestion, shown right after the accept
    child.submit("/stats")
    child.expect(r"speculations accepted: 1 · time saved: \d+\.\d s")
    child.wait_prompt()
    child.send("\x04")
    assert child.finish() == 0
    assert len(mains_for(llm_server, "run the tests")) == 1


def test_accepting_a_speculation_stopped_at_a_boundary_continues_with_a_permission_prompt(
    llm_server, project
):
    edit = ToolCallSpec("edit", {"path": "hello.txt", "old_string": "hello", "new_string": "howdy"})
    suggests(llm_server, "fix the greeting")
    llm_server.add_rule(has_tool_result("Edited"), Reply.text("greeting fixed"))
    llm_server.add_rule(last_user_text_contains("fix the greeting"), Reply.tool_calls([edit]))
    llm_server.add_rule(has_tool_result(), Reply.text("it says hello"))
    llm_server.add_rule(always(), Reply.tool_calls([READ]))
    child = start(llm_server, project)
    first_turn(child)
    child.expect("fix the greeting")
    speculated(llm_server, "fix the greeting")
    child.send("\t")
    child.submit("")
    child.expect("Allow edit")
    child.submit("y")
    child.expect("greeting fixed")
    child.wait_prompt()
    child.submit("/stats")
    child.expect("speculations accepted: 1")
    child.wait_prompt()
    # the turns' token lines (the continued one counting its speculated round) add up to
    # the session's totals, which the toolbar shows too
    turns = [[_number(n) for n in line] for line in re.findall(TURN_TOKENS, child.text)]
    totals = re.search(STATS_TOKENS, child.text, re.DOTALL)
    assert totals is not None and len(turns) == 2
    rounds, prompt, completion = (_number(n) for n in totals.groups())
    assert [sum(column) for column in zip(*turns, strict=True)] == [prompt, completion, rounds]
    assert turns[1][2] == 2  # the speculated edit round and the live answer
    child.send("\x04")
    assert child.finish() == 0
    assert (project / "hello.txt").read_text() == "howdy world\n"
    assert len(mains_for(llm_server, "fix the greeting")) == 1


TURN_TOKENS = r"tokens: ([\d,]+) in \(cached [\d,]+\) · ([\d,]+) out · (\d+) rounds?"
STATS_TOKENS = r"model rounds: (\d+)\s+prompt tokens: ([\d,]+).*?completion tokens: ([\d,]+)"


def _number(text: str) -> int:
    return int(text.replace(",", ""))


def test_typing_something_else_aborts_the_speculation_and_removes_its_overlay(llm_server, project):
    suggests(llm_server, "run the tests")
    slow = llm_server.add_rule(last_user_text_contains("run the tests"), Reply.text("never"))
    hold = llm_server.hold(slow)
    llm_server.add_rule(has_tool_result(), Reply.text("it says hello"))
    llm_server.add_rule(always(), Reply.tool_calls([READ]))
    child = start(llm_server, project)
    first_turn(child)
    request = hold.wait_arrived(timeout=20)
    base = Path(tempfile.gettempdir()) / f"qshell-speculation-{os.getuid()}" / str(child.child.pid)
    assert base.is_dir() and any(base.iterdir())
    child.send("x")
    assert request.disconnected.wait(10)
    child.send("\x15\x04")  # clear the line, then Ctrl-D
    assert child.finish() == 0
    assert not base.exists() or not any(base.iterdir())


def test_qshell_stats_counts_the_tokens_of_an_accepted_speculation(llm_server, project):
    def usage(prompt: int, completion: int) -> Usage:
        return Usage(prompt_tokens=prompt, completion_tokens=completion, cached_tokens=0)

    suggests(llm_server, "run the tests")
    llm_server.add_rule(
        last_user_text_contains("run the tests"),
        Reply.text("all 12 tests pass", usage=usage(1000, 50)),
    )
    llm_server.add_rule(has_tool_result(), Reply.text("it says hello", usage=usage(100, 10)))
    llm_server.add_rule(always(), Reply.tool_calls([READ], usage=usage(100, 10)))
    child = start(llm_server, project)
    first_turn(child)
    child.expect("run the tests")
    speculated(llm_server, "run the tests")
    child.send("\t")
    child.submit("")
    child.expect("all 12 tests pass")
    child.expect("saved")
    child.wait_prompt()
    child.send("\x04")
    assert child.finish() == 0
    stats = run_qshell("stats", "--json", cwd=project)
    assert stats.code == 0, stats.stderr
    counted = json.loads(stats.stdout)
    # two rounds of the first turn, one of the accepted speculation; no suggestion request
    assert (counted["rounds"], counted["prompt_tokens"], counted["completion_tokens"]) == (
        3,
        1200,
        70,
    )


def test_ctrl_d_closes_a_streaming_pipelined_suggestion_and_exits_at_once(llm_server, project):
    """The completed speculation's next suggestion still streams (held after its first
    chunk, billed until it closes) when the user leaves: Ctrl-D ends it and qshell exits."""
    pipelined = suggests(llm_server, "commit this", after="all 12 tests pass")
    held = llm_server.hold(pipelined, after_first_chunk=True)
    suggests(llm_server, "run the tests")
    llm_server.add_rule(last_user_text_contains("run the tests"), Reply.text("all 12 tests pass"))
    llm_server.add_rule(has_tool_result(), Reply.text("it says hello"))
    llm_server.add_rule(always(), Reply.tool_calls([READ]))
    child = start(llm_server, project)
    first_turn(child)
    child.expect("run the tests")
    request = held.wait_arrived(20.0)
    child.send("\x04")
    assert child.finish() == 0
    assert request.disconnected.wait(20.0)
