"""Reasoning goes back the way each API requires: DeepSeek-style `reasoning_content` on the
current turn's assistant messages only, Anthropic's signed thinking blocks unchanged and
first, and reasoning no API signed is never sent to Anthropic."""

from __future__ import annotations

from qshell.llm.anthropic import build_body as anthropic_body
from qshell.llm.messages import (
    ChatRequest,
    Message,
    ReasoningBlock,
    ToolCall,
    ToolResultBlock,
)
from qshell.llm.openai import build_body as openai_body

CALL = ToolCall(id="call_1", name="ls", arguments='{"path": "."}')
RESULT = Message(role="user", content=[ToolResultBlock(tool_call_id="call_1", content="a.py")])


def request(*messages: Message) -> ChatRequest:
    return ChatRequest(model="m", system="sys", messages=list(messages))


def test_reasoning_content_goes_back_within_the_turn_and_not_from_earlier_turns() -> None:
    old = Message.assistant(
        "hi", reasoning=[ReasoningBlock(text="old", source="reasoning_content")]
    )
    now = Message.assistant(
        "", [CALL], reasoning=[ReasoningBlock(text="list first", source="reasoning_content")]
    )
    body = openai_body(request(Message.user("hello"), old, Message.user("files?"), now, RESULT))
    assistants = [m for m in body["messages"] if m["role"] == "assistant"]
    assert "reasoning_content" not in assistants[0]
    assert assistants[1]["reasoning_content"] == "list first"
    assert assistants[1]["tool_calls"][0]["id"] == "call_1"


def test_reasoning_from_another_field_is_not_sent_as_reasoning_content() -> None:
    now = Message.assistant("", [CALL], reasoning=[ReasoningBlock(text="x", source="reasoning")])
    body = openai_body(request(Message.user("files?"), now, RESULT))
    assert all("reasoning_content" not in m for m in body["messages"])


def test_signed_thinking_goes_back_to_anthropic_unchanged_and_first() -> None:
    thinking = ReasoningBlock(text="I should list.", source="thinking", signature="EqQBCkgI==")
    redacted = ReasoningBlock(source="thinking", redacted="EmwKAhgBEgy3va3pzix/LafPsn4a")
    now = Message.assistant("Listing.", [CALL], reasoning=[thinking, redacted])
    body = anthropic_body(request(Message.user("files?"), now, RESULT))
    content = body["messages"][1]["content"]
    assert content[0] == {
        "type": "thinking",
        "thinking": "I should list.",
        "signature": "EqQBCkgI==",
    }
    assert content[1] == {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix/LafPsn4a"}
    assert [b["type"] for b in content[2:]] == ["text", "tool_use"]


def test_unsigned_reasoning_is_not_sent_to_anthropic() -> None:
    for block in (
        ReasoningBlock(text="t", source="thinking"),
        ReasoningBlock(text="t", source="reasoning_content", signature="s"),
    ):
        body = anthropic_body(
            request(Message.user("q"), Message.assistant("a", reasoning=[block]), Message.user("b"))
        )
        assert [b["type"] for b in body["messages"][1]["content"]] == ["text"]
