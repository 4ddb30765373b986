"""The history as llama.cpp's `chatml-function-calling` template can render it.

That template has no `tool` role, and the small model it serves answers the last thing it
reads and repeats what it is told it did; `for_function_calling` lays a request out for
both. It owns only this rewrite of values (`llm/messages.py` in, the same out): no I/O, no
knowledge of any tool beyond a call's name and JSON arguments. Pure; safe from any thread.
"""

from __future__ import annotations

import re

from qshell.llm.messages import (
    ChatRequest,
    Message,
    TextBlock,
    ToolCall,
    ToolResultBlock,
    answered_calls,
    without_cut_calls,
)

MAX_HEADING_CHARS = 120  # an argument longer than this does not head its result
TOOL_ERROR = "Error:"  # how a tool's own failure or a refusal starts (tools/base.py)
# after a prompt whose calls ran (a command that exited non-zero included): without it a
# small model explains how to do what the prompt asks instead of saying what was found
RAN_NOTE = "(That has run; what it returned is above. Say what it shows.)"
# after one whose every call was refused or failed in the tool: it must not claim a run
FAILED_NOTE = "(That could not be done; why is above. Say so.)"
# after one where some calls ran and others did not
PARTLY_NOTE = "(Part of that has run; what it returned, and why the rest could not, is above.)"
EXIT_LINE = re.compile(r"\[exit code: -?\d+[^\]]*\]\s*\Z")  # a command's result: it ran


def for_function_calling(request: ChatRequest) -> ChatRequest:
    """The request as the function-calling template can render it: it has no `tool` role,
    so tool results travel as user text that names each call and says how it went
    (returned, or failed and why: refused, not found, ...).

    A round without tools is the answer round, laid out for a small model that answers the
    last thing it reads and repeats what it is told it did. There each prompt carries what
    its calls found, before the prompt itself, and the calls are gone: shown in the format's
    call syntax the model imitates them instead of answering, and retold in its own voice
    ("I used the write_file tool") it repeats them as its answer whether they ran or not.
    What a call returned is headed by its arguments (`README.md:`), so the answer quotes
    the content rather than "the read_file call"; a call that failed is still named, with
    why. What the model said while calling is dropped with the calls; its answers stay.
    A call the output limit cut is left out with its result first, as every provider does,
    so its result is never rewritten into text the model would read. A result is named
    by the call it answers in the message before it (ids repeat across responses on
    some servers)."""
    history = without_cut_calls(request.messages)
    if request.tools:
        messages = [
            _results_as_text(m, answered_calls(history, i)) if m.tool_results else m
            for i, m in enumerate(history)
        ]
    else:
        messages = _answer_layout(history)
    return request.model_copy(update={"messages": messages})


def _answer_layout(history: list[Message]) -> list[Message]:
    messages: list[Message] = []
    found: list[str] = []  # what the calls since the last prompt found
    ran: list[bool] = []  # and whether each of them ran
    prompt: int | None = None  # where that prompt is in `messages`
    for index, message in enumerate(history):
        if message.tool_results:
            calls = answered_calls(history, index)
            found.extend(_finding(r, calls.get(r.tool_call_id)) for r in message.tool_results)
            ran.extend(not _failed_in_tool(r) for r in message.tool_results)
            found.extend(b.text for b in message.content if isinstance(b, TextBlock))
            continue
        if message.role == "assistant" and message.tool_calls:
            continue
        _fold(messages, prompt, found, ran)
        if message.role == "user":
            prompt = len(messages)
        messages.append(message)
    _fold(messages, prompt, found, ran)
    return messages


def _fold(messages: list[Message], prompt: int | None, found: list[str], ran: list[bool]) -> None:
    """Put `found` before the prompt at `messages[prompt]` (with no prompt, at the end as a
    user message of its own), then the note on whether anything ran, and empty both."""
    if not found:
        return
    if prompt is None:
        messages.append(Message.user("\n\n".join(found)))
    else:
        note = RAN_NOTE if all(ran) else PARTLY_NOTE if any(ran) else FAILED_NOTE
        messages[prompt] = Message.user("\n\n".join([*found, messages[prompt].text, note]))
    found.clear()
    ran.clear()


def _failed_in_tool(result: ToolResultBlock) -> bool:
    """Refused, or failed in the tool itself (`Error: …`), rather than run: a command that
    ran and printed `Error: …` itself ends with its exit code."""
    return (
        result.is_error
        and result.content.startswith(TOOL_ERROR)
        and not EXIT_LINE.search(result.content)
    )


def _results_as_text(message: Message, calls: dict[str, ToolCall]) -> Message:
    parts = [_result_text(r, calls.get(r.tool_call_id)) for r in message.tool_results]
    texts = [b.text for b in message.content if isinstance(b, TextBlock)]
    return Message(role="user", content=[TextBlock(text="\n\n".join(parts + texts))])


def _result_text(result: ToolResultBlock, call: ToolCall | None) -> str:
    name = call.name if call else "unnamed"
    if result.is_error:
        return f"The {name} call failed: {result.content}"
    return f"The {name} call returned:\n{result.content}"


def _finding(result: ToolResultBlock, call: ToolCall | None) -> str:
    """One result for the answer round: its content under the call's arguments
    (`README.md:`, `python -m pytest -q (did not succeed):`), or its tool's name; told as
    "the shell call failed", a failing test run is what a small model repeats as its answer."""
    if call is None or _failed_in_tool(result):
        return _result_text(result, call)
    try:
        values: list[object] = list(call.parsed_arguments().values())
    except ValueError:
        values = []
    short = [str(v) for v in values if isinstance(v, str | int) and _heading_worthy(str(v))]
    heading = ", ".join(short) or call.name
    if result.is_error:  # a command that ran and exited non-zero
        heading = f"{heading} (did not succeed)"
    return f"{heading}:\n{result.content}"


def _heading_worthy(value: str) -> bool:
    """An argument short enough to head a result: a path, a pattern, a command."""
    return bool(value.strip()) and "\n" not in value and len(value) <= MAX_HEADING_CHARS
