"""What the fake LLM server records about each request, and the tool-pairing invariant.

A `RecordedRequest` keeps the raw request and a protocol-neutral reading of its
conversation (`turns`), which the matchers and the invariant check use. This module does
no I/O and never answers requests. Thread rule: a `RecordedRequest` is created by one
handler thread; afterwards only its `disconnected` / `completed` events and `status`
change, and the derived views are computed from the immutable body.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from tests.fakes.prompt_cache import CachedPrompt
    from tests.fakes.script import Answer, Rule

Protocol = Literal["openai", "anthropic"]


@dataclass(frozen=True)
class CallRef:
    id: str
    name: str
    arguments: str


@dataclass(frozen=True)
class ResultRef:
    tool_call_id: str
    content: str


@dataclass(frozen=True)
class Turn:
    """One wire message in neutral form. OpenAI `tool` messages keep role `tool`."""

    role: str
    text: str = ""
    tool_calls: tuple[CallRef, ...] = ()
    tool_results: tuple[ResultRef, ...] = ()


def _text_of(content: Any) -> str:
    """Text of a string or a list of parts/blocks (only `text` parts count)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, dict) and part.get("type") == "text":
                parts.append(str(part.get("text", "")))
        return "".join(parts)
    return ""


def _openai_turns(body: dict[str, Any], problems: list[str]) -> tuple[str, list[Turn]]:
    system: list[str] = []
    turns: list[Turn] = []
    for message in body.get("messages") or []:
        if not isinstance(message, dict):
            problems.append("a message is not an object")
            continue
        role = str(message.get("role", ""))
        text = _text_of(message.get("content"))
        if role in ("system", "developer"):
            system.append(text)
            turns.append(Turn(role="system", text=text))
        elif role == "tool":
            result = ResultRef(str(message.get("tool_call_id") or ""), text)
            turns.append(Turn(role="tool", tool_results=(result,)))
        elif role == "assistant":
            calls = []
            for call in message.get("tool_calls") or []:
                function = call.get("function") or {}
                arguments = function.get("arguments")
                if not isinstance(arguments, str):
                    problems.append(f"tool call {call.get('id')!r}: arguments must be a string")
                    arguments = str(arguments)
                if not call.get("id"):
                    problems.append(f"tool call to {function.get('name')!r} has no id")
                calls.append(
                    CallRef(str(call.get("id") or ""), str(function.get("name")), arguments)
                )
            turns.append(Turn(role="assistant", text=text, tool_calls=tuple(calls)))
        else:
            turns.append(Turn(role=role, text=text))
    return "\n".join(system), turns


def _anthropic_turns(body: dict[str, Any], problems: list[str]) -> tuple[str, list[Turn]]:
    system = _text_of(body.get("system"))
    turns: list[Turn] = []
    for message in body.get("messages") or []:
        if not isinstance(message, dict):
            problems.append("a message is not an object")
            continue
        role = str(message.get("role", ""))
        if turns and turns[-1].role == role:  # the Messages API requires alternation
            problems.append(f"two {role} messages in a row")
        content = message.get("content")
        if isinstance(content, str):
            turns.append(Turn(role=role, text=content))
            continue
        texts: list[str] = []
        calls: list[CallRef] = []
        results: list[ResultRef] = []
        for block in content or []:
            kind = block.get("type") if isinstance(block, dict) else None
            if kind == "text":
                texts.append(str(block.get("text", "")))
            elif kind == "tool_use":
                if not isinstance(block.get("input"), dict):
                    problems.append(f"tool_use {block.get('id')!r}: input must be an object")
                if not block.get("id"):
                    problems.append(f"tool_use {block.get('name')!r} has no id")
                arguments = json.dumps(block.get("input"), ensure_ascii=False)
                calls.append(CallRef(str(block.get("id") or ""), str(block.get("name")), arguments))
            elif kind == "tool_result":
                tool_id = str(block.get("tool_use_id") or "")
                results.append(ResultRef(tool_id, _text_of(block.get("content"))))
        turns.append(Turn(role, "".join(texts), tuple(calls), tuple(results)))
    return system, turns


def parse_conversation(
    protocol: Protocol, body: dict[str, Any]
) -> tuple[str, list[Turn], list[str]]:
    """(system text, neutral turns, shape problems) of a request body."""
    problems: list[str] = []
    if protocol == "openai":
        system, turns = _openai_turns(body, problems)
    else:
        system, turns = _anthropic_turns(body, problems)
    return system, turns, problems


