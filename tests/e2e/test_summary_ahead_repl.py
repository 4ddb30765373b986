"""The REPL writes compaction's summary while the user reads: the turn that compacts waits on none.

A 1,000-token context window, and a first turn (it reads hello.txt) whose answer's usage
puts the history past the compaction threshold: as soon as that answer is on the screen, and before the user types
again, the summary request goes out (agent/summary_ahead.py); the second prompt's own
request then starts from the summary at once — the summary between the two turns, none
sent between the second prompt and its request. (The second answer is past the threshold
too, so a summary of the new history goes out after it in turn.)
"""

from __future__ import annotations

import time

from qshell.agent.compaction import ACKNOWLEDGEMENT, SUMMARY_HEADER
from tests.e2e.test_repl import READ, quit_cleanly, start
from tests.fakes.llm_server import Reply, Usage, always, has_tool_result, last_user_text_contains

BIG = Usage(prompt_tokens=900, completion_tokens=20)


def summary_sent(llm_server) -> bool:
    return any("summary" in r.last_user_text for r in llm_server.requests)


def test_the_summary_is_written_while_the_user_reads(llm_server, project):
    llm_server.add_rule(last_user_text_contains("summary"), Reply.text("SUMMARY: the sky."))
    llm_server.add_rule(has_tool_result("hello"), Reply.text("plain answer", usage=BIG))
    llm_server.add_rule(last_user_text_contains("sky"), Reply.tool_calls([READ]))
    llm_server.add_rule(always(), Reply.text("plain answer", usage=BIG))
    child = start(llm_server, project, extra_env={"QSHELL_CONTEXT_WINDOW": "1000"})
    child.submit("tell me about the sky")
    child.expect("plain answer")
    child.wait_prompt()
    deadline = time.monotonic() + 15
    while not summary_sent(llm_server) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert summary_sent(llm_server), "no summary request while the user read"
    assert len(llm_server.requests) == 3  # the read, the answer, the summary
    child.submit("and the sea?")
    child.expect("compacted")
    child.expect("plain answer")
    quit_cleanly(child)
    requests = llm_server.requests
    second = next(i for i, r in enumerate(requests) if r.last_user_text == "and the sea?")
    assert second == 3  # the read, the answer, the summary written ahead, then this turn
    messages = requests[second].body["messages"]
    assert messages[1]["content"] == f"{SUMMARY_HEADER}\n\nSUMMARY: the sky."
    assert messages[2]["content"] == ACKNOWLEDGEMENT
    assert messages[-1]["content"] == "and the sea?"
