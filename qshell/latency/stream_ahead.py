"""Stream-ahead execution (seed 004, D4): read calls that start while their response streams.

A provider says a tool call is complete with `StreamToolCall` (llm/base.py) before the
response ends. `EarlyCalls` then starts the call at once in a small pool when it is safe to:
its tool exists and its arguments validate, its kind is one of `STREAM_AHEAD_KINDS` (pure
reads: a round that ends cut off must leave nothing behind; a plugin's tool only when it
names the paths it reads, the rule for running it in a speculation, since its kind is its
own word: tools/registered.py), every earlier call of the same
response is of such a kind too (a read after a write must see the write, seed §3.4's
TOCTOU: a mutating call and everything after it wait for the batch), and the runner allows
it without asking. The runner decides once per call: the decision (or the control signal
`decide` raised, such as a speculation's Boundary) is kept and the batch uses it, so a
call that asks the user is asked in order after the stream, as without D4 (a kept "ask"
is dropped, and decided again, only when the user has since allowed a tool for the
session). The batch
takes a started call's future instead of running it again (`take`; only when the final
message holds the very same call), and still emits its events in call order. `close`
cancels what was not taken (its own CancelToken, linked to the turn's) and joins the pool,
so no call outlives its round. It must not emit events, touch history or run anything
but a started call. Thread rule: the loop's thread calls every method; only the started
calls run in the pool's threads.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, replace
from types import TracebackType
from typing import Any

from qshell.agent import calls
from qshell.agent.session import Session
from qshell.cancel import CancelToken
from qshell.errors import ControlSignal
from qshell.llm.base import StreamToolCall
from qshell.llm.messages import ToolCall
from qshell.permissions.policy import Decision, Verdict
from qshell.permissions.runner import ToolRunner
from qshell.tools.base import Kind, ToolResult
from qshell.tools.registered import RegisteredTool, speculation_concern

# Reads without side effects: THINK (in CONCURRENCY_SAFE_KINDS) is left out, as its tools
# may write notes or todos, which a round cut off after the call started must not leave.
STREAM_AHEAD_KINDS: frozenset[Kind] = frozenset({Kind.READ, Kind.SEARCH, Kind.FETCH})
MAX_EARLY_CALLS = 8  # pool threads, as many as a batch runs in parallel

Kept = Decision | ControlSignal


@dataclass(slots=True)
class _Early:
    """One call considered while the stream ran: its decision and, if started, its run."""

    call: ToolCall
    kept: Kept
    future: Future[ToolResult] | None = None


class EarlyCalls:
    """The calls of one model response started before it ended (see the module doc)."""

    def __init__(
        self, session: Session, runner: ToolRunner, cancel: CancelToken, *, enabled: bool
    ) -> None:
        self.session = session
        self.runner = runner
        self.enabled = enabled
        self.token = CancelToken()  # cancels the started calls without ending the turn
        self._unlink = cancel.on_cancel(self.token.cancel) if enabled else _nothing
        self.ctx = replace(session.tool_context, cancel=self.token)
        self._calls: dict[str, _Early] = {}
        self._next = 0  # the index the next StreamToolCall must have to be considered
        self._open = enabled  # no earlier call of this response forbids an early start
        self._pool: ThreadPoolExecutor | None = None

    @classmethod
    def of(cls, session: Session, runner: ToolRunner, cancel: CancelToken) -> EarlyCalls:
        """The early calls of one round, on when the session's `streamAheadTools` is."""
        return cls(session, runner, cancel, enabled=session.options.stream_ahead)

    def offer(self, chunk: StreamToolCall) -> None:
        """A call of the streaming response is complete: start it if it is safe to."""
        if not self._open or chunk.index != self._next:
            self._open = False
            return
        self._next += 1
        prepared = calls.prepare(self.session, chunk.call)
        tool = prepared.tool
        if tool is None or tool.kind not in STREAM_AHEAD_KINDS:
            self._open = False  # this call, and every later one, waits for the batch
            return
        if prepared.result is not None:
            return  # invalid arguments: the batch answers it; a read cannot harm later reads
        plugin = isinstance(tool, RegisteredTool)
        if plugin and speculation_concern(tool, tool.accesses(prepared.args, self.ctx)):
            self._open = False  # a plugin's "read" it does not show to be one: as a write
            return
        try:
            decision = self.runner.decide(tool, prepared.args, self.ctx)
        except ControlSignal as signal:  # raised again when the batch reaches this call
            self._calls[chunk.call.id] = _Early(chunk.call, signal)
            self._open = False
            return
        early = self._calls[chunk.call.id] = _Early(chunk.call, decision)
        if decision.verdict is Verdict.ALLOW:
            early.future = self._submit(prepared)

    def _submit(self, prepared: calls.Prepared) -> Future[ToolResult]:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(
                max_workers=MAX_EARLY_CALLS, thread_name_prefix="qshell-early"
            )
        return self._pool.submit(calls.execute, self.runner, prepared, self.ctx)

    def decision(self, call: ToolCall, decide: Callable[[], Decision]) -> Decision:
        """The runner's decision on `call`: the one kept when the stream offered this very
        call (a kept control signal is raised), else `decide()`."""
        early = self._same(call)
        if early is None:
            return decide()
        if isinstance(early.kept, ControlSignal):
            raise early.kept
        return early.kept

    def reconsider_questions(self) -> None:
        """The user allowed a tool for the session: a kept "ask" may no longer hold, so
        those calls are decided again when the batch reaches them (as without D4)."""
        for call_id, early in list(self._calls.items()):
            if isinstance(early.kept, Decision) and early.kept.verdict is Verdict.ASK:
                del self._calls[call_id]

    def take(self, call: ToolCall) -> Future[ToolResult] | None:
        """The run of `call` started while the stream ran, if any; the batch now owns it."""
        early = self._same(call)
        if early is None or early.future is None:
            return None
        future, early.future = early.future, None
        return future

    def _same(self, call: ToolCall) -> _Early | None:
        """What was kept for `call`, if the final message's call is the one offered."""
        early = self._calls.get(call.id)
        offered = early.call if early is not None else None
        if offered is None or (offered.name, offered.arguments) != (call.name, call.arguments):
            return None
        return early

    def close(self) -> None:
        """Cancel the started calls still running (nobody waits for them any more: the
        round ended or the batch is done) and wait for every pool thread to end."""
        self._unlink()
        self.token.cancel()
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None
        self._calls.clear()

    def __enter__(self) -> EarlyCalls:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.close()


def _nothing(*_: Any) -> None:
    """The unlink of a disabled EarlyCalls, which never linked to the turn's token."""
