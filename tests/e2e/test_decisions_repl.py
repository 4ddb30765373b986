"""The decision log and the per-position cache hit rate in the full REPL (pexpect).

A speculative run writes no decision records: only the turns the user waited for do,
while `/stats` counts the accepted speculation's rounds by position like any other.
"""

from __future__ import annotations

import json

from tests.e2e.test_speculation_repl import READ, first_turn, speculated, start, suggests
from tests.fakes.llm_server import Reply, Usage, always, has_tool_result, last_user_text_contains


def test_stats_shows_the_hit_rate_by_position_and_speculation_logs_no_decision(
    llm_server, project, isolated_home
):
    suggests(llm_server, "run the tests")
    llm_server.add_rule(
        last_user_text_contains("run the tests"),
        Reply.text("all 12 tests pass", usage=Usage(prompt_tokens=100, cached_tokens=90)),
    )
    llm_server.add_rule(
        has_tool_result(),
        Reply.text("it says hello", usage=Usage(prompt_tokens=200, cached_tokens=150)),
    )
    llm_server.add_rule(
        always(), Reply.tool_calls([READ], usage=Usage(prompt_tokens=100, cached_tokens=0))
    )
    child = start(llm_server, project)
    first_turn(child)
    child.expect("run the tests")
    speculated(llm_server, "run the tests")
    child.send("\t")
    child.submit("")
    child.expect("all 12 tests pass")
    child.wait_prompt()
    child.submit("/stats")
    # first rounds: 0 of 100 and 90 of 100 cached; the summary round 150 of 200
    child.expect("cache hit rate by round: first 45% · middle n/a · summary 75%")
    child.wait_prompt()
    child.send("\x04")
    assert child.finish() == 0
    path = isolated_home / "qshell" / "state" / "telemetry" / "decisions.jsonl"
    records = [json.loads(line) for line in path.read_text().splitlines()]
    assert [r["position"] for r in records] == ["first", "summary"]
    assert len({r["turn_id"] for r in records}) == 1
