"""A large accept says it is applying, shows its progress, and a cancel before its commit
point applies nothing.

A speculated command that made more files than `LARGE_APPLY` shows a notice before the
apply starts; the user's Ctrl-C (the turn's cancel token) asked while the files are being
staged rolls the apply back, so the project is as it was and the turn ends cancelled.
Driven through the Speculator's prepared turn as the REPL runs it, on the real kernel
overlay; skipped with the probe's reason where one cannot be mounted. The apply runs
beside the turn's generator, whose ApplyProgress events come before the accept's line.
"""

from __future__ import annotations

import pytest

from qshell.agent.events import (
    ApplyProgress,
    FailureKind,
    Notice,
    SpeculationAccepted,
    TurnFailed,
)
from qshell.cancel import CancelToken
from qshell.config import ApprovalMode, Settings
from qshell.followup import applying
from qshell.followup.acceptance import LARGE_APPLY
from qshell.followup.speculator import Speculator
from qshell.followup.states import Status
from qshell.permissions.runner import MainToolRunner
from qshell.sandbox import probe
from qshell.telemetry import Telemetry
from tests.followup.test_overlay_run import project, speculate

FOUND = probe()
pytestmark = pytest.mark.skipif(not FOUND.overlay, reason=FOUND.reason or "no overlay sandbox")
MAKE = f"mkdir out && for i in $(seq 1 {LARGE_APPLY}); do printf $i > out/f$i; done"


def test_a_large_apply_is_announced_and_a_cancel_midway_leaves_the_project_as_it_was(tmp_path):
    setup = project(tmp_path, {"keep.txt": "k\n"})
    run = speculate(setup, [MAKE], mode=ApprovalMode.YOLO)
    assert run.spec.status is Status.COMPLETED, run.spec.boundary
    conversation = run.setup.conversation
    speculator = Speculator(
        conversation,
        Settings(),
        submit_task=lambda f: f(),
        telemetry=Telemetry(tmp_path / "events.jsonl"),
    )
    cancel = CancelToken()
    staged: list[str] = []

    def checkpoint(files: list[str]) -> None:
        staged.extend(files)
        cancel.cancel()  # the user presses Ctrl-C as the apply begins

    runner = MainToolRunner(ApprovalMode.YOLO, interactive=False)
    turn = speculator.prepared_turn(run.spec)
    events = list(turn(runner, cancel, checkpoint))
    notices = [e.text for e in events if isinstance(e, Notice)]
    assert any(f"applying {LARGE_APPLY}" in text for text in notices), notices
    assert len(staged) >= LARGE_APPLY
    assert not any(isinstance(e, SpeculationAccepted) for e in events)
    assert isinstance(events[-1], TurnFailed) and events[-1].kind is FailureKind.CANCELLED
    assert sorted(p.name for p in run.root.iterdir()) == ["keep.txt"]


def test_a_large_apply_shows_its_progress_before_it_is_accepted(tmp_path, monkeypatch):
    monkeypatch.setattr(applying, "EVERY_S", 0.0)  # every step shown: the order is the point
    setup = project(tmp_path, {"keep.txt": "k\n"})
    run = speculate(setup, [MAKE], mode=ApprovalMode.YOLO)
    assert run.spec.status is Status.COMPLETED, run.spec.boundary
    speculator = Speculator(
        run.setup.conversation,
        Settings(),
        submit_task=lambda f: f(),
        telemetry=Telemetry(tmp_path / "events.jsonl"),
    )
    runner = MainToolRunner(ApprovalMode.YOLO, interactive=False)
    turn = speculator.prepared_turn(run.spec)
    events = list(turn(runner, CancelToken(), lambda files: None))
    kinds = [type(e) for e in events]
    steps = [e for e in events if isinstance(e, ApplyProgress)]
    assert steps, kinds
    assert [s.done for s in steps] == sorted(s.done for s in steps)
    assert steps[-1].total >= 2 * LARGE_APPLY  # each file staged, then swapped in
    assert 0 <= steps[0].percent <= steps[-1].percent <= 100
    assert kinds.index(SpeculationAccepted) > kinds.index(ApplyProgress)
    assert (run.root / f"out/f{LARGE_APPLY}").read_text() == str(LARGE_APPLY)
