"""What qshell's events and history look like as ACP session updates.

Pure functions from qshell values to the SDK's update models: a tool call's title (the
terminal's `name(summary)` label), kind (qshell's tool Kind, which uses ACP's words),
locations (the paths in its arguments, absolute), and content — a diff of whole texts for
an edit or a write (`ToolResult.edit`), the output as text otherwise, fenced for a shell
command; the message and thought chunks; and `replay`, which turns a resumed session's
history into the updates a client shows for it (`session/load`). A call's `toolCallId` is
the caller's to give (prompting.py's ToolCallIds: unique in the session, as ACP wants,
though servers may number calls `call_0` in every response). No I/O and no state; any
thread.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, get_args

from acp import (
    start_tool_call,
    text_block,
    tool_content,
    tool_diff_content,
    update_agent_message_text,
    update_agent_thought_text,
    update_tool_call,
    update_user_message_text,
)
from acp.schema import (
    AgentMessageChunk,
    AgentThoughtChunk,
    ContentToolCallContent,
    FileEditToolCallContent,
    ToolCallLocation,
    ToolCallProgress,
    ToolCallStart,
    ToolKind,
    UserMessageChunk,
)

from qshell.agent.events import CallKey, ToolFinished
from qshell.agent.prediction import split_prediction
from qshell.llm.messages import Message, ReasoningBlock, TextBlock, ToolCall
from qshell.ui.render import call_label, clean, is_diff

Update = AgentMessageChunk | AgentThoughtChunk | UserMessageChunk | ToolCallStart | ToolCallProgress
Content = ContentToolCallContent | FileEditToolCallContent
Status = Literal["pending", "in_progress", "completed", "failed"]
ACP_KINDS: frozenset[str] = frozenset(get_args(ToolKind))
PATH_KEYS = ("path", "file_path")
EXECUTE = "execute"


def kind_of(kind: str | None) -> ToolKind:
    """qshell's Kind value as ACP's ToolKind (the same words; `other` for anything new)."""
    return kind if kind in ACP_KINDS else "other"  # type: ignore[return-value]


def title(name: str, args: Mapping[str, object]) -> str:
    return call_label(name, args)


def locations(args: Mapping[str, object], root: Path) -> list[ToolCallLocation]:
    """The file a call names, absolute, with the line it starts at (read_file's offset)."""
    found = []
    for key in PATH_KEYS:
        value = args.get(key)
        if isinstance(value, str) and value:
            path = Path(value) if Path(value).is_absolute() else root / value
            offset = args.get("offset")
            line = offset if isinstance(offset, int) and offset > 0 else None
            found.append(ToolCallLocation(path=str(path), line=line))
    return found


def started(
    call_id: str,
    name: str,
    args: Mapping[str, object],
    *,
    kind: str | None,
    root: Path,
    status: Status,
    preview: str = "",
) -> ToolCallStart:
    """The `tool_call` that announces a call (`pending` while its permission is asked,
    with the preview of what it would do; `in_progress` when it runs at once)."""
    shown = fenced(preview, "diff") if is_diff(preview) else preview
    content = [tool_content(text_block(shown))] if preview else None
    return start_tool_call(
        call_id,
        title(name, args),
        kind=kind_of(kind),
        status=status,
        content=content,
        locations=locations(args, root),
        raw_input=dict(args),
    )


def running(call_id: str) -> ToolCallProgress:
    return update_tool_call(call_id, status="in_progress")


def finished(event: ToolFinished, *, kind: str | None, call_id: str) -> ToolCallProgress:
    """The `tool_call_update` that closes a call (`call_id`, the client's name for it):
    completed or failed, with its diff or its output."""
    result = event.result
    status: Status = "failed" if result.error is not None else "completed"
    content: list[Content]
    if result.edit is not None:
        edit = result.edit
        content = [tool_diff_content(str(edit.path), edit.new_text, edit.old_text)]
    else:
        content = output(result.display or result.llm_content, kind=kind)
    return update_tool_call(call_id, status=status, content=content)


def output(text: str, *, kind: str | None) -> list[Content]:
    text = clean(text)
    if not text.strip():
        return []
    return [tool_content(text_block(fenced(text) if kind == EXECUTE else text))]


def fenced(text: str, language: str = "") -> str:
    """`text` as a Markdown code block, its fence longer than any backtick run inside."""
    fence = "```"
    while fence in text:
        fence += "`"
    return f"{fence}{language}\n{text.rstrip()}\n{fence}"


def message(text: str) -> AgentMessageChunk:
    return update_agent_message_text(text)


def thought(text: str) -> AgentThoughtChunk:
    return update_agent_thought_text(text)


def replay(
    history: Sequence[Message],
    *,
    kinds: Mapping[str, str],
    root: Path,
    id_of: Callable[[CallKey], str],
) -> Iterator[Update]:
    """The updates that show a resumed session's history: the user's prompts, the
    answers (without their next-prompt lines), the reasoning, and each tool call with
    how it ended (its result is the one in the next message). `id_of` gives the client's
    id for a call, by its key (the history index of its message, and its id)."""
    for index, item in enumerate(history):
        if item.role == "user":
            if not item.tool_results and item.text:
                yield update_user_message_text(item.text)
            continue
        for block in item.content:
            if isinstance(block, ReasoningBlock) and block.text:
                yield thought(block.text)
            elif isinstance(block, TextBlock) and block.text:
                yield message(split_prediction(block.text)[0])
            elif isinstance(block, ToolCall):
                answer = history[index + 1] if index + 1 < len(history) else None
                results = {r.tool_call_id: r for r in answer.tool_results} if answer else {}
                shown = id_of((index, block.id))
                yield from _replayed_call(block, shown, results, kinds=kinds, root=root)


def _replayed_call(
    call: ToolCall,
    shown: str,
    results: Mapping[str, Any],
    *,
    kinds: Mapping[str, str],
    root: Path,
) -> Iterator[Update]:
    try:
        args: Mapping[str, object] = call.parsed_arguments()
    except ValueError:
        args = {"raw": call.arguments}
    kind = kinds.get(call.name)
    result = results.get(call.id)
    status: Status = "failed" if result is None or result.is_error else "completed"
    yield started(shown, call.name, args, kind=kind, root=root, status=status)
    if result is not None:
        yield update_tool_call(shown, status=status, content=output(result.content, kind=kind))
