"""The `--print` front-end: run one turn and write it as text, JSON or stream-JSON.

`text` writes only the final answer (and a `Sources:` list after it when the answer cites
any, as Perplexity's do); `json` writes one object when the turn ends (`citations`, when
there are any);
`stream-json` writes one JSON object per line for each event (the model's reasoning as
`reasoning` events apart from the answer's `message` events), each with a `type` and a
`timestamp`, ending with `result`. The result carries the `stop_reason`; an answer that did
not finish (cut off at the output limit, refused, filtered) is `"subtype": "incomplete"`,
says why on stderr in one line and exits with ExitCode.INCOMPLETE. A turn that fails
part-way through an answer still writes what of it arrived (text: on stdout; json: as the
result's `result`), then the error. Errors and notices go to stderr as one line each; stdout stays parseable in every format. Print mode never asks a question: its ToolRunner is
non-interactive, so it never sees a PermissionRequested. Runs in the caller's thread.
"""

from __future__ import annotations

import enum
import json
import time
from collections.abc import Callable, Iterable
from typing import Any, TextIO

from qshell.agent.events import (
    ApplyChoice,
    ApplyRequested,
    Event,
    FailureKind,
    Notice,
    PermissionAnswer,
    PermissionReply,
    PermissionRequested,
    ReasoningDelta,
    RoundFinished,
    TextDelta,
    TextWithdrawn,
    ToolFinished,
    ToolStarted,
    TurnFailed,
    TurnFinished,
)
from qshell.errors import ExitCode
from qshell.llm.messages import FINISHED_STOPS, Usage
from qshell.ui.render import one_line, sources_lines


class OutputFormat(enum.StrEnum):
    TEXT = "text"
    JSON = "json"
    STREAM_JSON = "stream-json"


def usage_json(usage: Usage) -> dict[str, Any]:
    return {
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
        "cached_tokens": usage.cached_tokens,
        "cache_creation_tokens": usage.cache_creation_tokens,
        "reasoning_tokens": usage.reasoning_tokens,
        "known": usage.known,
    }


