"""Speculation: the predicted next prompt, already running on a fork behind the gate.

A `Speculation` runs the one agent loop on `session.fork()` (same provider, system prompt,
tools and history, its requests built from the last main request so they share the prompt
cache; `fastModel` when set) with the gate's SpeculativeRunner and a private copy-on-write
overlay, buffering the events for replay. It stops at the first boundary, at the limits
(rounds, messages, wall clock, output tokens), or when aborted. `accept()` turns it into
the real turn and says how that went (`Acceptance`: accepted, conflict or failed): the
overlay is applied all-or-nothing (a conflict means nothing is applied and the prompt runs
normally), the session adopts the speculated messages and their usage (and the files they
read count as read: tools/ledger.py `adopt`; until then no read of a speculation counts
outside its overlay), the buffered events
are replayed, and a speculation that stopped early continues as a live turn from its last
complete round — nothing already executed runs twice. Fail open: errors are logged and the
prompt runs as a normal turn. One background thread runs it; `abort()` and `accept()` come
from the front-end's thread. `abort()` never waits: it cancels the run (the loop's token
closes the HTTP call and stops the tools) and returns at once; the overlay is discarded
when the run has actually ended, on whichever thread sees that last (`release`), and the
callback given to `abort` runs then too. Accepted while a model round still streams,
`take_over` shows what the run did so far and then that round as it arrives, and the run
stops before it starts anything new — the round is not cut and asked for again; while it
runs tools, `accept()` stops it at once. `accept()` waits for the run to stop (it needs its
history) and synchronises through the done-event.
"""

from __future__ import annotations

import enum
import itertools
import logging
import threading
import time
from collections.abc import Callable, Generator, Iterator, Sequence
from dataclasses import dataclass, replace

from qshell.agent.events import (
    Event,
    Notice,
    PredictionStarted,
    RoundFinished,
    SpeculationAccepted,
    ToolFinished,
    ToolStarted,
    TurnFailed,
    TurnFinished,
)
from qshell.agent.loop import PendingCalls, run_turn
from qshell.agent.session import Session, check_history
from qshell.cancel import CancelToken
from qshell.config import DEFAULTS, SpeculationSettings
from qshell.errors import Cancelled
from qshell.followup.gate import Boundary, SpeculativeRunner
from qshell.latency.router import Router
from qshell.llm.messages import Message
from qshell.overlay import ApplyConflict, Overlay
from qshell.permissions.runner import ToolRunner
from qshell.tools.base import ErrorType

log = logging.getLogger(__name__)

ACCEPT_WAIT_S = 5.0  # how long accept waits for a cancelled round to stop before giving up


class Status(enum.StrEnum):
    RUNNING = "running"
    COMPLETED = "completed"
    BOUNDARY = "boundary"
    LIMIT = "limit"
    FAILED = "failed"
    ABORTED = "aborted"


class Outcome(enum.StrEnum):
    """How a speculation ended for the user: what `accept` returns, or that it was aborted.
    The value is the `outcome` of its telemetry event."""

    ACCEPTED = "accepted"  # its work joined the session (continued live if it stopped early)
    CONFLICT = "conflict"  # a file it wrote changed meanwhile: nothing applied, prompt ran
    FAILED = "error"  # unusable or broken: the prompt ran as a normal turn
    ABORTED = "aborted"  # the user typed or submitted something else
    RERUN = "rerun"  # asked about its commands, the user had the prompt run for real
    DISCARDED = "discarded"  # asked about its commands, the user dropped it (or cancelled)


@dataclass(frozen=True, slots=True)
class Limits:
    """How far a speculation may run: model rounds, new messages, seconds, output tokens."""

    max_rounds: int
    max_messages: int
    wall_clock_s: float
    output_tokens: int

    @classmethod
    def of(cls, settings: SpeculationSettings) -> Limits:
        return cls(
            max_rounds=settings.max_rounds,
            max_messages=settings.max_messages,
            wall_clock_s=settings.wall_clock_s,
            output_tokens=settings.output_tokens,
        )


