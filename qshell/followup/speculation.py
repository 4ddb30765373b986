"""Speculation: the predicted next prompt, already running on a fork behind the gate.

A `Speculation` runs the one agent loop on `session.fork()` (same provider, system prompt,
tools and history, its requests built from the last main request so they share the prompt
cache; `fastModel` when set) with the gate's SpeculativeRunner and a private copy-on-write
overlay, buffering the events for replay. It stops at the first boundary, at the limits
(rounds, messages, wall clock, output tokens), or when aborted. It owns the run and its
overlay's life; turning a run into the real turn is acceptance.py's (`accept`, `take_over`),
which reads the fork, the buffered events and the status this leaves, and uses the verbs
here to stop the run (`stop_for_accept`, `finish_step`, `cut`, `follow`). Until then no
read of a speculation counts outside its overlay. Fail open: errors are logged and the
run ends FAILED, never half-done. One background thread runs it; `abort()`, `release()`
and acceptance come from the front-end's thread. `abort()` never waits: it cancels the run
(the loop's token closes the HTTP call and stops the tools) and returns at once; the
overlay is discarded when the run has actually ended, on whichever thread sees that last
(`release`), and the callback given to `abort` runs then too. Accepted while a model round
still streams, or while it runs a tool batch, the run stops once that round or batch ends,
before it starts anything new (`finish_step`: a command is not cut and run again);
`stop_for_accept()` stops it at once and waits for it (the done-event). Each event is
stamped with when it arrived, so accept counts as saved only the work it keeps
(`work_until`). A staged run (`dwell_s` given: followup/gating.py's Stage.STAGED) holds
once its first tool batch has ended, before the next model round — the answer's, its first
expensive point — and goes on when the user shows intent (`resume`), when it has been on
screen for `dwell_s` (not once `withdraw` said it left the screen), or ends there when
stopped; accepted while held it stops at once — no round starts after that, whatever wakes
the run — and the real turn goes on live from that batch (`finish_step` says OVER), so a
wrong guess costs one round and a right one the rounds after it. A batch whose outputs are
the answer (D1: no round reads them back) is not held.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence

from qshell.agent.events import (
    Event,
    PredictionStarted,
    RoundFinished,
    ToolFinished,
    TurnFailed,
    TurnFinished,
)
from qshell.agent.loop import run_turn
from qshell.agent.session import Session
from qshell.cancel import CancelToken
from qshell.config import DEFAULTS
from qshell.errors import Cancelled
from qshell.followup.gate import Boundary, SpeculativeRunner
from qshell.followup.kinds import OTHER
from qshell.followup.states import RunStep, SpeculationLimits, Stage, Status
from qshell.llm.messages import ToolCall
from qshell.overlay import Overlay
from qshell.tools.base import ErrorType

log = logging.getLogger(__name__)

ACCEPT_WAIT_S = 5.0  # how long accept waits for a cancelled round to stop before giving up


class Speculation:
    """One speculative run of `prompt` on a fork of `session`."""

    def __init__(
        self,
        session: Session,
        prompt: str,
        overlay: Overlay,
        *,
        model: str | None = None,
        limits: SpeculationLimits | None = None,
        clock: Callable[[], float] = time.monotonic,
        reads_only: bool = False,
        dwell_s: float | None = None,
        kind: str = OTHER,
    ) -> None:
        """`dwell_s`: staged — hold after the first batch until intent or this many
        seconds after the start; None runs the whole turn. `kind` is the suggestion's
        (followup/kinds.py), for the record."""
        self.prompt = prompt
        self.kind = kind
        self.overlay = overlay
        self.limits = limits = limits or SpeculationLimits.of(DEFAULTS.speculation)
        self.clock = clock
        self.base_length = len(session.history)
        self.fork = session.fork(model=model, max_turns=limits.max_rounds)
        self.runner = SpeculativeRunner(overlay, session.approval_mode, reads_only=reads_only)
        self.status = Status.RUNNING
        self.boundary: Boundary | None = None
        self.events: list[Event] = []
        self.times: list[float] = []  # when each event arrived (the clock's time)
        self.started_at = clock()
        self.completed_at: float | None = None
        self.done = threading.Event()
        self._cancel = CancelToken()
        self._stop_reason: Status | None = None
        self._aborted = False
        self._lock = threading.Lock()
        self._arrived = threading.Condition(self._lock)  # an event was added, or the run ended
        self._tools_left = 0  # calls of the last round still to finish (under _lock)
        self._batch: list[ToolCall] = []  # the calls of the last round (under _lock)
        self._finish: RunStep = RunStep.OVER  # accepted mid-step: stop once it ends (under _lock)
        self.accepted_at: float | None = None
        self.dwell_s = dwell_s
        self._go = threading.Event()  # a held run goes on (intent, dwell, or a stop)
        self._holding = False  # waiting at the stage point (under _lock)
        self._withdrawn = False  # its suggestion left the screen: no dwell (under _lock)
        self.resumed_by: str | None = None  # what let a staged run go on past its hold
        self.held_s = 0.0  # how long it waited there
        self._batch_started: float | None = None
        self.first_step_s: float | None = None  # how long its first tool batch took
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
                    self.times.append(self.clock())
                    round_over = self._track(event)
                    hold = self._at_stage_point(event)
                    self._arrived.notify_all()
                if round_over:  # the accepted turn took this round over; start nothing new
                    self._stop(Status.LIMIT)
                if hold:
                    self._hold()
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
        """Under the lock: count the calls the round just finished asks for; True when the
        round (or batch) an accept asked to finish ended."""
        if isinstance(event, RoundFinished):
            last = self.fork.history[-1] if self.fork.history else None
            calls = last.tool_calls if last is not None and last.role == "assistant" else []
            self._tools_left = len(calls)
            self._batch = list(calls)
            if calls and self._batch_started is None:
                self._batch_started = self.clock()
            return self._finish is RunStep.ROUND
        if isinstance(event, ToolFinished) and self._tools_left:
            self._tools_left -= 1
            return self._finish is RunStep.BATCH and not self._tools_left
        return False

    def _at_stage_point(self, event: Event) -> bool:
        """Under the lock, after `_track`: whether a staged run's first batch just ended
        and a model round follows it (the run then holds before that round); notes how
        long that batch took."""
        if not isinstance(event, ToolFinished) or self._tools_left or self.first_step_s is not None:
            return False
        self.first_step_s = self.clock() - (self._batch_started or self.started_at)
        if self.dwell_s is None or self._go.is_set() or not self._round_follows():
            return False
        self._holding = True
        return True

    def _round_follows(self) -> bool:
        """Under the lock, at the end of a batch: whether a model round reads its results
        back — not when every one says its output is the answer (latency/directives.py,
        D1: the turn ends there)."""
        last = max(
            (i for i, e in enumerate(self.events) if isinstance(e, RoundFinished)), default=0
        )
        results = [e.result for e in self.events[last:] if isinstance(e, ToolFinished)]
        tools = [self.fork.tools_by_name.get(call.name) for call in self._batch]
        if len(results) != len(tools):
            return True
        batch = list(zip(tools, results, strict=True))
        return self.fork.options.directives.skipped_answer(batch) is None

    def _hold(self) -> None:
        """Staged: wait at the stage point for intent, the dwell time (while its
        suggestion is on screen) or a stop; a stop that came meanwhile cancels the turn
        before the generator goes on, so no round starts."""
        held_at = self.clock()
        dwelt = False
        while not dwelt and not self._go.wait(self._dwell_left()):
            with self._lock:
                dwelt = not self._withdrawn
        with self._lock:
            self._holding = False
            self.held_s = self.clock() - held_at
            if dwelt and self.resumed_by is None:
                self.resumed_by = "dwell"
            stopped = self._stop_reason is not None
        if stopped:
            self._cancel.cancel()

    def _dwell_left(self) -> float | None:
        """How long a held run still waits for the dwell time; None once withdrawn."""
        with self._lock:
            if self._withdrawn:
                return None
        left = self.started_at + (self.dwell_s or 0.0) - self.clock()
        return min(max(0.0, left), threading.TIMEOUT_MAX)  # a longer wait cannot be asked for

    def withdraw(self) -> None:
        """Its suggestion left the screen (dismissed): a staged run no longer goes on by
        the dwell time, only at intent; it still ends when stopped (the wall clock's limit
        included). Never waits."""
        with self._lock:
            self._withdrawn = True

    def resume(self, why: str) -> None:
        """The user showed intent (`why`: "tab", "typed"…): a staged run goes on past its
        hold, or never holds. Never waits."""
        with self._lock:
            if self._go.is_set():
                return
            if self.dwell_s is not None and self.resumed_by is None and not self._ended:
                self.resumed_by = why
            self._go.set()

    @property
    def stage(self) -> Stage:
        return Stage.FULL if self.dwell_s is None else Stage.STAGED

    @property
    def holding(self) -> bool:
        """Held at its stage point, waiting for intent."""
        with self._lock:
            return self._holding

    def _stop(self, reason: Status) -> None:
        self._stop_reason = reason
        self._go.set()  # a held run wakes to end
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

    def finish_step(self) -> RunStep:
        """Accepted while running: let the model round in flight, or the tool batch it runs,
        run to its end and stop the run then, before anything new starts. Says which it
        is; OVER when the run has ended or not started (nothing changes), or is held at
        its stage point (it stops there now)."""
        with self._lock:
            self.accepted_at = self.clock()
            if not self._started or self._ended:
                return RunStep.OVER
            if not self._holding:
                self._finish = RunStep.BATCH if self._tools_left else RunStep.ROUND
                return self._finish
            # held between steps: the real turn goes on from here. Marked before the lock
            # goes, so a hold ending now (dwell, intent) cancels before any round starts
            self._stop_reason = Status.LIMIT
            self._go.set()
        self._cancel.cancel()
        return RunStep.OVER

    def running_calls(self) -> list[ToolCall]:
        """The calls of the batch it runs (the last round's, when it is in one)."""
        with self._lock:
            return list(self._batch) if self._tools_left else []

    def calls(self) -> list[ToolCall]:
        """Every tool call its history asks for so far, the batch it runs included."""
        return [c for m in self.fork.history[self.base_length :] for c in m.tool_calls]

    def work_until(self) -> float:
        """When the last piece of work that stands was done: the end of its last model
        round or of its last call not cancelled (a cut command saved nothing); its start
        when there is none."""
        with self._lock:
            ends = [
                at
                for event, at in zip(self.events, self.times, strict=True)
                if isinstance(event, RoundFinished | TurnFinished)
                or (isinstance(event, ToolFinished) and not _cancelled(event))
            ]
        return max(ends, default=self.started_at)

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


def _cancelled(event: ToolFinished) -> bool:
    error = event.result.error
    return error is not None and error.type is ErrorType.CANCELLED


def _run_all(callbacks: Sequence[Callable[[], None]]) -> None:
    for callback in callbacks:
        try:
            callback()
        except Exception:
            log.exception("speculation callback failed")