class Printer:
    """Writes one turn's events to stdout/stderr in the chosen format."""

    def __init__(
        self,
        fmt: OutputFormat,
        *,
        stdout: TextIO,
        stderr: TextIO,
        session_id: str,
        model: str,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.fmt = fmt
        self.stdout = stdout
        self.stderr = stderr
        self.session_id = session_id
        self.model = model
        self.clock = clock
        self._started = clock()
        self._partial: list[str] = []  # the answer's text so far in the round being streamed
        # stream-json's tool ids, one per call of the run: a server that numbers calls
        # `call_0` in every response gets `call_0`, `call_0#2`, … so each pairs one result
        self._tool_ids: dict[tuple[int, str], str] = {}

    def _tool_id(self, event: ToolStarted | ToolFinished) -> str:
        known = self._tool_ids.get(event.key)
        if known is None:
            taken = set(self._tool_ids.values())
            known, n = event.call_id, 1
            while known in taken:
                n += 1
                known = f"{event.call_id}#{n}"
            self._tool_ids[event.key] = known
        return known

    def _emit(self, record: dict[str, Any]) -> None:
        record = {"type": record.pop("type"), "timestamp": _iso(self.clock()), **record}
        self.stdout.write(json.dumps(record, ensure_ascii=False) + "\n")
        self.stdout.flush()

    def run(self, events: Iterable[Event]) -> ExitCode:
        """Consume the events of one turn; return the process exit code."""
        if self.fmt is OutputFormat.STREAM_JSON:
            self._emit({"type": "init", "session_id": self.session_id, "model": self.model})
        for event in events:
            self._follow(event)
            match event:
                case TextDelta(text=text) if self.fmt is OutputFormat.STREAM_JSON:
                    self._emit(
                        {"type": "message", "role": "assistant", "delta": True, "content": text}
                    )
                case ReasoningDelta(text=text) if self.fmt is OutputFormat.STREAM_JSON:
                    self._emit({"type": "reasoning", "delta": True, "content": text})
                case ToolStarted(name=name, args=args) if self.fmt is OutputFormat.STREAM_JSON:
                    self._emit(
                        {
                            "type": "tool_use",
                            "tool_name": name,
                            "tool_id": self._tool_id(event),
                            "parameters": args,
                        }
                    )
                case ToolFinished(result=result) if self.fmt is OutputFormat.STREAM_JSON:
                    self._emit(
                        {
                            "type": "tool_result",
                            "tool_id": self._tool_id(event),
                            "status": "error" if result.error else "success",
                            "output": result.llm_content,
                            "error": result.error.message if result.error else None,
                        }
                    )
                case PermissionRequested(future=future):
                    future.set_result(PermissionReply(PermissionAnswer.DENY, "print mode"))
                case ApplyRequested(future=future):  # print mode never speculates
                    future.set_result(ApplyChoice.DISCARD)
                case TextWithdrawn(text=text):  # a fast round's text, redone on the main model
                    if self.fmt is OutputFormat.STREAM_JSON:  # the deltas since it are void
                        self._emit({"type": "message_withdrawn", "reason": text})
                    self._say(text)
                case Notice(text=text):  # e.g. a plugin that failed: said once, on stderr
                    self._say(text)
                case TurnFinished():
                    return self._finish(event)
                case TurnFailed():
                    return self._fail(event)
                case _:
                    pass
        return self._fail(TurnFailed(FailureKind.ERROR, "the turn ended without a result"))

    def _follow(self, event: Event) -> None:
        """Keep the text of the round being streamed: what a failure leaves of the answer."""
        if isinstance(event, TextDelta):
            self._partial.append(event.text)
        elif isinstance(event, RoundFinished | TextWithdrawn):
            self._partial.clear()

    def _result(
        self,
        *,
        text: str,
        usage: Usage,
        rounds: int,
        error: TurnFailed | None,
        stop_reason: str | None = None,
    ) -> dict[str, Any]:
        if error is not None:
            subtype = f"error_{error.kind}"
        else:
            subtype = "success" if stop_reason in FINISHED_STOPS else "incomplete"
        record: dict[str, Any] = {
            "type": "result",
            "subtype": subtype,
            "result": text,
            "is_error": subtype != "success",
            "stop_reason": stop_reason,
            "session_id": self.session_id,
            "num_rounds": rounds,
            "duration_ms": int((self.clock() - self._started) * 1000),
            "usage": usage_json(usage),
        }
        if error is not None:
            record["error"] = {"kind": str(error.kind), "message": error.message}
        return record

    def _finish(self, event: TurnFinished) -> ExitCode:
        record = self._result(
            text=event.text,
            usage=event.usage,
            rounds=event.rounds,
            error=None,
            stop_reason=event.stop_reason,
        )
        if event.note:
            record["note"] = event.note
        if event.skipped_round:  # the answer is the tool output itself
            record["skipped_llm_round"] = True
        if event.citations:  # the sources its [n] marks number
            record["citations"] = list(event.citations)
        if self.fmt is OutputFormat.TEXT:
            text = event.text
            self.stdout.write(text if text.endswith("\n") or not text else text + "\n")
            sources = sources_lines(event.citations)
            if sources:
                self.stdout.write("\n" + "\n".join(sources) + "\n")
            self.stdout.flush()
        elif self.fmt is OutputFormat.JSON:
            self.stdout.write(json.dumps(record, ensure_ascii=False) + "\n")
        else:
            self._emit({**record, "status": "success" if event.finished else "incomplete"})
        if event.finished:
            return ExitCode.OK
        self._say(event.note)
        return ExitCode.INCOMPLETE

    def _say(self, text: str) -> None:
        """One line on stderr; what a server said in it is cleaned of control characters."""
        self.stderr.write(f"qshell: {one_line(text)}\n")
        self.stderr.flush()

    def _fail(self, event: TurnFailed) -> ExitCode:
        partial = "".join(self._partial)
        if self.fmt is OutputFormat.TEXT and partial:
            self.stdout.write(partial if partial.endswith("\n") else partial + "\n")
            self.stdout.flush()
        self._say(event.message)
        record = self._result(text=partial, usage=event.usage, rounds=event.rounds, error=event)
        if self.fmt is OutputFormat.JSON:
            self.stdout.write(json.dumps(record, ensure_ascii=False) + "\n")
        elif self.fmt is OutputFormat.STREAM_JSON:
            self._emit(
                {
                    "type": "error",
                    "severity": "error",
                    "kind": str(event.kind),
                    "message": event.message,
                }
            )
            self._emit({**record, "status": "error"})
        self.stdout.flush()
        return event.kind.exit_code


def _iso(epoch_s: float) -> str:
    return (
        time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(epoch_s))
        + f".{int(epoch_s * 1000) % 1000:03d}Z"
    )
