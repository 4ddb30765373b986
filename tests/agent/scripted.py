"""In-process scripted provider, tiny tools and a session builder for agent-loop unit tests."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict

from qshell.agent.session import Session, SessionOptions, SessionStats
from qshell.agent.transcript import Transcript
from qshell.cancel import CancelToken
from qshell.errors import ProviderError
from qshell.llm.base import StreamDone, StreamEvent, StreamText
from qshell.llm.messages import ChatRequest, Message, StopReason, ToolCall, Usage
from qshell.tools.base import Access, ErrorType, Kind, Tool, ToolContext, ToolResult
from qshell.tools.paths import PathResolver

Step = Message | ProviderError | Callable[[ChatRequest, CancelToken], Iterator[StreamEvent]]


def session_for(
    provider: Any,
    root: Path,
    tools: Sequence[Tool] = (),
    *,
    home: Path | None = None,
    environ: Mapping[str, str] | None = None,
    model: str = "m",
    system_prompt: str = "sys",
    history: Sequence[Message] = (),
    transcript: Transcript | None = None,
    last_prompt_tokens: int = 0,
    **options: Any,
) -> Session:
    """A session over `provider` whose tools work in `root` (home: `home`, else `root`;
    the process environment unless `environ`); `options` are SessionOptions fields."""
    paths = PathResolver(root, home=home or root)
    context = ToolContext(paths=paths)
    if environ is not None:
        context = replace(context, environ=environ)
    return Session(
        provider=provider,
        model=model,
        system_prompt=system_prompt,
        tools=tools,
        tool_context=context,
        options=SessionOptions(**options),
        history=history,
        transcript=transcript,
        stats=SessionStats(last_prompt_tokens=last_prompt_tokens),
    )


class ScriptedProvider:
    """Replays a list of steps, one per round: a message, an error, or a custom stream."""

    name = "scripted"

    def __init__(self, steps: list[Step]) -> None:
        self.steps = list(steps)
        self.requests: list[ChatRequest] = []

    def stream(self, request: ChatRequest, cancel: CancelToken) -> Iterator[StreamEvent]:
        self.requests.append(request)
        step = self.steps.pop(0)
        if isinstance(step, ProviderError):
            raise step
        if callable(step):
            yield from step(request, cancel)
            return
        if step.text:
            yield StreamText(step.text)
        stop: StopReason = "tool_use" if step.tool_calls else "end_turn"
        yield StreamDone(step, Usage(prompt_tokens=10, completion_tokens=2, cached_tokens=4), stop)


def call(name: str, args: str = "{}", id_: str | None = None) -> ToolCall:
    return ToolCall(id=id_ or f"call_{name}_{abs(hash(args)) % 10_000}", name=name, arguments=args)


class NoteArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    text: str


class RecordingTool:
    """A tool of any kind that records the threads and order it ran in."""

    name: ClassVar[str] = "recording"
    kind: ClassVar[Kind] = Kind.READ
    Args: ClassVar[type[BaseModel]] = NoteArgs
    description: ClassVar[str] = "test tool"

    def __init__(self, name: str, kind: Kind, *, barrier: threading.Barrier | None = None) -> None:
        self.name = name  # type: ignore[misc]  # each instance is a tool of its own
        self.kind = kind  # type: ignore[misc]
        self.barrier = barrier
        self.ran: list[str] = []

    def run(self, args: Any, ctx: ToolContext) -> ToolResult:
        if self.barrier is not None:
            self.barrier.wait(timeout=10)
        self.ran.append(args.text)
        return ToolResult(llm_content=f"{self.name} ran {args.text}")

    def accesses(self, args: Any, ctx: ToolContext) -> list[Access]:
        return []


class BlockingTool(RecordingTool):
    """Blocks until the cancel token fires, then reports cancellation."""

    def __init__(self, name: str = "block", kind: Kind = Kind.EXECUTE) -> None:
        super().__init__(name, kind)
        self.started = threading.Event()

    def run(self, args: Any, ctx: ToolContext) -> ToolResult:
        self.started.set()
        ctx.cancel.wait(30)
        if ctx.cancel.cancelled:
            return ToolResult.fail(ErrorType.CANCELLED, "cancelled")
        return ToolResult(llm_content="finished")


class SkippingTool(RecordingTool):
    """A tool whose output is the answer: its results say `skip_llm_round`."""

    def run(self, args: Any, ctx: ToolContext) -> ToolResult:
        self.ran.append(args.text)
        if args.text == "fail":
            return replace(ToolResult.fail(ErrorType.IO, "broke"), skip_llm_round=True)
        return ToolResult(llm_content=f"{self.name}: {args.text}", skip_llm_round=True)


class TerminalTool(RecordingTool):
    """A tool whose output is already what the user reads: `result_is_terminal` (D3);
    with `skip`, it also says `skip_llm_round`; the text "fail" fails."""

    def __init__(self, name: str, kind: Kind = Kind.READ, *, skip: bool = False) -> None:
        super().__init__(name, kind)
        self.skip = skip

    def run(self, args: Any, ctx: ToolContext) -> ToolResult:
        self.ran.append(args.text)
        result = ToolResult(llm_content=f"{self.name}: {args.text}")
        if args.text == "fail":
            result = ToolResult.fail(ErrorType.IO, "broke")
        return replace(result, result_is_terminal=True, skip_llm_round=self.skip)
