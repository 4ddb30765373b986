"""What accepting a speculation asks first: what a live turn in the same mode would have asked.

The user who presses Enter on a suggestion accepts a prompt, not the calls its speculation
made. What the speculation did is applied without a question only where the same calls,
made live now, would have run without one: the live runner is asked of each call whose
result stands (`MainToolRunner.would_ask`: proven read-only commands, edits in auto-edit,
an "always" the user gave for that tool run unasked; a command on a kernel overlay asks in
default and auto-edit mode, never in yolo), and of each protected path a change touches
(`would_ask_writing`). When any would have asked, the accepted turn first yields one
`ApplyRequested` listing those calls and the files applying would change — deletions and
protected paths (`PathResolver.protected_within`) called out — before anything of the
speculation is shown or written. `apply` goes on with `accept`; `re-run for real` drops the
speculation and runs the prompt as a normal turn (each call asked about as usual);
`discard` drops it and runs nothing, so the prompt never joins the history. Generators run
on the turn's worker thread, which blocks on the question's future; the user's cancel
resolves it as cancelled.
"""

from __future__ import annotations

import json
import os
from collections.abc import Generator, Iterable, Iterator
from concurrent.futures import CancelledError, Future
from dataclasses import dataclass, replace

from qshell.agent.calls import prepare
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
from qshell.followup.gate import SpeculatedCall
from qshell.followup.overlay_run import IGNORED_PARTS
from qshell.followup.speculation import Speculation
from qshell.followup.states import SpeculationOutcome
from qshell.latency.router import Router
from qshell.overlay import Overlay
from qshell.overlay.records import DirMode
from qshell.permissions.runner import MainToolRunner
from qshell.tools.base import Kind, ToolContext
from qshell.tools.paths import PathResolver

RERUN_NOTICE = "the prepared answer was dropped; running the prompt for real (commands ask first)"
UNSETTLED_NOTICE = "the prepared answer was still running a command; running the prompt now"
DISCARD_NOTICE = "discarded the prepared answer: nothing was applied and the prompt did not run"


@dataclass(frozen=True, slots=True)
class Question:
    """What the apply question lists: the calls a live turn would have asked about (shell
    commands whole, other calls as `tool {args}`) and every change applying would make."""

    commands: tuple[str, ...]
    calls: tuple[str, ...]
    changes: tuple[FileChange, ...]


def _asks(
    runner: MainToolRunner, ctx: ToolContext, calls: Iterable[SpeculatedCall]
) -> list[SpeculatedCall]:
    """The calls among `calls` that, made live now, would not run without a question."""
    return [c for c in calls if runner.would_ask(c.tool, c.args, ctx) is not None]


def may_ask(spec: Speculation, runner: MainToolRunner, ctx: ToolContext) -> bool:
    """Before the run has settled: whether accepting `spec` may have to ask, so nothing of it
    may be shown yet — a call it started, or one its history asks for (the batch it is
    running), would be asked about live."""
    started = list(spec.runner.started)
    for call in spec.calls():
        prepared = prepare(spec.fork, call)
        if prepared.tool is not None and prepared.args is not None:
            started.append(SpeculatedCall(prepared.tool, prepared.args))
    return bool(_asks(runner, ctx, started))


def question(spec: Speculation, runner: MainToolRunner, ctx: ToolContext) -> Question | None:
    """What accepting the settled `spec` must ask, or None when every call whose result
    stands, and every protected path its changes touch, would have gone unasked live; also
    None when the overlay can no longer be applied (accept then says why and runs the
    prompt live, which asks what a live turn asks), since it would list what never lands."""
    assert settled(spec), "a question about a run still going could list less than it applies"
    if spec.overlay.spoiled is not None:
        return None
    asked = _asks(runner, ctx, spec.runner.kept)
    found = changes(spec.overlay, ctx.paths)
    guarded = [
        path
        for change in found
        for path in change.protected
        if runner.would_ask_writing(_kind(change), ctx.root / path, ctx) is not None
    ]
    if not asked and not guarded:
        return None
    commands = tuple(command for c in asked if (command := _command(c)) is not None)
    calls = tuple(_label(c) for c in asked if _command(c) is None)
    return Question(commands, calls, found)