def pairing_problems(protocol: Protocol, turns: list[Turn]) -> list[str]:
    """Tool calls and results that do not pair up, as each real API would reject them.

    Every assistant tool call needs exactly one result before the conversation moves on
    (OpenAI: in the `tool` messages right after it; Anthropic: in the next message), and
    every result must answer a call of that assistant message.
    """
    problems: list[str] = []
    pending: dict[str, str] = {}
    answered: set[str] = set()

    def close_group() -> None:
        for call_id, name in pending.items():
            problems.append(f"tool call {call_id} ({name}) has no tool result")
        pending.clear()
        answered.clear()

    awaiting_anthropic_reply = False
    for turn in turns:
        if turn.role == "assistant":
            close_group()
            for call in turn.tool_calls:
                if call.id in pending:
                    problems.append(f"tool call id {call.id} is used twice")
                pending[call.id] = call.name
            awaiting_anthropic_reply = bool(turn.tool_calls)
            continue
        if protocol == "openai" and turn.role != "tool":
            close_group()
        for result in turn.tool_results:
            if result.tool_call_id in pending:
                del pending[result.tool_call_id]
                answered.add(result.tool_call_id)
            elif result.tool_call_id in answered:
                problems.append(f"tool call {result.tool_call_id} has more than one result")
            else:
                problems.append(f"tool result for unknown call {result.tool_call_id}")
        if protocol == "anthropic" and awaiting_anthropic_reply:
            close_group()
            awaiting_anthropic_reply = False
    close_group()
    return problems


@dataclass(eq=False)
class RecordedRequest:
    """One request as received. `headers` keys are lower-case; `body` is {} if not JSON."""

    path: str
    protocol: Protocol
    headers: dict[str, str]
    body: dict[str, Any]
    raw: bytes
    matched_rule: Rule | None = None
    disconnected: threading.Event = field(default_factory=threading.Event)
    completed: threading.Event = field(default_factory=threading.Event)
    unmatched: bool = False
    index: int = 0
    status: int | None = None
    answer: Answer | None = None
    received_at: float = field(default_factory=time.monotonic)
    ended_at: float | None = None  # when the handler was done with it (set before `completed`)
    # the prompt cache's reading of it, when the server models one (tests/fakes/prompt_cache.py)
    cached: CachedPrompt | None = None
    sent_tokens: int = 0  # content tokens of the reply written before the stream ended

    @cached_property
    def _parsed(self) -> tuple[str, list[Turn], list[str]]:
        return parse_conversation(self.protocol, self.body)

    @property
    def model(self) -> str:
        return str(self.body.get("model") or "")

    @property
    def stream(self) -> bool:
        return self.body.get("stream") is True

    @property
    def turns(self) -> list[Turn]:
        return list(self._parsed[1])

    @property
    def system_text(self) -> str:
        return self._parsed[0]

    @property
    def shape_problems(self) -> list[str]:
        return list(self._parsed[2])

    @property
    def last_user_text(self) -> str:
        """Text of the last user message that has any text ('' if none)."""
        for turn in reversed(self._parsed[1]):
            if turn.role == "user" and turn.text:
                return turn.text
        return ""

    @property
    def last_tool_results(self) -> list[ResultRef]:
        """Tool results carried by the last message (OpenAI: the trailing `tool` messages)."""
        turns = self._parsed[1]
        results: list[ResultRef] = []
        for turn in reversed(turns):
            if turn.role == "tool":
                results[:0] = turn.tool_results
                continue
            if not results and turn is turns[-1]:
                results = list(turn.tool_results)
            break
        return results

    @property
    def all_text(self) -> str:
        """System, message text, tool arguments and tool results, newline-joined."""
        pieces = [self.system_text]
        for turn in self._parsed[1]:
            pieces.append(turn.text)
            pieces.extend(f"{c.name} {c.arguments}" for c in turn.tool_calls)
            pieces.extend(r.content for r in turn.tool_results)
        return "\n".join(p for p in pieces if p)

    @property
    def tool_names(self) -> list[str]:
        """Names of the tools the request offers the model."""
        names = []
        for tool in self.body.get("tools") or []:
            if isinstance(tool, dict):
                names.append(str((tool.get("function") or tool).get("name")))
        return names

    def __repr__(self) -> str:
        return (
            f"RecordedRequest(#{self.index} {self.protocol} {self.path} status={self.status} "
            f"last_user={self.last_user_text[:40]!r})"
        )
