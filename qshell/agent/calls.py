"""One tool call of a model response made ready to run, and run with tool bugs caught.

`prepare` looks the call's tool up and validates its arguments (a `Prepared` whose
`result` is set must not run: unknown tool, invalid arguments, later a denial);
`execute` runs an allowed call through the runner and turns a tool's crash into a failed
`ToolResult` for the model, while control signals (a cancel, a speculation boundary) pass
through; `preview` and `unready` are what a tool offers before a permission question (its
diff; the failure it meets whatever the answer). Shared by the loop's batches
(agent/batch.py) and the calls started while a response still streams
(latency/stream_ahead.py). It must not decide permissions or emit
events. Pure apart from the tool run itself; `execute` may run in any thread, as the
tool's own thread rule allows.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from qshell.agent.session import Session
from qshell.errors import ControlSignal
from qshell.llm.messages import ToolCall
from qshell.permissions.runner import ToolRunner
from qshell.tools.base import ErrorType, Tool, ToolResult

log = logging.getLogger(__name__)


@dataclass(slots=True)
class Prepared:
    """A tool call after lookup, argument validation and the permission decision."""

    call: ToolCall
    tool: Tool | None
    args: Any
    result: ToolResult | None  # set when the call must not run (invalid, unknown, denied)


def prepare(session: Session, call: ToolCall) -> Prepared:
    tool = session.tools_by_name.get(call.name)
    if tool is None:
        known = ", ".join(sorted(session.tools_by_name))
        return Prepared(
            call,
            None,
            None,
            ToolResult.fail(
                ErrorType.UNKNOWN_TOOL,
                f"there is no tool named '{call.name}'; the tools are: {known}",
            ),
        )
    try:
        args = tool.Args.model_validate(call.parsed_arguments())
    except (ValueError, ValidationError) as exc:
        return Prepared(
            call, tool, None, ToolResult.fail(ErrorType.INVALID_ARGS, _arg_problem(exc))
        )
    return Prepared(call, tool, args, None)


def _arg_problem(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        parts = [
            f"{'.'.join(str(p) for p in e['loc']) or 'arguments'}: {e['msg']}" for e in exc.errors()
        ]
        return "invalid arguments: " + "; ".join(parts)
    return f"invalid arguments: {exc}"


def execute(runner: ToolRunner, prepared: Prepared, ctx: Any) -> ToolResult:
    assert prepared.tool is not None
    try:
        return runner.execute(prepared.tool, prepared.args, ctx)
    except ControlSignal:
        raise  # a cancel or a speculation boundary ends the turn; it is not a tool failure
    except Exception as exc:  # a tool bug must not end the turn; the model reads it
        log.exception("tool %s crashed", prepared.call.name)
        return ToolResult.fail(ErrorType.IO, f"the tool failed unexpectedly: {exc}")


def unready(prepared: Prepared, ctx: Any) -> ToolResult | None:
    """The tool's own word (`unready`) that the call fails whatever the user would answer
    (a write over a file the model has not read), so no question is worth asking."""
    check = getattr(prepared.tool, "unready", None)
    if check is None:
        return None
    try:
        result = check(prepared.args, ctx)
    except Exception:  # a courtesy: the question is asked as before
        log.debug("checking %s before the question failed", prepared.call.name, exc_info=True)
        return None
    return result if isinstance(result, ToolResult) else None


def preview(prepared: Prepared, ctx: Any) -> str:
    """The tool's own preview of the call (an edit's diff), when it offers one."""
    show = getattr(prepared.tool, "preview", None)
    if show is None:
        return ""
    try:
        return str(show(prepared.args, ctx))
    except Exception:  # a preview is a courtesy; the question is still asked without it
        log.debug("preview of %s failed", prepared.call.name, exc_info=True)
        return ""
