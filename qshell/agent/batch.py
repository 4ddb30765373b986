"""One round's tool batch: its calls run, asked about and answered in call order.

`run_batch` runs the calls of one model response: consecutive calls of concurrency-safe
kinds side by side (a small pool; one such call runs in the caller's thread), the rest in
order, each after the runner's decision (and the user's answer to a `PermissionRequested`
when it asks). A call with a result already known (an accepted speculation ran it) or one
started while its response streamed (latency/stream_ahead.py) is not run again; events
and results always come in call order; a result whose secrets were redacted
(agent/calls.py) is followed by a `SecretsRedacted` line. It returns the result blocks,
the turn's answer when every result skips the next round, and whether every result is
terminal (the session's directives, latency/directives.py, say both). Its events carry
the history index of the message that made the calls (`response`): with the call's id it
names the call, as ids repeat across responses on some servers. The loop
(agent/loop.py) is its one caller; it never streams a model response or changes the
history. It runs in the thread running the turn, apart from the parallel calls.
"""

from __future__ import annotations

from collections.abc import Generator, Iterator, Mapping, Sequence
from concurrent.futures import CancelledError, Future, ThreadPoolExecutor
from dataclasses import replace
from typing import Any

from qshell.agent.calls import Prepared, execute, prepare, preview, unready
from qshell.agent.events import (
    Event,
    PermissionAnswer,
    PermissionReply,
    PermissionRequested,
    SecretsRedacted,
    ToolFinished,
    ToolStarted,
)
from qshell.agent.session import Session
from qshell.cancel import CancelToken
from qshell.latency.stream_ahead import EarlyCalls
from qshell.llm.messages import ToolCall, ToolResultBlock
from qshell.permissions.policy import Verdict
from qshell.permissions.runner import ToolRunner
from qshell.tools.base import CONCURRENCY_SAFE_KINDS, ErrorType, ToolResult

MAX_PARALLEL_TOOLS = 8
CANCELLED_RESULT = ToolResult.fail(ErrorType.CANCELLED, "the user cancelled this tool call")


def _display_args(call: ToolCall) -> dict[str, object]:
    try:
        return call.parsed_arguments()
    except ValueError:
        return {"raw": call.arguments}


def run_batch(
    session: Session,
    calls: Sequence[ToolCall],
    runner: ToolRunner,
    cancel: CancelToken,
    *,
    response: int,
    known: Mapping[str, ToolResult] | None = None,
    early: EarlyCalls | None = None,
) -> Generator[Event, None, tuple[list[ToolResultBlock], str | None, bool]]:
    """Run the calls of the message at history index `response`; returns their results
    in call order, the turn's answer when the batch skips the next round, and whether
    every result is terminal (generator return). Calls with a `known` result (keyed by
    id: ids are unique within one response) are not run again; those `early` started
    are not run again either, nor decided twice."""
    ctx = replace(session.tool_context, cancel=cancel)
    early = early or EarlyCalls(session, runner, cancel, enabled=False)
    results: dict[str, ToolResult] = dict(known or {})
    parallel: list[Prepared] = []

    def flush() -> Iterator[Event]:
        if parallel:
            yield from _run_parallel(parallel, runner, ctx, results, early, response)
            parallel.clear()

    for call in calls:
        if cancel.cancelled:
            break
        if call.id in results:
            continue
        prepared = prepare(session, call)
        if prepared.result is None and prepared.tool is not None:
            prepared.result = yield from _permission(prepared, runner, ctx, cancel, early, response)
        if prepared.result is not None:
            yield ToolStarted(call.id, call.name, _display_args(call), response)
            results[call.id] = prepared.result
            yield from _finished(call, prepared.result, response)
            continue
        assert prepared.tool is not None
        if prepared.tool.kind in CONCURRENCY_SAFE_KINDS:
            parallel.append(prepared)
            continue
        yield from flush()
        if cancel.cancelled:
            break
        yield ToolStarted(call.id, call.name, _display_args(call), response)
        result = execute(runner, prepared, ctx)
        results[call.id] = result
        yield from _finished(call, result, response)
    if not cancel.cancelled:
        yield from flush()
    ordered = [results.get(call.id, CANCELLED_RESULT) for call in calls]
    blocks = [
        ToolResultBlock(tool_call_id=c.id, content=r.llm_content, is_error=r.error is not None)
        for c, r in zip(calls, ordered, strict=True)
    ]
    tools = [session.tools_by_name.get(call.name) for call in calls]
    pairs = list(zip(tools, ordered, strict=True))
    answer = session.options.directives.skipped_answer(pairs)
    return blocks, answer, all(session.options.directives.terminal(t, r) for t, r in pairs)


