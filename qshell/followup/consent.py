"""What accepting a speculation asks first when its commands were never agreed to.

In `default` mode the user who presses Enter on a suggestion accepts a prompt, not the
commands its speculation ran on a kernel overlay (gate.py, overlay_run.py). When the main
runner would have asked about such commands (`MainToolRunner.asks_about_commands`) and
some of their results stand (`SpeculativeRunner.overlay_commands`), the accepted turn
first yields one `ApplyRequested` listing those commands and the files applying would
change, before anything of the speculation is shown or written. `apply` goes on with
`accept` as in `auto-edit` mode; `re-run for real` drops the speculation and runs the
prompt as a normal turn (each command asked about as usual); `discard` drops it and runs
nothing, so the prompt never joins the history. Generators run on the turn's worker thread,
which blocks on the question's future; the user's cancel resolves it as cancelled.
"""

from __future__ import annotations

import os
from collections.abc import Generator, Iterator
from concurrent.futures import CancelledError, Future

from qshell.agent.events import (
    ApplyChoice,
    ApplyRequested,
    ChangeKind,
    Event,
    FailureKind,
    FileChange,
    Notice,
    TurnFailed,
)
from qshell.agent.loop import run_turn
from qshell.agent.session import Session
from qshell.cancel import CancelToken
from qshell.followup.speculation import Speculation, SpeculationOutcome
from qshell.latency.router import Router
from qshell.overlay import Overlay
from qshell.permissions.runner import MainToolRunner

RERUN_NOTICE = "the prepared answer was dropped; running the prompt for real (commands ask first)"
UNSETTLED_NOTICE = "the prepared answer was still running a command; running the prompt now"
DISCARD_NOTICE = "discarded the prepared answer: nothing was applied and the prompt did not run"


def wanted(spec: Speculation, runner: MainToolRunner) -> bool:
    """Whether accepting `spec` may have to ask first: it started commands on its overlay
    that the main runner would have asked about. Whether it must is known only once the
    run is over (`settled`): a command still being taken in may yet stand."""
    return bool(spec.runner.overlay_started) and runner.asks_about_commands()


def settled(spec: Speculation) -> bool:
    """The run is over, so the commands whose results stand, and the overlay the question
    describes, can no longer change before accept applies them."""
    return spec.done.is_set()


def changes(overlay: Overlay) -> tuple[FileChange, ...]:
    """What applying `overlay` would do to the project, path by path: each file written or
    deleted, and each directory it makes that no listed path lies in (`dir/`, the deepest
    of a new chain)."""
    removed = set(overlay.removed)
    found = []
    for rel in overlay.written:
        original = overlay.original(rel)
        if original is not None:
            kind = ChangeKind.CHANGED if original.existed or rel in removed else ChangeKind.CREATED
        else:
            kind = ChangeKind.DELETED
        found.append(FileChange(rel, kind))
    listed = [c.path for c in found]
    for rel in reversed(overlay.directories):
        if os.path.lexists(overlay.root / rel) and rel not in removed:
            continue  # already there
        if not any(p == rel or p.startswith(f"{rel}/") for p in listed):
            found.append(FileChange(f"{rel}/", ChangeKind.CREATED))
            listed.append(rel)
    return tuple(sorted(found, key=lambda c: c.path))


def ask(spec: Speculation, cancel: CancelToken) -> Generator[Event, None, ApplyChoice | None]:
    """Yield the question for the settled `spec` and wait for the answer; None when the
    user cancelled the turn instead."""
    assert settled(spec), "a question about a run still going could list less than it applies"
    future: Future[ApplyChoice] = Future()

    def cancel_question() -> None:
        future.cancel()

    unregister = cancel.on_cancel(cancel_question)
    try:
        commands = tuple(spec.runner.overlay_commands)
        yield ApplyRequested(spec.prompt, commands, changes(spec.overlay), future)
        return future.result()
    except CancelledError:
        return None
    finally:
        unregister()


def declined_outcome(choice: ApplyChoice | None) -> SpeculationOutcome:
    """The telemetry outcome of an accept whose question was not answered `apply`."""
    return SpeculationOutcome.RERUN if choice is ApplyChoice.RERUN else SpeculationOutcome.DISCARDED


def declined(
    spec: Speculation,
    choice: ApplyChoice | None,
    session: Session,
    runner: MainToolRunner,
    cancel: CancelToken,
    router: Router | None = None,
) -> Iterator[Event]:
    """The turn after anything but `apply`: the speculation's overlay is dropped unapplied;
    `rerun` then runs the prompt live (with the conversation's `router`), `discard` (or a
    cancel) runs nothing."""
    spec.release()
    if choice is ApplyChoice.RERUN:
        yield Notice(RERUN_NOTICE if settled(spec) else UNSETTLED_NOTICE)
        yield from run_turn(session, spec.prompt, runner, cancel, router=router)
    elif choice is None:
        yield TurnFailed(FailureKind.CANCELLED, "cancelled")
    else:
        yield Notice(DISCARD_NOTICE)
