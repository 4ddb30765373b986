"""Confidence gating in the full REPL (pexpect) against the scripted server: a suggestion
whose confidence is below the threshold shows as ghost text but starts no speculation
request, a confident one is speculated, one of unknown confidence is speculated staged,
`speculation.gating: false` speculates whatever the confidence, and the confidence given by
a separate suggestion request gates the same way, and what this user did with suggestions of
about that confidence in earlier sessions (telemetry) moves the estimate either way. The
tag's attribute never reaches the screen, and each decision is one `speculation_gate`
telemetry event."""

from __future__ import annotations

from pathlib import Path

from qshell.agent.prediction import CLOSE
from qshell.followup.suggestion import SUGGESTION_MARKER
from qshell.telemetry import EVENTS_FILENAME, TELEMETRY_DIRNAME, Telemetry, read_events
from tests.e2e.pty import Term, spawn_qshell
from tests.fakes.llm_server import Reply, ScriptedLLMServer, ToolCallSpec, always, has_tool_result
from tests.fakes.llm_server import last_user_text_contains as asks
from tests.waiting import wait_until

SUGGESTED = "show me the tests"  # a kind not slow (a slow one is speculated from less: gating.py)
READ = ToolCallSpec("read_file", {"path": "hello.txt"})  # a suggestion needs two answers


def line(confidence: str | None) -> str:
    attrs = "" if confidence is None else f' confidence="{confidence}"'
    return f"<next-prompt{attrs}>{SUGGESTED}{CLOSE}"


def gate_events(home: Path, timeout_s: float = 10.0) -> list[dict]:
    """The `speculation_gate` events, once there is one."""
    path = home / "qshell" / "state" / TELEMETRY_DIRNAME / EVENTS_FILENAME
    return wait_until(
        lambda: [e for e in read_events(path) if e.get("event") == "speculation_gate"], timeout_s
    )


def speculated(server: ScriptedLLMServer, timeout_s: float = 0.0) -> bool:
    """Whether a request sent the suggestion as its prompt (waiting up to `timeout_s`)."""
    return wait_until(
        lambda: any(r.last_user_text == SUGGESTED for r in server.requests), timeout_s
    )


def shown_after_answer(server: ScriptedLLMServer, project: Path, answer: str, **env: str) -> Term:
    server.add_rule(asks(SUGGESTED), Reply.text("all 12 tests pass"))
    server.add_rule(has_tool_result(), Reply.text(answer))
    server.add_rule(always(), Reply.tool_calls([READ]))
    extra = {"QSHELL_SUGGESTIONS": "1", "QSHELL_SPECULATION": "1", **env}
    child = spawn_qshell(server, project, extra_env=extra)
    child.expect("for commands, Ctrl-D to exit")
    child.wait_prompt()
    child.submit("read hello.txt")
    child.expect("it says hello")
    child.expect(SUGGESTED)  # the ghost text shows whatever the confidence
    return child


def test_a_low_confidence_suggestion_shows_but_starts_no_speculation(
    llm_server, project, isolated_home
):
    child = shown_after_answer(llm_server, project, f"it says hello\n\n{line('0.1')}")
    [event] = gate_events(isolated_home)
    child.settle(0.5)
    child.send("\x04")
    assert child.finish() == 0
    assert not speculated(llm_server)
    assert event["gated"] is True and event["confidence"] == 0.1
    assert event["threshold"] == 0.35  # minConfidence, the default
    assert event["estimate"] == 0.1  # no outcomes yet: the model's own confidence
    assert "confidence" not in child.text and "next-prompt" not in child.text


def test_a_confident_suggestion_is_speculated(llm_server, project, isolated_home):
    child = shown_after_answer(llm_server, project, f"it says hello\n\n{line('0.9')}")
    assert speculated(llm_server, timeout_s=10.0)
    child.send("\t")
    child.submit("")
    child.expect("all 12 tests pass")
    child.send("\x04")
    assert child.finish() == 0
    assert [r.last_user_text for r in llm_server.requests].count(SUGGESTED) == 1
    [event, *_] = gate_events(isolated_home)
    assert event["gated"] is False and event["confidence"] == 0.9
    assert "confidence" not in child.text


def test_a_suggestion_of_unknown_confidence_is_speculated_staged(
    llm_server, project, isolated_home
):
    child = shown_after_answer(llm_server, project, f"it says hello\n\n{line(None)}")
    assert speculated(llm_server, timeout_s=10.0)
    child.send("\x04")
    assert child.finish() == 0
    [event, *_] = gate_events(isolated_home)
    assert event["gated"] is False and event["confidence"] is None
    assert event["stage"] == "staged"  # up to its first batch until the user shows intent


def test_with_gating_off_a_low_confidence_suggestion_is_speculated(llm_server, project):
    answer = f"it says hello\n\n{line('0.05')}"
    child = shown_after_answer(llm_server, project, answer, QSHELL_SPECULATION__GATING="false")
    assert speculated(llm_server, timeout_s=10.0)
    child.send("\x04")
    assert child.finish() == 0


def test_a_separate_suggestion_requests_confidence_gates_its_speculation(
    llm_server, project, isolated_home
):
    llm_server.add_rule(asks(SUGGESTION_MARKER), Reply.text(line("0.2")))
    child = shown_after_answer(llm_server, project, "it says hello")  # no line: a request
    [event] = gate_events(isolated_home)
    child.settle(0.5)
    child.send("\x04")
    assert child.finish() == 0
    assert event["gated"] is True and event["confidence"] == 0.2
    assert not speculated(llm_server)
    assert "confidence" not in child.text


def test_a_user_who_ignored_suggestions_this_confident_before_gets_them_unspeculated(
    llm_server, project, isolated_home
):
    """The gate learns from earlier sessions' telemetry: six ignored suggestions of
    confidence 0.8 pull the estimate for a new 0.8 one below minConfidence, while one that
    was accepted at that confidence keeps being speculated."""
    earlier = Telemetry.for_state_dir(isolated_home / "qshell" / "state")
    for _ in range(6):
        earlier.record("suggestion", outcome="ignored", confidence=0.8)
    earlier.close()
    child = shown_after_answer(llm_server, project, f"it says hello\n\n{line('0.8')}")
    [event] = gate_events(isolated_home)
    child.settle(0.5)
    child.send("\x04")
    assert child.finish() == 0
    assert not speculated(llm_server)
    assert event["gated"] is True and event["estimate"] < event["threshold"] == 0.35


def test_a_user_who_took_such_suggestions_before_gets_them_speculated(
    llm_server, project, isolated_home
):
    earlier = Telemetry.for_state_dir(isolated_home / "qshell" / "state")
    for _ in range(6):
        earlier.record("suggestion", outcome="accepted", confidence=0.3)
    earlier.close()
    child = shown_after_answer(llm_server, project, f"it says hello\n\n{line('0.3')}")
    assert speculated(llm_server, timeout_s=10.0)  # 0.3 < 0.35, but this user takes them
    child.send("\x04")
    assert child.finish() == 0
    [event, *_] = gate_events(isolated_home)
    assert event["gated"] is False and event["estimate"] > 0.35
