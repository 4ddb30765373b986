"""A speculation that mixes commands and the file tools leaves what the same calls leave in a
live turn: a tool's write keeps the mode a speculated `chmod` gave the file (a real write
keeps a file's mode), before or after it.

Each speculated run is accepted through the prepared turn as the REPL drives it and compared,
tree and metadata (differential.py's snapshot), with the same scripted calls made in a live
turn: the real tools, the real shell. `in_a_live_turn` and `speculated` are shared with
test_accept_hard_links.py. On the real kernel overlay; skipped with the probe's reason where
none mounts.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from qshell.agent.events import ApplyChoice, Event, SpeculationAccepted, TurnFinished
from qshell.config import ApprovalMode
from qshell.followup.states import Status
from qshell.llm.messages import Message
from qshell.sandbox import probe
from tests.agent.scripted import call
from tests.agent.test_conversation import consume, read_call, write_call
from tests.followup.differential import Snapshot, differences, snapshot
from tests.followup.test_consent import accepted_turn, of_type
from tests.followup.test_overlay_run import Run, project, speculate

FOUND = probe()
pytestmark = pytest.mark.skipif(not FOUND.overlay, reason=FOUND.reason or "no overlay sandbox")
FILES = {"s.sh": "echo one\n", "a.txt": "a\n"}
Prepare = Callable[[Path], None]


def shell_call(command: str, id_: str) -> Message:
    return Message.assistant("", [call("shell", json.dumps({"command": command}), id_)])


def _unchanged(root: Path) -> None:
    """No preparation beyond FILES."""


def _project_under(base: Path, prepare: Prepare):
    base.mkdir()
    setup = project(base, FILES)
    prepare(setup.root)
    return setup


def in_a_live_turn(
    tmp_path: Path, steps: Sequence[Message], prepare: Prepare = _unchanged
) -> Snapshot:
    """The tree a live auto-edit turn making the scripted `steps` leaves (each command's
    question allowed once), in a project of FILES that `prepare` adjusted."""
    setup = _project_under(tmp_path / "live", prepare)
    setup.conversation.set_approval_mode(ApprovalMode.AUTO_EDIT)
    setup.script(*steps, Message.assistant("all done"))
    events = consume(setup.conversation.turn("do it"))
    assert isinstance(events[-1], TurnFinished), events[-3:]
    return snapshot(setup.root)


def speculated(tmp_path: Path, steps: Sequence[Message], prepare: Prepare = _unchanged) -> Run:
    """The scripted `steps` speculated in auto-edit mode over the same starting project."""
    setup = _project_under(tmp_path / "speculated", prepare)
    setup.script(*steps)
    return speculate(setup, [], mode=ApprovalMode.AUTO_EDIT)


def accepted_tree(run: Run) -> tuple[list[Event], Snapshot]:
    """The prepared turn's events once the speculation is accepted (apply chosen if asked),
    as the REPL drives it, and the tree it leaves."""
    events = accepted_turn(run, ApplyChoice.APPLY)
    assert isinstance(events[-1], TurnFinished), events[-3:]
    return events, snapshot(run.root)


CHMOD_THEN_WRITE = (
    shell_call("chmod +x s.sh", "c0"),
    read_call("s.sh", "r0"),
    write_call("s.sh", "echo two\n", "w0"),
)
WRITE_THEN_CHMOD = (
    read_call("s.sh", "r0"),
    write_call("s.sh", "echo two\n", "w0"),
    shell_call("chmod +x s.sh", "c0"),
)


@pytest.mark.parametrize(
    "steps", [CHMOD_THEN_WRITE, WRITE_THEN_CHMOD], ids=["chmod-write", "write-chmod"]
)
def test_a_tool_write_and_a_speculated_chmod_land_as_in_a_live_turn(tmp_path, steps):
    live = in_a_live_turn(tmp_path, steps)
    assert live["s.sh"][1:3] == (0o755, b"echo two\n")
    run = speculated(tmp_path, steps)
    assert run.spec.status is Status.COMPLETED, run.spec.boundary
    events, found = accepted_tree(run)
    assert of_type(events, SpeculationAccepted)
    assert not differences(live, found), differences(live, found)