def _finished(call: ToolCall, result: ToolResult, response: int) -> Iterator[Event]:
    """The call's end, and the one line saying which secrets its result lost, if any."""
    yield ToolFinished(call.id, call.name, result, response)
    if result.redacted:
        yield SecretsRedacted.of(f"{call.name}'s result", result.redacted)


def _permission(
    prepared: Prepared,
    runner: ToolRunner,
    ctx: Any,
    cancel: CancelToken,
    early: EarlyCalls,
    response: int,
) -> Generator[Event, None, ToolResult | None]:
    """Ask the runner (or take its decision made while the stream ran), and the user when
    needed; returns a denial result or None to run. No question is asked about a call
    the tool says fails whatever the answer (`unready`: a write over a file the model
    has not read): that failure is the result."""
    tool = prepared.tool
    assert tool is not None
    decision = early.decision(prepared.call, lambda: runner.decide(tool, prepared.args, ctx))
    if decision.verdict is Verdict.ALLOW:
        return None
    if decision.verdict is Verdict.DENY:
        return ToolResult.fail(ErrorType.DENIED, f"not allowed: {decision.reason}")
    refused = unready(prepared, ctx)
    if refused is not None:
        return refused
    future: Future[PermissionReply] = Future()

    def cancel_question() -> None:
        future.cancel()

    unregister = cancel.on_cancel(cancel_question)
    try:
        yield PermissionRequested(
            prepared.call.id,
            prepared.call.name,
            _display_args(prepared.call),
            decision.reason,
            future,
            preview=preview(prepared, ctx),
            response=response,
        )
        reply = future.result()
    except CancelledError:
        return CANCELLED_RESULT
    finally:
        unregister()
    if reply.answer is PermissionAnswer.DENY:
        why = f": {reply.reason}" if reply.reason else ""
        return ToolResult.fail(ErrorType.DENIED, f"the user denied this tool call{why}")
    if reply.answer is PermissionAnswer.ALLOW_ALWAYS:
        runner.allow_always(tool)
        early.reconsider_questions()
    return None


def _run_parallel(
    batch: Sequence[Prepared],
    runner: ToolRunner,
    ctx: Any,
    results: dict[str, ToolResult],
    early: EarlyCalls,
    response: int,
) -> Iterator[Event]:
    """Run safe calls side by side (a call `early` started is waited for, not run again);
    their events and results come in call order whichever finishes first."""
    for prepared in batch:
        call = prepared.call
        yield ToolStarted(call.id, call.name, _display_args(call), response)
    futures = {p.call.id: early.take(p.call) for p in batch}
    rest = [p for p in batch if futures[p.call.id] is None]
    with ThreadPoolExecutor(max_workers=min(MAX_PARALLEL_TOOLS, max(1, len(rest)))) as pool:
        for prepared in rest:
            if len(rest) == 1:  # one call runs in the loop's own thread
                ran: Future[ToolResult] = Future()
                ran.set_result(execute(runner, prepared, ctx))
                futures[prepared.call.id] = ran
            else:
                futures[prepared.call.id] = pool.submit(execute, runner, prepared, ctx)
        for prepared in batch:
            future = futures[prepared.call.id]
            assert future is not None
            results[prepared.call.id] = future.result()
            yield from _finished(prepared.call, results[prepared.call.id], response)