@dataclass(frozen=True, slots=True)
class Acceptance:
    """What `accept` came to, and the events of the real turn for the prompt (to render as
    a live turn's). `saved_s` is the time saved when accepted; `detail` says why not;
    `commands` lists the commands the speculation ran on a kernel overlay (gate.py)."""

    outcome: Outcome
    events: Iterator[Event]
    saved_s: float = 0.0
    detail: str = ""
    commands: tuple[str, ...] = ()


class Speculation:
    """One speculative run of `prompt` on a fork of `session`."""

    def __init__(
        self,
        session: Session,
        prompt: str,
        overlay: Overlay,
        *,
        model: str | None = None,
        limits: Limits | None = None,
        clock: Callable[[], float] = time.monotonic,
        reads_only: bool = False,
    ) -> None:
        self.prompt = prompt
        self.overlay = overlay
        self.limits = limits = limits or Limits.of(DEFAULTS.speculation)
        self.clock = clock
        self.base_length = len(session.history)
        self.fork = session.fork(model=model, max_turns=limits.max_rounds)
        self.runner = SpeculativeRunner(overlay, session.approval_mode, reads_only=reads_only)
        self.status = Status.RUNNING
        self.boundary: Boundary | None = None
        self.events: list[Event] = []
        self.started_at = clock()
        self.completed_at: float | None = None
        self.done = threading.Event()
        self._cancel = CancelToken()
        self._stop_reason: Status | None = None
        self._aborted = False
        self._lock = threading.Lock()
        self._arrived = threading.Condition(self._lock)  # an event was added, or the run ended
        self._tools_left = 0  # calls of the last round still to finish (under _lock)
        self._finish_round = False  # accepted mid-round: stop once the round ends (under _lock)
        self.accepted_at: float | None = None
        self._started = False  # run() has begun (set under _lock)
        self._ended = False  # the run is over, or will never start (under _lock, before `done`)
        self._released = False  # the overlay goes once the run is over
        self._then: list[Callable[[], None]] = []  # what abort asked to run after that
        self.on_done: Callable[[Speculation], None] | None = None

    # -- running (background thread) ---------------------------------------------------

    def run(self) -> None:
        with self._lock:
            if self._ended:  # released before it ever started
                return
            self._started = True
        timer = threading.Timer(self.limits.wall_clock_s, self._stop, args=(Status.LIMIT,))
        timer.daemon = True
        timer.start()
        status = Status.FAILED
        output_tokens = 0
        try:
            for event in run_turn(self.fork, self.prompt, self.runner, self._cancel):
                if isinstance(event, PredictionStarted):
                    continue  # an accepted turn is shown whole, or by take_over with no gap
                with self._lock:
                    self.events.append(event)
                    round_over = self._track(event)
                    self._arrived.notify_all()
                if round_over:  # the accepted turn took this round over; start nothing new
                    self._stop(Status.LIMIT)
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
            self._end(status)
        if self.on_done is not None:
            try:
                self.on_done(self)
            except Exception:
                log.exception("speculation callback failed")

    def _track(self, event: Event) -> bool:
        """Under the lock: count the calls the round just finished asks for; True when that
        round ended and an accept asked to stop then."""
        if isinstance(event, RoundFinished):
            last = self.fork.history[-1] if self.fork.history else None
            calls = last.tool_calls if last is not None and last.role == "assistant" else []
            self._tools_left = len(calls)
            return self._finish_round
        if isinstance(event, ToolFinished):
            self._tools_left = max(0, self._tools_left - 1)
        return False

    def _stop(self, reason: Status) -> None:
        self._stop_reason = reason
        self._cancel.cancel()

    def _end(self, status: Status) -> None:
        """The run is over: record how, drop the overlay if it was released, run what
        abort asked for, then set `done`."""
        with self._lock:
            self.status = status
            self.completed_at = self.clock()
            self._ended = True
            self._arrived.notify_all()
            released, then = self._released, self._then
            self._then = []
        try:
            if released:
                self.overlay.discard()
            _run_all(then)
        finally:
            self.done.set()

    # -- the user's side (front-end thread) ------------------------------------------------

    def abort(self, then: Callable[[], None] | None = None) -> None:
        """The user typed something else: cancel the run and return at once. The overlay is
        dropped, and `then` called, as soon as the run has ended (now, if it has)."""
        self._aborted = True
        self._stop(Status.ABORTED)
        self.release(then)

    def release(self, then: Callable[[], None] | None = None) -> None:
        """Discard the overlay once the run has ended (now, if it has; else on its thread),
        then call `then`. Never waits."""
        with self._lock:
            self._released = True
            if then is not None:
                self._then.append(then)
            if self._started and not self._ended:
                return  # the run's end does the rest
            never_ran = not self._ended
            if never_ran:  # still queued (or its pool shut down): it will not start now
                self._ended = True
                self._arrived.notify_all()
                self.status = self._stop_reason or Status.ABORTED
                self.completed_at = self.clock()
            pending, self._then = self._then, []
        try:
            self.overlay.discard()
            _run_all(pending)
        finally:
            if never_ran:
                self.done.set()

    def finish_round(self) -> bool:
        """Accepted while running: when a model round is in flight (not a tool batch, and
        the run has started), let it run to its end and stop the run then; False, and
        nothing changes, otherwise."""
        with self._lock:
            self.accepted_at = self.clock()
            if not self._started or self._ended or self._tools_left:
                return False
            self._finish_round = True
            return True

    def cut(self) -> None:
        """End the round in flight now (the accepted turn was cancelled); never waits."""
        self._stop(Status.LIMIT)

    def follow(self) -> Iterator[Event]:
        """Every event of the run, each one still to come as it arrives, until it ends."""
        index = 0
        while True:
            with self._lock:
                while index >= len(self.events) and not self._ended:
                    self._arrived.wait()
                if index >= len(self.events):
                    return
                event = self.events[index]
            index += 1
            yield event

    def stop_for_accept(self) -> None:
        """Accepted while still running: end the running round; completed rounds stay."""
        if not self.done.is_set():
            self._stop(Status.LIMIT)
            self.done.wait(ACCEPT_WAIT_S)

    @property
    def aborted(self) -> bool:
        """`abort()` was called (before, during or after the run)."""
        return self._aborted

    @property
    def usable(self) -> bool:
        return self.done.is_set() and self.status in (
            Status.COMPLETED,
            Status.BOUNDARY,
            Status.LIMIT,
        )


