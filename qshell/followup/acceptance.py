"""Accepting a speculation: its run becomes the real turn for the prompt it predicted.

`accept` stops the run, plans what to keep (the speculated messages up to the last complete
round, the calls of a batch it stopped in, the events to replay), applies the overlay
all-or-nothing, lets the session adopt the messages, their usage and the files they read,
and returns an `Acceptance`: accepted, conflict or failed, with the events of the real turn
— the replay, then a live continuation when the run stopped early, so nothing already
executed runs twice. `take_over` shows a run accepted mid-round (or mid-batch) as it arrives
instead of cutting that round or command. It must not run a speculation or decide what one may do (speculation.py
and the gate do), and it fails open: whatever breaks before the messages joined the history
leaves the prompt to run as a normal turn. Called from the front-end's side (the thread
that runs the real turn), never the speculation's own thread; `accept` waits for the run
to stop before it reads the run's history.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable, Generator, Iterator, Sequence
from dataclasses import dataclass, replace

from qshell.agent.events import (
    Event,
    FailureKind,
    Notice,
    SpeculationAccepted,
    ToolFinished,
    ToolStarted,
    TurnFailed,
    TurnFinished,
)
from qshell.agent.loop import PendingCalls, run_turn
from qshell.agent.session import Session, check_history
from qshell.cancel import CancelToken
from qshell.followup.speculation import Speculation
from qshell.followup.states import RunStep, SpeculationOutcome, Status
from qshell.latency.router import Router
from qshell.llm.messages import Message
from qshell.overlay import ApplyCancelled, ApplyConflict
from qshell.permissions.runner import ToolRunner
from qshell.tools.base import ErrorType

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Acceptance:
    """What `accept` came to, and the events of the real turn for the prompt (to render as
    a live turn's). `saved_s` is the time saved when accepted; `detail` says why not;
    `commands` lists the commands the speculation ran on a kernel overlay (gate.py)."""

    outcome: SpeculationOutcome
    events: Iterator[Event]
    saved_s: float = 0.0
    detail: str = ""
    commands: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class _Injection:
    messages: list[Message]
    pending: PendingCalls | None
    replay: Sequence[Event]


def take_over(
    spec: Speculation, step: RunStep, cancel: CancelToken, *, show: bool = True
) -> Generator[Event, None, int]:
    """Accepted while the run is in a `step` (`Speculation.finish_step`): let it end — the
    model round in flight, or the tool batch it runs, so a command is finished rather than
    cut and run again — and the run stop before it starts anything new. With `show`, yield
    the run's events so far and that step's as they arrive; returns how many it showed,
    which `accept` does not replay. A batch gets a notice first, that the prepared command
    is being finished. The turn's end is left to the caller; nothing is shown when the run
    is over. The user's cancel cuts the step (the caller then drops the speculation)."""
    if step is RunStep.OVER:
        return 0
    shown = 0
    unregister = cancel.on_cancel(spec.cut)
    try:
        if step is RunStep.BATCH:  # first: a line between a call and its result splits them
            yield _finishing(spec)
        for event in spec.follow():
            if isinstance(event, TurnFinished | TurnFailed):
                break  # the end, and nothing after it, is accept's to tell
            if show:
                shown += 1
                yield event
    finally:
        unregister()
    return shown


LARGE_APPLY = 500  # files: from here on, accept says it is applying before it does
APPLYING = "applying {count} files of the prepared answer (Ctrl-C cancels: nothing changes)"
FINISHING = "finishing the prepared command before using it (Ctrl-C drops the prepared answer)"


def _finishing(spec: Speculation) -> Notice:
    """`finishing the prepared command: $ make …`, naming the command the batch runs."""
    commands = []
    for call in spec.running_calls():
        try:
            command = call.parsed_arguments().get("command")
        except ValueError:
            command = None
        commands.append(f"$ {command}" if isinstance(command, str) else call.name)
    named = "; ".join(commands)
    return Notice(f"{FINISHING}: {named}" if named else FINISHING)


def _plan(spec: Speculation, shown: int) -> _Injection:
    """Which speculated messages to keep, which calls to resume, which events to replay
    (those after the first `shown`, which `take_over` showed). Results and events go by
    the call's key, (response, id): a server may number the calls `call_0` in every
    response, so an id alone names a call of every round."""
    new = list(spec.fork.history[spec.base_length :])
    if spec.status is Status.COMPLETED:
        return _Injection(new, None, spec.events[shown:])
    known = {
        e.key: e.result
        for e in spec.events
        if isinstance(e, ToolFinished)
        and not (e.result.error is not None and e.result.error.type is ErrorType.CANCELLED)
    }
    # the last assistant message with calls decides where the real turn takes over
    while new and new[-1].role == "user" and new[-1].tool_results:
        asked = spec.base_length + len(new) - 2  # the fork's index of the calls' message
        if all((asked, r.tool_call_id) in known for r in new[-1].tool_results):
            break
        new.pop()  # results include cancelled ones: re-answer that batch
    pending = None
    if new and new[-1].role == "assistant" and new[-1].tool_calls:
        # the whole batch goes on live: the calls that ran are not run again, the others
        # (the boundary call first among them) are decided and asked about as usual
        calls, asked = new[-1].tool_calls, spec.base_length + len(new) - 1
        ran = {c.id: known[asked, c.id] for c in calls if (asked, c.id) in known}
        pending = PendingCalls(calls, ran)
    kept = {(spec.base_length + i, c.id) for i, m in enumerate(new) for c in m.tool_calls}
    if pending is not None:  # a call the continuation runs again shows once, live
        kept -= {(asked, c.id) for c in pending.calls if c.id not in pending.known}
    replay = [
        e
        for e in spec.events[shown:]
        if not isinstance(e, TurnFailed | TurnFinished)
        and not (isinstance(e, ToolStarted | ToolFinished) and e.key not in kept)
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
    progress: Callable[[int, int], None] | None = None,
) -> Acceptance:
    """Turn `spec` into the real turn for its prompt: apply its overlay, let `session` adopt
    its messages, and return the events to render (replay of all but the `shown` ones that
    `take_over` showed, then a live continuation when it stopped early). Fails open: when
    the speculation is unusable, conflicts with the tree or anything breaks before its
    messages joined the history, the events are a normal turn (after a notice, when some
    of the speculation was shown). `on_apply` gets the files about to be written (for /undo
    checkpoints); `progress(done, total)` follows the apply (applying.py). A turn run live
    runs with `router` (the conversation's)."""
    spec.stop_for_accept()
    accepted_at = spec.accepted_at or spec.clock()
    injection = _plan(spec, shown) if spec.usable else None
    if injection is None or not injection.messages:
        spec.release()  # a run that did not stop in time drops its overlay when it does
        why = f"the speculation ended {spec.status}" if injection is None else "nothing to keep"
        return Acceptance(
            SpeculationOutcome.FAILED,
            _afresh(spec, session, runner, cancel, shown, router),
            detail=why,
        )
    try:
        candidate = [*session.history, *injection.messages]
        problems = check_history(candidate if injection.pending is None else candidate[:-1])
        if problems:
            raise ValueError(f"speculated history does not pair up: {problems}")
        written = list(spec.overlay.written)
        resolver = spec.overlay.resolver  # a removal takes the protected paths below it
        protected = [p for rel in written for p in resolver.protected_within(resolver.root / rel)]
        if protected:  # the gate never lets one in; an accept never writes one either
            raise ValueError(f"the speculation wrote protected files: {', '.join(protected)}")
        if on_apply is not None:
            on_apply(written)
        spec.overlay.apply(progress=progress, cancelled=lambda: cancel.cancelled)
    except ApplyCancelled as stopped:  # Ctrl-C before the commit point: nothing changed
        spec.overlay.discard()
        cut = TurnFailed(FailureKind.CANCELLED, "cancelled: nothing of the prepared answer applied")
        return Acceptance(SpeculationOutcome.DISCARDED, iter([cut]), detail=str(stopped))
    except ApplyConflict as conflict:
        spec.overlay.discard()
        notice = Notice(f"the prepared answer was not used: {conflict}; running it now")
        turn = run_turn(session, spec.prompt, runner, cancel, router=router)
        return Acceptance(
            SpeculationOutcome.CONFLICT, itertools.chain([notice], turn), detail=str(conflict)
        )
    except Exception as exc:
        log.exception("applying the speculation failed; running the prompt normally")
        spec.overlay.discard()
        turn = _afresh(spec, session, runner, cancel, shown, router)
        return Acceptance(SpeculationOutcome.FAILED, turn, detail=str(exc))
    session.tool_context.reads.adopt(spec.overlay.view)  # what it read is the session's now
    spec.overlay.discard()
    # what was saved is the work kept, done before the user asked for it: not the time of a
    # command cut and run again live, nor the time accept waited for one to finish
    saved = max(0.0, min(accepted_at, spec.work_until()) - spec.started_at)
    session.adopt(spec.fork, injection.messages, saved_s=saved)
    accepted = SpeculationAccepted(
        saved_s=saved, files=tuple(written), completed=spec.status is Status.COMPLETED
    )
    events = _accepted_turn(injection, accepted, session, runner, cancel, spec.fork, router)
    commands = tuple(spec.runner.overlay_commands)
    return Acceptance(SpeculationOutcome.ACCEPTED, events, saved_s=saved, commands=commands)


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
