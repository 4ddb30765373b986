"""Accepting, in default mode, a speculation that ran commands nobody agreed to: the accepted
turn asks first (apply / re-run for real / discard), before anything of it is shown or
written, and each answer does what it says. Driven through the Speculator's prepared turn
as the REPL runs it (Conversation.run_prepared), on a real kernel overlay.

Skipped with the probe's reason where a user-namespace overlay cannot be mounted.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterable

import pytest

from qshell.agent.events import (
    ApplyChoice,
    ApplyRequested,
    ChangeKind,
    Event,
    FailureKind,
    FileChange,
    Notice,
    PermissionAnswer,
    PermissionReply,
    PermissionRequested,
    SpeculationAccepted,
    TextDelta,
    ToolStarted,
    TurnFailed,
    TurnFinished,
)
from qshell.config import ApprovalMode, Settings
from qshell.followup import overlay_run
from qshell.followup.acceptance import FINISHING
from qshell.followup.consent import DISCARD_NOTICE, RERUN_NOTICE
from qshell.followup.speculation import Speculation
from qshell.followup.speculator import Speculator
from qshell.followup.states import Status
from qshell.llm.messages import Message
from qshell.overlay import Overlay
from qshell.sandbox import probe
from qshell.telemetry import Telemetry
from qshell.tools.shell import ShellTool
from tests.agent.scripted import call
from tests.followup.test_overlay_run import Run, project, speculate
from tests.followup.test_speculation_properties import tree
from tests.waiting import wait_until

FOUND = probe()
pytestmark = pytest.mark.skipif(not FOUND.overlay, reason=FOUND.reason or "no overlay sandbox")
COMMAND = "rm a.txt && echo new > b.txt && echo more >> c.txt"
FILES = {"a.txt": "a\n", "c.txt": "c\n", "keep.txt": "k\n"}


def accepted_turn(run: Run, choice: ApplyChoice | None) -> list[Event]:
    """The prepared turn as the REPL drives it; an apply question gets `choice` (None: the
    user cancels instead), a permission question is allowed once."""
    telemetry = Telemetry(run.root.parent / "events.jsonl")
    speculator = Speculator(
        run.setup.conversation, Settings(), submit_task=lambda f: f(), telemetry=telemetry
    )
    conversation = run.setup.conversation
    seen: list[Event] = []
    for event in conversation.run_prepared(speculator.prepared_turn(run.spec)):
        seen.append(event)
        if isinstance(event, ApplyRequested):
            if choice is None:
                conversation.cancel()
            else:
                event.future.set_result(choice)
        if isinstance(event, PermissionRequested):
            event.future.set_result(PermissionReply(PermissionAnswer.ALLOW_ONCE))
    return seen


def of_type(events: Iterable[Event], kind: type) -> list:
    return [e for e in events if isinstance(e, kind)]


def default_run(tmp_path) -> Run:
    setup = project(tmp_path, FILES)
    run = speculate(setup, [COMMAND], mode=ApprovalMode.DEFAULT)
    assert run.spec.status is Status.COMPLETED, run.spec.boundary
    return run


def test_in_default_mode_the_question_comes_first_and_apply_lands_the_changes(tmp_path):
    run = default_run(tmp_path)
    assert (run.root / "a.txt").exists()  # the speculation changed nothing real
    requests = len(run.setup.provider.requests)
    events = accepted_turn(run, ApplyChoice.APPLY)
    question = events[0]
    assert isinstance(question, ApplyRequested), events[:3]
    assert question.commands == (COMMAND,)
    assert question.changes == (
        FileChange("a.txt", ChangeKind.DELETED),
        FileChange("b.txt", ChangeKind.CREATED),
        FileChange("c.txt", ChangeKind.CHANGED),
    )
    assert of_type(events, SpeculationAccepted)
    assert isinstance(events[-1], TurnFinished) and events[-1].text == "all done"
    assert not (run.root / "a.txt").exists()
    assert (run.root / "b.txt").read_text() == "new\n"
    assert (run.root / "c.txt").read_text() == "c\nmore\n"
    assert len(run.setup.provider.requests) == requests  # the prepared answer, no new request
    history = run.setup.conversation.session.history
    assert [m.text for m in history if m.role == "user" and m.text] == ["do it"]


def test_nothing_is_written_while_the_question_waits(tmp_path):
    run = default_run(tmp_path)
    before = tree(run.root)
    asked = threading.Event()
    answer = threading.Event()
    trees = []

    def turn() -> None:
        telemetry = Telemetry(run.root.parent / "events.jsonl")
        speculator = Speculator(
            run.setup.conversation, Settings(), submit_task=lambda f: f(), telemetry=telemetry
        )
        for event in run.setup.conversation.run_prepared(speculator.prepared_turn(run.spec)):
            if isinstance(event, ApplyRequested):
                asked.set()
                answer.wait(10)
                trees.append(tree(run.root))
                event.future.set_result(ApplyChoice.APPLY)

    worker = threading.Thread(target=turn)
    worker.start()
    assert asked.wait(10)
    assert tree(run.root) == before
    answer.set()
    worker.join(10)
    assert trees == [before]
    assert not (run.root / "a.txt").exists()


def test_re_run_for_real_drops_the_overlay_and_asks_about_the_command(tmp_path):
    run = default_run(tmp_path)
    before = tree(run.root)
    args = json.dumps({"command": "echo real > real.txt"})
    run.setup.script(Message.assistant("", [call("shell", args, "r1")]), Message.assistant("ran"))
    events = accepted_turn(run, ApplyChoice.RERUN)
    assert isinstance(events[0], ApplyRequested)
    assert Notice(RERUN_NOTICE) in events
    assert not of_type(events, SpeculationAccepted)
    asked = of_type(events, PermissionRequested)
    assert [q.args["command"] for q in asked] == ["echo real > real.txt"]
    assert isinstance(events[-1], TurnFinished) and events[-1].text == "ran"
    after = tree(run.root)
    assert (run.root / "real.txt").read_text() == "real\n"
    del after["real.txt"]
    assert after == before  # nothing of the speculation was applied
    assert not run.overlay.directory.exists()


def test_discard_changes_nothing_runs_nothing_and_keeps_the_prompt_out_of_history(tmp_path):
    run = default_run(tmp_path)
    before = tree(run.root)
    history = list(run.setup.conversation.session.history)
    requests = len(run.setup.provider.requests)
    events = accepted_turn(run, ApplyChoice.DISCARD)
    assert isinstance(events[0], ApplyRequested)
    assert events[1:] == [Notice(DISCARD_NOTICE)]
    assert tree(run.root) == before
    assert run.setup.conversation.session.history == history
    assert len(run.setup.provider.requests) == requests
    assert not run.overlay.directory.exists()


def test_cancelling_at_the_question_applies_nothing(tmp_path):
    run = default_run(tmp_path)
    before = tree(run.root)
    events = accepted_turn(run, None)
    assert isinstance(events[0], ApplyRequested)
    assert isinstance(events[-1], TurnFailed) and events[-1].kind is FailureKind.CANCELLED
    assert tree(run.root) == before
    assert not run.overlay.directory.exists()


def test_yolo_mode_applies_without_asking(tmp_path):
    setup = project(tmp_path, FILES)
    run = speculate(setup, [COMMAND], mode=ApprovalMode.YOLO)
    events = accepted_turn(run, ApplyChoice.DISCARD)
    assert not of_type(events, ApplyRequested)
    assert of_type(events, SpeculationAccepted)
    assert (run.root / "b.txt").read_text() == "new\n"


def test_shell_commands_allowed_for_the_session_need_no_question(tmp_path):
    run = default_run(tmp_path)
    run.setup.conversation.runner.allow_always(ShellTool())
    events = accepted_turn(run, ApplyChoice.DISCARD)
    assert not of_type(events, ApplyRequested)
    assert (run.root / "b.txt").read_text() == "new\n"


def test_a_proven_read_only_command_alone_asks_nothing(tmp_path):
    setup = project(tmp_path, FILES)
    run = speculate(setup, ["cat a.txt"], mode=ApprovalMode.DEFAULT)
    assert run.spec.runner.overlay_commands == []
    events = accepted_turn(run, ApplyChoice.DISCARD)
    assert not of_type(events, ApplyRequested)
    assert of_type(events, TextDelta) or of_type(events, ToolStarted)


def test_in_plan_mode_a_writing_command_is_still_a_boundary(tmp_path):
    setup = project(tmp_path, {"a.txt": "a\n"})
    run = speculate(setup, ["rm a.txt"], mode=ApprovalMode.PLAN)
    assert run.spec.status is Status.BOUNDARY
    assert run.spec.runner.overlay_commands == []
    assert (run.root / "a.txt").exists()


def test_enter_while_a_command_is_still_taken_in_waits_for_it_then_asks(tmp_path, monkeypatch):
    """Accepted while its command's result is still taken in (a slow take-in of a big
    result): the accept waits for that command, saying so, shows nothing of the answer,
    then asks about it; the next round and its command never run, and discarding leaves
    every file as it was."""
    taking_in = threading.Event()
    real = overlay_run.protected_changes

    def slow_take_in(paths, changed):
        taking_in.set()
        time.sleep(2.0)
        return real(paths, changed)

    monkeypatch.setattr(overlay_run, "protected_changes", slow_take_in)
    setup = project(tmp_path, FILES)
    setup.conversation.set_approval_mode(ApprovalMode.DEFAULT)
    session = setup.conversation.session
    overlay = Overlay.create(setup.root, session.tool_context.paths, base_dir=tmp_path / "base")
    first, second = "echo one > one.txt", "echo two > two.txt"
    for index, command in enumerate([first, second]):
        args = json.dumps({"command": command})
        setup.script(Message.assistant("", [call("shell", args, f"c{index}")]))
    setup.script(Message.assistant("all done"))
    spec = Speculation(session, "do it", overlay)
    worker = threading.Thread(target=spec.run, daemon=True)
    worker.start()
    assert taking_in.wait(20)
    run = Run(setup, spec, overlay)
    telemetry = Telemetry(run.root.parent / "events.jsonl")
    speculator = Speculator(
        setup.conversation, Settings(), submit_task=lambda f: f(), telemetry=telemetry
    )
    events = []
    for event in setup.conversation.run_prepared(speculator.prepared_turn(spec)):
        events.append(event)
        if isinstance(event, ApplyRequested):
            event.future.set_result(ApplyChoice.DISCARD)
    worker.join(20)
    assert events[0] == Notice(f"{FINISHING}: $ {first}")
    question = events[1]
    assert isinstance(question, ApplyRequested), events
    assert question.commands == (first,)
    assert question.changes == (FileChange("one.txt", ChangeKind.CREATED),)
    assert events[2:] == [Notice(DISCARD_NOTICE)]
    assert [c.args.command for c in spec.runner.started] == [first]  # never `second`
    assert not (setup.root / "one.txt").exists() and not (setup.root / "two.txt").exists()


def test_the_question_lists_the_directories_applying_makes(tmp_path):
    setup = project(tmp_path, FILES)
    command = "mkdir -p made/deeper && mkdir kept && echo x > kept/x.txt"
    run = speculate(setup, [command], mode=ApprovalMode.DEFAULT)
    assert run.spec.status is Status.COMPLETED, run.spec.boundary
    events = accepted_turn(run, ApplyChoice.APPLY)
    question = events[0]
    assert isinstance(question, ApplyRequested)
    assert [c.path for c in question.changes] == ["kept/x.txt", "made/deeper/"]
    assert (run.root / "made" / "deeper").is_dir()


def test_accepted_while_held_after_its_command_it_asks_first_then_goes_on_live(tmp_path):
    """A staged run held after the command its first batch ran on the kernel overlay, and
    accepted there in default mode: the question about that command comes before anything
    is shown or written; applied, the command is not run again and the answer's round is
    asked for once, live."""
    setup = project(tmp_path, FILES)
    setup.conversation.set_approval_mode(ApprovalMode.DEFAULT)
    session = setup.conversation.session
    overlay = Overlay.create(setup.root, session.tool_context.paths, base_dir=tmp_path / "base")
    command = "echo one > one.txt"
    setup.script(Message.assistant("", [call("shell", json.dumps({"command": command}), "c0")]))
    spec = Speculation(session, "do it", overlay, dwell_s=600.0)
    worker = threading.Thread(target=spec.run, daemon=True)
    worker.start()
    assert wait_until(lambda: spec.holding, 20)
    requests = len(setup.provider.requests)
    setup.script(Message.assistant("all done"))
    events = accepted_turn(Run(setup, spec, overlay), ApplyChoice.APPLY)
    worker.join(20)
    question = events[0]
    assert isinstance(question, ApplyRequested), events[:3]
    assert question.commands == (command,)
    assert question.changes == (FileChange("one.txt", ChangeKind.CREATED),)
    assert (setup.root / "one.txt").read_text() == "one\n"
    assert [e.call_id for e in of_type(events, ToolStarted)] == ["c0"]
    assert [c.args.command for c in spec.runner.started] == [command]  # run once, speculated
    assert isinstance(events[-1], TurnFinished) and events[-1].text == "all done"
    assert len(setup.provider.requests) == requests + 1
