"""One `session/prompt` of the ACP server: the turn's events sent as session updates.

`PromptRun.run` drives a Conversation turn through `TurnEvents` and maps each event: text
and reasoning deltas become message and thought chunks, a PermissionRequested becomes a
pending `tool_call` and a `session/request_permission` whose answer resolves the event's
future (allow-once, allow-always — the runner's ALLOW_ALWAYS for this tool —, reject-once,
and reject-always, which the session remembers: a later question about the same tool is
answered "no" without asking, until the session ends), ToolStarted / ToolFinished the
`tool_call` / `tool_call_update` pair (a call refused or cancelled at its question goes
from `pending` to `failed`, never `in_progress`; each call's `toolCallId` unique in the
session: `ToolCallIds`), notices thought chunks. It returns the prompt's stop reason: `cancelled` once `session/cancel` arrived (the loop keeps the history valid; an
open permission question is given up then, whether or not the client answers it), else
the one the turn ended with; a failed turn is a JSON-RPC error with its one-line message.
`prompt_text` turns the prompt's content blocks into qshell's prompt (an embedded file is
context, not typed: its @words attach nothing). Runs on the asyncio
loop; the turn itself runs in the worker `TurnEvents` starts.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence
from concurrent.futures import Future, InvalidStateError
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from acp import RequestError
from acp.interfaces import Client
from acp.schema import (
    AllowedOutcome,
    EmbeddedResourceContentBlock,
    PermissionOption,
    ResourceContentBlock,
    StopReason,
    TextContentBlock,
    TextResourceContents,
    ToolCallUpdate,
)
from pydantic import ValidationError

from qshell.acp import updates
from qshell.acp.bridge import ClientFiles, TurnEvents
from qshell.agent.conversation import Conversation
from qshell.agent.events import (
    ApplyChoice,
    ApplyRequested,
    CallKey,
    Event,
    FailureKind,
    HistoryCompacted,
    Notice,
    PermissionAnswer,
    PermissionReply,
    PermissionRequested,
    ReasoningDelta,
    TextDelta,
    TextWithdrawn,
    ToolFinished,
    ToolStarted,
    TurnFailed,
    TurnFinished,
)

log = logging.getLogger(__name__)

ALLOW_ONCE, ALLOW_ALWAYS, REJECT_ONCE, REJECT_ALWAYS = (
    "allow_once",
    "allow_always",
    "reject_once",
    "reject_always",
)
ANSWERS = {
    ALLOW_ONCE: PermissionAnswer.ALLOW_ONCE,
    ALLOW_ALWAYS: PermissionAnswer.ALLOW_ALWAYS,
    REJECT_ONCE: PermissionAnswer.DENY,
    REJECT_ALWAYS: PermissionAnswer.DENY,
}
STOP_REASONS: dict[str, StopReason] = {
    "max_tokens": "max_tokens",
    "refusal": "refusal",
    "content_filter": "refusal",
}
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603


class ToolCallIds:
    """The `toolCallId` each call has for the client. ACP wants it unique in the session,
    but some servers number calls `call_0` in every response: a call keeps its own id
    the first time the session sees it, a repeat becomes `call_0-2`, `call_0-3`, ... A
    call is known by its key (its message's history index and its id) within one turn
    (or the history a `session/load` replays); `turn()` starts the next."""

    def __init__(self) -> None:
        self._used: set[str] = set()
        self._ids: dict[CallKey, str] = {}

    def turn(self) -> None:
        self._ids.clear()  # a history index may come again after a compaction

    def of(self, key: CallKey) -> str:
        shown = self._ids.get(key)
        if shown is None:
            call_id = key[1]
            shown, repeat = call_id, 1
            while shown in self._used:
                repeat += 1
                shown = f"{call_id}-{repeat}"
            self._used.add(shown)
            self._ids[key] = shown
        return shown


@dataclass
class AcpSession:
    """One ACP session: its conversation and what lasts between its prompts."""

    conversation: Conversation
    rejected: set[str] = field(default_factory=set)  # tools answered "reject always"
    tool_ids: ToolCallIds = field(default_factory=ToolCallIds)
    running: bool = False
    cancelled: bool = False
    asking: asyncio.Future[Any] | None = None  # the open permission question, if any
    files: ClientFiles | None = None  # the client's fs/*, when it offers them

    @property
    def id(self) -> str:
        return self.conversation.session.id

    @property
    def root(self) -> Path:
        return self.conversation.session.project_root

    def kind(self, tool: str) -> str | None:
        found = self.conversation.session.tools_by_name.get(tool)
        return str(found.kind) if found is not None else None

    def kinds(self) -> dict[str, str]:
        return {t.name: str(t.kind) for t in self.conversation.session.tools}


def permission_options(tool: str) -> list[PermissionOption]:
    return [
        PermissionOption(option_id=ALLOW_ONCE, name="Allow", kind="allow_once"),
        PermissionOption(
            option_id=ALLOW_ALWAYS, name=f"Allow {tool} for this session", kind="allow_always"
        ),
        PermissionOption(option_id=REJECT_ONCE, name="Reject", kind="reject_once"),
        PermissionOption(
            option_id=REJECT_ALWAYS, name=f"Reject {tool} for this session", kind="reject_always"
        ),
    ]


@dataclass(frozen=True, slots=True)
class Prompt:
    """What the user typed (text blocks, linked files named by their path), and the
    context the client sent along (each embedded text resource in a <context> element),
    which is passed as it is: its @words attach nothing."""

    typed: str
    context: str

    @property
    def empty(self) -> bool:
        return not (self.typed.strip() or self.context.strip())


def prompt_text(blocks: Sequence[Any]) -> Prompt:
    """The prompt qshell runs, from the prompt's content blocks."""
    typed: list[str] = []
    context: list[str] = []
    for block in blocks:
        if isinstance(block, TextContentBlock):
            typed.append(block.text)
        elif isinstance(block, ResourceContentBlock):
            typed.append(f"(file: {_path_of(block.uri)})")
        elif isinstance(block, EmbeddedResourceContentBlock) and isinstance(
            block.resource, TextResourceContents
        ):
            resource = block.resource
            context.append(f'<context uri="{resource.uri}">\n{resource.text}\n</context>')
        else:
            raise RequestError(
                INVALID_PARAMS, f"qshell takes text and files, not {block.type} content"
            )
    return Prompt("\n".join(typed), "\n".join(context))


def _path_of(uri: str) -> str:
    """A file URI's path, its %-escapes undone (editors escape spaces and non-ASCII)."""
    return unquote(urlsplit(uri).path) if uri.startswith("file://") else uri


def answer(future: Future[PermissionReply], reply: PermissionReply) -> None:
    """Resolve a permission question unless it is over (the turn was cancelled)."""
    with contextlib.suppress(InvalidStateError):
        future.set_result(reply)


class PromptRun:
    """Sends one prompt's events to the client and works out its stop reason."""

    def __init__(self, client: Client, state: AcpSession) -> None:
        self._client = client
        self._state = state
        self._announced: set[str] = set()  # calls whose tool_call went out with a question
        self._refused: set[str] = set()  # calls that will not run (denied, or cancelled)

    async def run(self, prompt: Prompt) -> StopReason:
        state = self._state
        state.tool_ids.turn()
        turn = state.conversation.turn(prompt.typed, context=prompt.context)
        events = TurnEvents(turn, asyncio.get_running_loop())
        last: TurnFinished | TurnFailed | None = None
        try:
            while (event := await events.next()) is not None:
                if isinstance(event, TurnFinished | TurnFailed):
                    last = event
                else:
                    await self._show(event)
        except BaseException:
            state.conversation.cancel()  # the connection went away mid-turn
            raise
        return self._stop_reason(last)

    async def _update(self, update: Any) -> None:
        await self._client.session_update(session_id=self._state.id, update=update)

    async def _show(self, event: Event) -> None:
        state = self._state
        match event:
            case TextDelta(text=text):
                await self._update(updates.message(text))
            case ReasoningDelta(text=text):
                await self._update(updates.thought(text))
            case PermissionRequested():
                await self._ask(event)
            case ToolStarted(name=name, args=args):
                call_id = state.tool_ids.of(event.key)
                refused = call_id in self._refused  # the loop starts it only to fail it
                if call_id not in self._announced:
                    kind = state.kind(name)
                    status: updates.Status = "pending" if refused else "in_progress"
                    start = updates.started(
                        call_id, name, args, kind=kind, root=state.root, status=status
                    )
                    await self._update(start)
                elif not refused:
                    await self._update(updates.running(call_id))
            case ToolFinished():
                shown = state.tool_ids.of(event.key)
                finished = updates.finished(event, kind=state.kind(event.name), call_id=shown)
                await self._update(finished)
            case Notice(text=text) | TextWithdrawn(text=text):
                await self._update(updates.thought(f"\n{text}\n"))
            case HistoryCompacted(reason=reason):
                await self._update(updates.thought(f"\nhistory compacted ({reason})\n"))
            case ApplyRequested(future=future):  # only an accepted speculation asks this
                if not future.done():
                    future.set_result(ApplyChoice.DISCARD)
            case _:
                pass

    async def _ask(self, request: PermissionRequested) -> None:
        state = self._state
        call_id = state.tool_ids.of(request.key)
        if request.name in state.rejected:
            reason = f"the user rejected every {request.name} call for this session"
            self._refused.add(call_id)
            answer(request.future, PermissionReply(PermissionAnswer.DENY, reason))
            return
        kind = state.kind(request.name)
        start = updates.started(
            call_id,
            request.name,
            request.args,
            kind=kind,
            root=state.root,
            status="pending",
            preview=request.preview,
        )
        await self._update(start)
        self._announced.add(call_id)
        call = ToolCallUpdate(
            tool_call_id=call_id,
            title=start.title,
            kind=start.kind,
            status="pending",
            locations=start.locations,
            content=start.content,
            raw_input=start.raw_input,
        )
        reply = await self._reply(call, request.name)
        if reply.answer is PermissionAnswer.DENY:
            self._refused.add(call_id)
        answer(request.future, reply)

    async def _reply(self, call: ToolCallUpdate, tool: str) -> PermissionReply:
        asking = asyncio.ensure_future(
            self._client.request_permission(
                session_id=self._state.id, tool_call=call, options=permission_options(tool)
            )
        )
        self._state.asking = asking
        try:
            await asyncio.wait({asking})  # session/cancel cancels `asking`, not this prompt
        finally:
            self._state.asking = None
            asking.cancel()  # a no-op once answered; the prompt's own cancel reaches it here
        if asking.cancelled():
            return PermissionReply(PermissionAnswer.DENY, "the prompt was cancelled")
        try:
            response = asking.result()
        except (RequestError, ConnectionError, ValidationError) as exc:  # or answered nonsense
            log.warning("the permission question failed: %s", exc)
            return PermissionReply(PermissionAnswer.DENY, "the editor did not answer")
        outcome = response.outcome
        if not isinstance(outcome, AllowedOutcome) or outcome.option_id not in ANSWERS:
            return PermissionReply(PermissionAnswer.DENY)
        if outcome.option_id == REJECT_ALWAYS:
            self._state.rejected.add(tool)
        return PermissionReply(ANSWERS[outcome.option_id])

    def _stop_reason(self, last: TurnFinished | TurnFailed | None) -> StopReason:
        if self._state.cancelled:
            return "cancelled"
        if isinstance(last, TurnFinished):
            return STOP_REASONS.get(last.stop_reason, "end_turn")
        if last is None:
            return "end_turn"
        if last.kind is FailureKind.CANCELLED:
            return "cancelled"
        if last.kind is FailureKind.MAX_TURNS:
            return "max_turn_requests"
        raise RequestError(INTERNAL_ERROR, last.message, {"kind": str(last.kind)})