def _run_all(callbacks: Sequence[Callable[[], None]]) -> None:
    for callback in callbacks:
        try:
            callback()
        except Exception:
            log.exception("speculation callback failed")


@dataclass(frozen=True, slots=True)
class _Injection:
    messages: list[Message]
    pending: PendingCalls | None
    replay: Sequence[Event]


def take_over(spec: Speculation, cancel: CancelToken) -> Generator[Event, None, int]:
    """Accepted while a model round is in flight: yield the run's events so far and that
    round's as they arrive, then let the run stop before it starts anything new (the round
    is not cut and asked for again). Returns how many events it showed, which `accept`
    does not replay; the turn's end is left to it. Shows nothing when the run is over or
    in a tool batch. The user's cancel cuts the round."""
    if not spec.finish_round():
        return 0
    shown = 0
    unregister = cancel.on_cancel(spec.cut)
    try:
        for event in spec.follow():
            if isinstance(event, TurnFinished | TurnFailed):
                break  # the end, and nothing after it, is accept's to tell
            shown += 1
            yield event
    finally:
        unregister()
    return shown


def _plan(spec: Speculation, shown: int) -> _Injection:
    """Which speculated messages to keep, which calls to resume, which events to replay
    (those after the first `shown`, which `take_over` showed)."""
    new = list(spec.fork.history[spec.base_length :])
    if spec.status is Status.COMPLETED:
        return _Injection(new, None, spec.events[shown:])
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
        # the whole batch goes on live: the calls that ran are not run again, the others
        # (the boundary call first among them) are decided and asked about as usual
        calls = new[-1].tool_calls
        pending = PendingCalls(calls, {c.id: known[c.id] for c in calls if c.id in known})
    kept_ids = {c.id for m in new for c in m.tool_calls}
    replay = [
        e
        for e in spec.events[shown:]
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
    shown: int = 0,
    router: Router | None = None,
) -> Acceptance:
    """Turn `spec` into the real turn for its prompt: apply its overlay, let `session` adopt
    its messages, and return the events to render (replay of all but the `shown` ones that
    `take_over` showed, then a live continuation when it stopped early). Fails open: when
    the speculation is unusable, conflicts with the tree or anything breaks before its
    messages joined the history, the events are a normal turn (after a notice, when some
    of the speculation was shown). `on_apply` gets the files about to be written (for /undo
    checkpoints). A turn run live runs with `router` (the conversation's)."""
    spec.stop_for_accept()
    accepted_at = spec.accepted_at or spec.clock()
    injection = _plan(spec, shown) if spec.usable else None
    if injection is None or not injection.messages:
        spec.release()  # a run that did not stop in time drops its overlay when it does
        why = f"the speculation ended {spec.status}" if injection is None else "nothing to keep"
        return Acceptance(
            Outcome.FAILED, _afresh(spec, session, runner, cancel, shown, router), detail=why
        )
    try:
        candidate = [*session.history, *injection.messages]
        problems = check_history(candidate if injection.pending is None else candidate[:-1])
        if problems:
            raise ValueError(f"speculated history does not pair up: {problems}")
        written = list(spec.overlay.written)
        protected = [
            rel for rel in written if spec.overlay.resolver.is_protected(session.project_root / rel)
        ]
        if protected:  # the gate never lets one in; an accept never writes one either
            raise ValueError(f"the speculation wrote protected files: {', '.join(protected)}")
        if on_apply is not None:
            on_apply(written)
        spec.overlay.apply()
    except ApplyConflict as conflict:
        spec.overlay.discard()
        notice = Notice(f"the prepared answer was not used: {conflict}; running it now")
        turn = run_turn(session, spec.prompt, runner, cancel, router=router)
        return Acceptance(Outcome.CONFLICT, itertools.chain([notice], turn), detail=str(conflict))
    except Exception as exc:
        log.exception("applying the speculation failed; running the prompt normally")
        spec.overlay.discard()
        turn = _afresh(spec, session, runner, cancel, shown, router)
        return Acceptance(Outcome.FAILED, turn, detail=str(exc))
    session.tool_context.reads.adopt(spec.overlay.view)  # what it read is the session's now
    spec.overlay.discard()
    saved = max(0.0, min(accepted_at, spec.completed_at or accepted_at) - spec.started_at)
    session.adopt(spec.fork, injection.messages, saved_s=saved)
    accepted = SpeculationAccepted(
        saved_s=saved, files=tuple(written), completed=spec.status is Status.COMPLETED
    )
    events = _accepted_turn(injection, accepted, session, runner, cancel, spec.fork, router)
    commands = tuple(spec.runner.overlay_commands)
    return Acceptance(Outcome.ACCEPTED, events, saved_s=saved, commands=commands)