def _command(call: SpeculatedCall) -> str | None:
    command = getattr(call.args, "command", None)
    return command if call.tool.kind is Kind.EXECUTE and isinstance(command, str) else None


def _kind(change: FileChange) -> Kind:
    return Kind.DELETE if change.kind is ChangeKind.DELETED else Kind.EDIT


def _label(call: SpeculatedCall) -> str:
    dump = getattr(call.args, "model_dump", None)
    args = dump(mode="json") if callable(dump) else {}
    return f"{call.tool.name} {json.dumps(args, ensure_ascii=False)}"


def settled(spec: Speculation) -> bool:
    """The run is over, so the calls whose results stand, and the overlay the question
    describes, can no longer change before accept applies them."""
    return spec.done.is_set()


def changes(overlay: Overlay, paths: PathResolver | None = None) -> tuple[FileChange, ...]:
    """What applying `overlay` would do to the project, path by path: each file written or
    deleted, each directory it makes that no listed path lies in (`dir/`, the deepest of a
    new chain) and each existing directory whose mode or attrs (xattrs, ACLs) it changes;
    with `paths`, each names the protected paths at or below it."""
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
    found += [FileChange(f"{m.rel}/", _dir_kind(m)) for m in overlay.mode_changes()]
    found = [_marked(c, overlay, paths) for c in found]
    return tuple(sorted(found, key=lambda c: c.path))


def _dir_kind(step: DirMode) -> ChangeKind:
    """How the question names an existing directory's change: its permissions, its xattrs
    or ACLs ("attributes"), or both."""
    if step.attrs is None:
        return ChangeKind.MODE
    return ChangeKind.ATTRS if step.mode == step.before else ChangeKind.MODE_ATTRS


def _marked(change: FileChange, overlay: Overlay, paths: PathResolver | None) -> FileChange:
    """`change` with the protected paths at or below it (given `paths`), and whether it
    lies in a build cache."""
    rel = change.path.rstrip("/")
    protected = () if paths is None else tuple(paths.protected_within(overlay.root / rel))
    cache = next((part for part in rel.split("/") if part in IGNORED_PARTS), "")
    return replace(change, protected=protected, cache=cache)


def choose(
    spec: Speculation,
    runner: MainToolRunner,
    ctx: ToolContext,
    cancel: CancelToken,
    *,
    quiet: bool,
) -> Generator[Event, None, ApplyChoice | None]:
    """The accept's choice once `take_over` let the run finish its step (`quiet`: nothing
    was shown, as `may_ask` said a question might come): None when the user cancelled
    (meanwhile, or at the question) — the speculation is dropped and nothing runs; RERUN
    when the run did not stop in time and a question might have been due; APPLY when a
    live turn would have asked nothing; else the user's answer to the question."""
    if cancel.cancelled:
        return None
    spec.stop_for_accept()
    if not settled(spec):  # whether its calls stand is not known yet: never apply unasked
        return ApplyChoice.RERUN if quiet else ApplyChoice.APPLY
    asked = question(spec, runner, ctx)
    if asked is None:
        return ApplyChoice.APPLY
    return (yield from ask(spec, asked, cancel))


def ask(
    spec: Speculation, asked: Question, cancel: CancelToken
) -> Generator[Event, None, ApplyChoice | None]:
    """Yield the question for the settled `spec` and wait for the answer; None when the
    user cancelled the turn instead."""
    future: Future[ApplyChoice] = Future()

    def cancel_question() -> None:
        future.cancel()

    unregister = cancel.on_cancel(cancel_question)
    try:
        yield ApplyRequested(spec.prompt, asked.commands, asked.changes, future, asked.calls)
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
