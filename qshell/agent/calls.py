"""One tool call of a model response made ready to run, and run with tool bugs caught.

`prepare` looks the call's tool up and validates its arguments (a `Prepared` whose
`result` is set must not run: unknown tool, invalid arguments, later a denial);
`execute` runs an allowed call through the runner and turns a tool's crash into a failed
`ToolResult` for the model, while control signals (a cancel, a speculation boundary) pass
through; every result it returns is `screened`: each secret in what the model and the
transcript would see is replaced by a marker of the session's vault (qshell/redaction),
the one place a tool's output — built-in or a plugin's, in a normal turn, a speculation
or `--print`, started early or in its batch — is redacted before it becomes history; `preview` and `unready` are what a tool offers before a permission question (its
diff; the failure it meets whatever the answer). Shared by the loop's batches
(agent/batch.py) and the calls started while a response still streams
(latency/stream_ahead.py). It must not decide permissions or emit
events. Pure apart from the tool run itself; `execute` may run in any thread, as the
tool's own thread rule allows.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from typing import Any

from pydantic import ValidationError

from qshell.agent.session import Session
from qshell.errors import ControlSignal
from qshell.llm.messages import ToolCall
from qshell.permissions.runner import ToolRunner
from qshell.redaction import Vault
from qshell.tools.base import ErrorType, Tool, ToolError, ToolResult

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
        result = runner.execute(prepared.tool, prepared.args, ctx)
    except ControlSignal:
        raise  # a cancel or a speculation boundary ends the turn; it is not a tool failure
    except Exception as exc:  # a tool bug must not end the turn; the model reads it
        log.exception("tool %s crashed", prepared.call.name)
        result = ToolResult.fail(ErrorType.IO, f"the tool failed unexpectedly: {exc}")
    return screened(result, ctx.secrets)


def screened(result: ToolResult, vault: Vault) -> ToolResult:
    """`result` with every secret in its text for the model, its text for the user and its
    error message replaced by the vault's marker; `redacted` names their kinds."""
    content = vault.redact(result.llm_content)
    same = result.display == result.llm_content  # a shell's output, often: scanned once
    display = content if same else vault.redact(result.display)
    error = result.error
    message = vault.redact(error.message) if error is not None else None
    if not (content.findings or display.findings or (message and message.findings)):
        return result
    if error is not None and message is not None:
        error = ToolError(error.type, message.text)
    kinds = content.kinds or display.kinds or (message.kinds if message else ())
    return replace(
        result, llm_content=content.text, display=display.text, error=error, redacted=kinds
    )


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
