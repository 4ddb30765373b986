"""The note a small model's answer round ends its prompt with (llm/function_calling.py):
it says whether the prompt's calls ran, and never claims a refused one did."""

from __future__ import annotations

from qshell.llm.function_calling import (
    FAILED_NOTE,
    PARTLY_NOTE,
    RAN_NOTE,
    for_function_calling,
)
from qshell.llm.messages import ChatRequest, Message, ToolCall, ToolResultBlock


def answer_round(*results: tuple[str, str, bool]) -> str:
    """The answer round's last prompt after calls with these (name, content, is_error)."""
    calls = [
        ToolCall(id=f"c{i}", name=name, arguments='{"command": "x"}')
        for i, (name, _content, _error) in enumerate(results)
    ]
    blocks = [
        ToolResultBlock(tool_call_id=f"c{i}", content=content, is_error=error)
        for i, (_name, content, error) in enumerate(results)
    ]
    history = [
        Message.user("run the linter"),
        Message.assistant("", calls),
        Message(role="user", content=blocks),
    ]
    request = ChatRequest(model="m", system="s", messages=history)
    return for_function_calling(request).messages[-1].text


def test_a_command_that_ran_and_failed_is_reported_as_run() -> None:
    prompt = answer_round(("shell", "Error: 1 chart failed\n[exit code: 1]", True))
    assert prompt.endswith(RAN_NOTE)
    assert "x (did not succeed):\nError: 1 chart failed" in prompt


def test_a_refused_call_is_never_said_to_have_run() -> None:
    prompt = answer_round(("shell", "Error: not allowed: shell commands need approval", True))
    assert prompt.endswith(FAILED_NOTE)
    assert "The shell call failed: Error: not allowed" in prompt


def test_some_calls_ran_and_some_were_refused() -> None:
    prompt = answer_round(
        ("read_file", "one line", False),
        ("shell", "Error: not allowed: shell commands need approval", True),
    )
    assert prompt.endswith(PARTLY_NOTE)
