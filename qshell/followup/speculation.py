"""Speculation: the predicted next prompt, already running on a fork behind the gate.

A `Speculation` runs the one agent loop on a fork of the session (same provider, system
prompt, tools and history, so it shares the prompt cache; `fastModel` when set) with the
gate's SpeculativeRunner and a private copy-on-write overlay, buffering the events for
replay. It stops at the first boundary, at the limits (rounds, messages, wall clock, output
tokens), or when aborted. `accept()` turns it into the real turn: the overlay is applied
all-or-nothing (a conflict means nothing is applied and the prompt runs normally), the
speculated messages join the history and the transcript, the buffered events are replayed,
and a speculation that stopped early continues as a live turn from its last complete round
— nothing already executed runs twice. Fail open: errors are logged and the prompt runs as
a normal turn. One background thread runs it; `abort()` and `accept()` come from the
front-end's thread and synchronise through the done-event.
"""

from __future__ import annotations

import enum
import logging
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from qshell.agent.events import (
    Event,
    Notice,
    RoundFinished,
    SpeculationAccepted,
    ToolFinished,
    ToolStarted,
    TurnFailed,
    TurnFinished,
)
from qshell.agent.loop import PendingCalls, run_turn
from qshell.agent.policy import ToolRunner
from qshell.agent.session import Session, check_history
from qshell.cancel import CancelToken
from qshell.errors import Cancelled
from qshell.followup.gate import Boundary, SpeculativeRunner
from qshell.llm.messages import Message, ToolCall
from qshell.overlay import ApplyConflict, Overlay
from qshell.tools.base import ErrorType

log = logging.getLogger(__name__)

MAX_SPECULATION_TURNS = 20
MAX_SPECULATION_MESSAGES = 100
DEFAULT_WALL_CLOCK_S = 120.0
DEFAULT_OUTPUT_TOKENS = 8_000
ABORT_WAIT_S = 5.0


class Status(enum.StrEnum):
    RUNNING = "running"
    COMPLETED = "completed"
    BOUNDARY = "boundary"
    LIMIT = "limit"
    FAILED = "failed"
    ABORTED = "aborted"


@dataclass(frozen=True, slots=True)
class Limits:
    max_rounds: int = MAX_SPECULATION_TURNS
    max_messages: int = MAX_SPECULATION_MESSAGES
    wall_clock_s: float = DEFAULT_WALL_CLOCK_S
    output_tokens: int = DEFAULT_OUTPUT_TOKENS


