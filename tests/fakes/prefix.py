"""How much of a fork request is the main request's cached prefix, in prompt characters.

The measure `bench/suggestion_prefix.py` reports and `tests/followup/test_fork_prefix.py`
asserts: an OpenAI request body is serialized as sent (`json.dumps` of `tools`, then of each
message), and the share of those characters that are an identical prefix of the last main
request followed by its reply is the part the provider's prompt cache can serve. Pure
functions over recorded bodies; any thread.
"""

from __future__ import annotations

import json
from typing import Any

from qshell.llm.messages import ChatRequest, Message
from qshell.llm.openai import build_body

PREFIX_BLOCK = 4096  # characters compared at once when finding a common prefix


def serialize(body: dict[str, Any]) -> str:
    """The prompt characters of an OpenAI body: tools, then each message, as sent."""
    return json.dumps(body.get("tools")) + "".join(json.dumps(m) for m in body["messages"])


def common_prefix(a: str, b: str) -> int:
    """Length of the longest common prefix (compared in blocks, then character by character)."""
    size = min(len(a), len(b))
    index = 0
    while (
        index + PREFIX_BLOCK <= size
        and a[index : index + PREFIX_BLOCK] == b[index : index + PREFIX_BLOCK]
    ):
        index += PREFIX_BLOCK
    while index < size and a[index] == b[index]:
        index += 1
    return index


def wire_message(message: Message) -> dict[str, Any]:
    """One message as the OpenAI wire format sends it."""
    return build_body(ChatRequest(model="-", system="", messages=[message]))["messages"][0]


def reference(main_body: dict[str, Any], reply: Message) -> str:
    """What the provider has cached after the main request: its prompt, then its reply."""
    return serialize(main_body) + json.dumps(wire_message(reply))


def shared_share(fork_body: dict[str, Any], main_body: dict[str, Any], reply: Message) -> float:
    """The share of the fork's prompt characters that the main request's cache serves."""
    sent = serialize(fork_body)
    return common_prefix(sent, reference(main_body, reply)) / len(sent)
