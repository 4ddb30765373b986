"""Accepting a speculation asks exactly where a live turn in the same mode would have asked:
the live runner is asked of each call whose result stands (followup/consent.py,
`MainToolRunner.would_ask`). A speculated `rm notes.txt` asks in auto-edit mode as in
default mode, the file staying until `apply`; the question lists the deletion and names
the protected paths a change takes away; an edit in auto-edit mode, a proven read-only
command and yolo mode ask nothing. Driven through the Speculator's prepared turn as the
REPL runs it, on a real kernel overlay.

Skipped with the probe's reason where a user-namespace overlay cannot be mounted.
"""

from __future__ import annotations

import json

import pytest

from qshell.agent.events import (
    ApplyChoice,
    ApplyRequested,
    ChangeKind,
    Event,
    FileChange,
    SpeculationAccepted,
)
from qshell.config import ApprovalMode, Settings
from qshell.followup import consent
from qshell.followup.speculation import Speculation
from qshell.followup.speculator import Speculator
from qshell.followup.states import Status
from qshell.llm.messages import Message
from qshell.overlay import Overlay
from qshell.sandbox import probe
from qshell.telemetry import Telemetry
from qshell.tools.shell import ShellTool
from tests.agent.scripted import call
from tests.followup.test_consent import accepted_turn, of_type
from tests.followup.test_overlay_run import Run, project, speculate

FOUND = probe()
pytestmark = pytest.mark.skipif(not FOUND.overlay, reason=FOUND.reason or "no overlay sandbox")
FILES = {"notes.txt": "remember\n", "keep.txt": "k\n"}


@pytest.mark.parametrize("mode", [ApprovalMode.AUTO_EDIT, ApprovalMode.DEFAULT])
def test_a_speculated_rm_asks_on_accept_and_the_file_stays_until_apply(tmp_path, mode):
    setup = project(tmp_path, FILES)
    run = speculate(setup, ["rm notes.txt"], mode=mode)
    assert run.spec.status is Status.COMPLETED, run.spec.boundary
    seen_at_question: list[bool] = []

    def answer(event: ApplyRequested) -> None:
        seen_at_question.append((run.root / "notes.txt").exists())
        event.future.set_result(ApplyChoice.APPLY)

    events = turn(run, answer)
    question = events[0]
    assert isinstance(question, ApplyRequested), events[:3]
    assert question.commands == ("rm notes.txt",)
    assert question.changes == (FileChange("notes.txt", ChangeKind.DELETED),)
    assert seen_at_question == [True]  # nothing applied before the answer
    assert of_type(events, SpeculationAccepted)
    assert not (run.root / "notes.txt").exists()


def test_discarding_the_auto_edit_question_keeps_the_file(tmp_path):
    setup = project(tmp_path, FILES)
    run = speculate(setup, ["rm notes.txt"], mode=ApprovalMode.AUTO_EDIT)
    events = accepted_turn(run, ApplyChoice.DISCARD)
    assert isinstance(events[0], ApplyRequested)
    assert not of_type(events, SpeculationAccepted)
    assert (run.root / "notes.txt").read_text() == "remember\n"


def test_an_always_for_shell_covers_auto_edit_mode_too(tmp_path):
    setup = project(tmp_path, FILES)
    run = speculate(setup, ["rm notes.txt"], mode=ApprovalMode.AUTO_EDIT)
    run.setup.conversation.runner.allow_always(ShellTool())
    events = accepted_turn(run, ApplyChoice.DISCARD)
    assert not of_type(events, ApplyRequested)
    assert not (run.root / "notes.txt").exists()


def test_an_edit_in_auto_edit_mode_asks_nothing(tmp_path):
    setup = project(tmp_path, FILES)
    setup.conversation.set_approval_mode(ApprovalMode.AUTO_EDIT)
    session = setup.conversation.session
    overlay = Overlay.create(setup.root, session.tool_context.paths, base_dir=tmp_path / "base")
    args = json.dumps({"path": "new.txt", "content": "fresh\n"})
    setup.script(Message.assistant("", [call("write_file", args, "w0")]))
    setup.script(Message.assistant("all done"))
    spec = Speculation(session, "do it", overlay)
    spec.run()
    assert spec.status is Status.COMPLETED, spec.boundary
    events = accepted_turn(Run(setup, spec, overlay), ApplyChoice.DISCARD)
    assert not of_type(events, ApplyRequested)
    assert (setup.root / "new.txt").read_text() == "fresh\n"


def test_a_deletion_that_takes_a_protected_path_away_is_left_to_the_live_turn(tmp_path):
    """Deleting a directory that holds a protected path stops the speculation there: nothing
    of the command is taken in, so no accept can apply it, and the live turn asks."""
    files = {"pkg/mod.py": "x = 1\n", "pkg/.husky/pre-commit": "lint\n", **FILES}
    setup = project(tmp_path, files)
    run = speculate(setup, ["rm -rf pkg"], mode=ApprovalMode.AUTO_EDIT)
    assert run.spec.status is Status.BOUNDARY
    paths = run.setup.conversation.session.tool_context.paths
    assert consent.changes(run.overlay, paths) == ()
    assert (run.root / "pkg" / ".husky" / "pre-commit").read_text() == "lint\n"


def test_yolo_never_asks_even_about_protected_paths(tmp_path):
    files = {"pkg/.husky/pre-commit": "lint\n", **FILES}
    setup = project(tmp_path, files)
    run = speculate(setup, ["rm -rf pkg"], mode=ApprovalMode.YOLO)
    runner = run.setup.conversation.runner
    runner.mode = ApprovalMode.YOLO
    ctx = run.setup.conversation.session.tool_context
    assert consent.question(run.spec, runner, ctx) is None


def test_in_plan_mode_even_a_read_only_command_is_left_to_the_live_turn(tmp_path):
    """A live plan-mode turn runs no shell command at all: the speculation stops there, and
    the accept continues live, where plan mode refuses it."""
    setup = project(tmp_path, FILES)
    run = speculate(setup, ["cat notes.txt"], mode=ApprovalMode.PLAN)
    assert run.spec.status is Status.BOUNDARY
    assert run.spec.runner.kept == []


def turn(run: Run, answer) -> list[Event]:
    """The prepared turn as the REPL drives it; `answer` resolves an apply question."""
    telemetry = Telemetry(run.root.parent / "events.jsonl")
    speculator = Speculator(
        run.setup.conversation, Settings(), submit_task=lambda f: f(), telemetry=telemetry
    )
    seen: list[Event] = []
    for event in run.setup.conversation.run_prepared(speculator.prepared_turn(run.spec)):
        seen.append(event)
        if isinstance(event, ApplyRequested):
            answer(event)
    return seen