def _afresh(
    spec: Speculation,
    session: Session,
    runner: ToolRunner,
    cancel: CancelToken,
    shown: int,
    router: Router | None,
) -> Iterator[Event]:
    """The prompt as a normal turn; first a notice if part of the speculation was shown."""
    turn = run_turn(session, spec.prompt, runner, cancel, router=router)
    if not shown:
        return turn
    return itertools.chain([Notice("the prepared answer broke off; running it now")], turn)


def _accepted_turn(
    injection: _Injection,
    accepted: SpeculationAccepted,
    session: Session,
    runner: ToolRunner,
    cancel: CancelToken,
    fork: Session,
    router: Router | None,
) -> Iterator[Event]:
    """The replayed events, the accept notice, then the end of the turn: the speculation's
    own when it completed, else the live continuation from its last complete round, whose
    usage and rounds then include the speculated ones (the turn is both)."""
    finished = [e for e in injection.replay if isinstance(e, TurnFinished)]
    yield from (e for e in injection.replay if not isinstance(e, TurnFinished))
    yield accepted
    if accepted.completed:
        yield from finished
        return
    speculated, speculated_rounds = fork.stats.usage, fork.stats.rounds
    turn = run_turn(session, None, runner, cancel, pending=injection.pending, router=router)
    for event in turn:
        if isinstance(event, TurnFinished | TurnFailed):
            event = replace(
                event, usage=speculated + event.usage, rounds=speculated_rounds + event.rounds
            )
        yield event