class Speculation:
    """One speculative run of `prompt` on a fork of `session`."""

    def __init__(
        self,
        session: Session,
        prompt: str,
        overlay: Overlay,
        *,
        model: str | None = None,
        limits: Limits = Limits(),
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.prompt = prompt
        self.overlay = overlay
        self.limits = limits
        self.clock = clock
        self.base_length = len(session.history)
        self.fork = Session(
            provider=session.provider,
            model=model or session.model,
            system_prompt=session.system_prompt,
            tools=session.tools,
            tool_context=session.tool_context,
            approval_mode=session.approval_mode,
            max_turns=limits.max_rounds,
            max_tokens=session.max_tokens,
            session_id=session.id,
            history=session.history,
            context_window=session.context_window,
            compact_threshold=session.compact_threshold,
            compact_tools=session.compact_tools,
            final_round_without_tools=session.final_round_without_tools,
        )
        self.runner = SpeculativeRunner(overlay, session.approval_mode)
        self.status = Status.RUNNING
        self.boundary: Boundary | None = None
        self.events: list[Event] = []
        self.started_at = clock()
        self.completed_at: float | None = None
        self.done = threading.Event()
        self._cancel = CancelToken()
        self._stop_reason: Status | None = None
        self._lock = threading.Lock()
        self.on_done: Callable[[Speculation], None] | None = None

    # -- running (background thread) ---------------------------------------------------

    def run(self) -> None:
        timer = threading.Timer(self.limits.wall_clock_s, self._stop, args=(Status.LIMIT,))
        timer.daemon = True
        timer.start()
        status = Status.FAILED
        output_tokens = 0
        try:
            for event in run_turn(self.fork, self.prompt, self.runner, self._cancel):
                with self._lock:
                    self.events.append(event)
                if isinstance(event, RoundFinished):
                    output_tokens += event.usage.completion_tokens
                    too_many = len(self.fork.history) - self.base_length > self.limits.max_messages
                    if output_tokens > self.limits.output_tokens or too_many:
                        self._stop(Status.LIMIT)
                if isinstance(event, TurnFinished):
                    status = Status.COMPLETED
                elif isinstance(event, TurnFailed):
                    status = self._stop_reason or Status.FAILED
        except Boundary as boundary:
            self.boundary = boundary
            status = Status.BOUNDARY
        except Cancelled:
            status = self._stop_reason or Status.ABORTED
        except Exception:  # fail open: a speculation never reaches the user half-done
            log.exception("speculation failed")
            status = Status.FAILED
        finally:
            timer.cancel()
            self.status = status
            self.completed_at = self.clock()
            self.done.set()
        if self.on_done is not None:
            try:
                self.on_done(self)
            except Exception:
                log.exception("speculation callback failed")

    def _stop(self, reason: Status) -> None:
        self._stop_reason = reason
        self._cancel.cancel()

    # -- the user's side (front-end thread) ------------------------------------------------

    def abort(self) -> None:
        """The user typed something else: stop the HTTP call and drop the overlay."""
        self._stop(Status.ABORTED)
        self.done.wait(ABORT_WAIT_S)
        self.overlay.discard()

    def stop_for_accept(self) -> None:
        """Accepted while still running: end the running round; completed rounds stay."""
        if not self.done.is_set():
            self._stop(Status.LIMIT)
            self.done.wait(ABORT_WAIT_S)

    @property
    def usable(self) -> bool:
        return self.done.is_set() and self.status in (
            Status.COMPLETED,
            Status.BOUNDARY,
            Status.LIMIT,
        )


@dataclass(frozen=True, slots=True)
class _Injection:
    messages: list[Message]
    pending: PendingCalls | None
    replay: list[Event]


def _plan(spec: Speculation) -> _Injection:
    """Which speculated messages to keep, which calls to resume, which events to replay."""
    new = list(spec.fork.history[spec.base_length :])
    if spec.status is Status.COMPLETED:
        return _Injection(new, None, list(spec.events))
    known = {
        e.call_id: e.result
        for e in spec.events
        if isinstance(e, ToolFinished)
        and not (e.result.error is not None and e.result.error.type is ErrorType.CANCELLED)
    }
    # the last assistant message with calls decides where the real turn takes over
    while new and new[-1].role == "user" and new[-1].tool_results:
        results = new[-1].tool_results
        if all(r.tool_call_id in known for r in results):
            break
        new.pop()  # results include cancelled ones: re-answer that batch
    pending = None
    if new and new[-1].role == "assistant" and new[-1].tool_calls:
        calls: list[ToolCall] = []
        for tool_call in new[-1].tool_calls:
            calls.append(tool_call)
            if tool_call.id not in known:
                break  # calls after the first unanswered one are dropped
        kept = [b for b in new[-1].content if not isinstance(b, ToolCall)] + calls
        new[-1] = Message(role="assistant", content=kept)
        pending = PendingCalls(calls, {c.id: known[c.id] for c in calls if c.id in known})
    kept_ids = {c.id for m in new for c in m.tool_calls}
    replay = [
        e
        for e in spec.events
        if not isinstance(e, TurnFailed | TurnFinished)
        and not (isinstance(e, ToolStarted | ToolFinished) and e.call_id not in kept_ids)
    ]
    if new and new[-1].role == "user" and new[-1].text == spec.prompt:
        new, replay = [], []  # nothing beyond the prompt survived: just run the turn
    return _Injection(new, pending, replay)


def accept(
    spec: Speculation,
    session: Session,
    runner: ToolRunner,
    cancel: CancelToken,
    *,
    on_apply: Callable[[list[str]], None] | None = None,
) -> Iterator[Event]:
    """The real turn for a prompt that was speculated: replay, apply, and continue if needed.

    Yields the same events a live turn would. Falls back to a normal turn (fail open) when
    the speculation is unusable, its overlay conflicts with the tree, or anything breaks
    before its messages joined the history.
    """
    spec.stop_for_accept()
    accepted_at = spec.clock()
    injection = _plan(spec) if spec.usable else None
    if injection is None or not injection.messages:
        spec.overlay.discard()
        yield from run_turn(session, spec.prompt, runner, cancel)
        return
    try:
        candidate = [*session.history, *injection.messages]
        problems = check_history(candidate if injection.pending is None else candidate[:-1])
        if problems:
            raise ValueError(f"speculated history does not pair up: {problems}")
        written = list(spec.overlay.written)
        if on_apply is not None:
            on_apply(written)
        spec.overlay.apply()
    except ApplyConflict as conflict:
        spec.overlay.discard()
        yield Notice(f"the prepared answer was not used: {conflict}; running it now")
        yield from run_turn(session, spec.prompt, runner, cancel)
        return
    except Exception:
        log.exception("applying the speculation failed; running the prompt normally")
        spec.overlay.discard()
        yield from run_turn(session, spec.prompt, runner, cancel)
        return
    spec.overlay.discard()
    for message in injection.messages:
        session.append(message)
    session.usage = session.usage + spec.fork.usage
    session.rounds += spec.fork.rounds
    session.cache_safe = spec.fork.cache_safe
    session.last_usage = spec.fork.last_usage
    completed = spec.status is Status.COMPLETED
    saved = min(accepted_at, spec.completed_at or accepted_at) - spec.started_at
    finished = [e for e in injection.replay if isinstance(e, TurnFinished)]
    yield from (e for e in injection.replay if not isinstance(e, TurnFinished))
    yield SpeculationAccepted(saved_s=max(0.0, saved), files=tuple(written), completed=completed)
    if completed:
        yield from finished
        return
    yield from run_turn(session, None, runner, cancel, pending=injection.pending)
