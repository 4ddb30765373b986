"""Accepting a speculation while its command still runs: the accept waits for the command
(saying so) instead of cutting it and running it again, each call shows once, and "saved"
counts only the work kept — a command the speculation's own limit cut saved nothing.
Driven through the Speculator's prepared turn as the REPL runs it.

Skipped with the probe's reason where a user-namespace overlay cannot be mounted.
"""

from __future__ import annotations

import json
import threading

import pytest

from qshell.agent.events import (
    Event,
    Notice,
    PermissionRequested,
    SpeculationAccepted,
    ToolFinished,
    ToolStarted,
    TurnFinished,
)
from qshell.config import ApprovalMode, Settings
from qshell.followup.acceptance import FINISHING
from qshell.followup.speculation import Speculation
from qshell.followup.speculator import Speculator
from qshell.followup.states import SpeculationLimits, Status
from qshell.llm.messages import Message
from qshell.overlay import Overlay
from qshell.sandbox import probe
from qshell.telemetry import Telemetry
from qshell.tools.base import ErrorType
from tests.agent.scripted import call
from tests.agent.test_conversation import Setup
from tests.followup.test_overlay_run import project
from tests.waiting import wait_until

FOUND = probe()
pytestmark = pytest.mark.skipif(not FOUND.overlay, reason=FOUND.reason or "no overlay sandbox")


def running(setup: Setup, command: str, **kwargs) -> Speculation:
    """A yolo-mode speculation of one shell call, started in a thread; returned once the
    call has started."""
    setup.conversation.set_approval_mode(ApprovalMode.YOLO)
    session = setup.conversation.session
    base = setup.root.parent / "base"
    overlay = Overlay.create(setup.root, session.tool_context.paths, base_dir=base)
    setup.script(Message.assistant("", [call("shell", json.dumps({"command": command}), "c0")]))
    setup.script(Message.assistant("all done"))
    spec = Speculation(session, "build it", overlay, **kwargs)
    threading.Thread(target=spec.run, daemon=True).start()
    assert wait_until(lambda: any(isinstance(e, ToolStarted) for e in spec.events), 20)
    return spec


def accepted(setup: Setup, spec: Speculation) -> list[Event]:
    telemetry = Telemetry(setup.root.parent / "events.jsonl")
    speculator = Speculator(
        setup.conversation, Settings(), submit_task=lambda f: f(), telemetry=telemetry
    )
    return list(setup.conversation.run_prepared(speculator.prepared_turn(spec)))


def cancelled(event: ToolFinished) -> bool:
    return event.result.error is not None and event.result.error.type is ErrorType.CANCELLED


def test_accept_while_the_command_runs_waits_for_it_and_shows_it_once(tmp_path):
    setup = project(tmp_path, {"hello.txt": "hi\n"})
    command = "sleep 1 && echo built > out.txt && echo built-it"
    spec = running(setup, command)
    events = accepted(setup, spec)
    assert spec.status is Status.LIMIT  # stopped after the batch, before its next round
    assert Notice(f"{FINISHING}: $ {command}") in events
    started = [e for e in events if isinstance(e, ToolStarted)]
    finished = [e for e in events if isinstance(e, ToolFinished)]
    assert [e.call_id for e in started] == ["c0"]  # once: not cut, not run again live
    assert len(finished) == 1 and not cancelled(finished[0])
    assert "built-it" in finished[0].result.llm_content
    assert not [e for e in events if isinstance(e, PermissionRequested)]
    assert [e for e in events if isinstance(e, SpeculationAccepted)]
    assert isinstance(events[-1], TurnFinished) and events[-1].text == "all done"
    assert (setup.root / "out.txt").read_text() == "built\n"


def test_a_command_cut_by_the_limit_saves_nothing_and_shows_once(tmp_path):
    """The speculation's wall clock cut its command: the accept runs it live (once on the
    screen, not also replayed cancelled), and "saved" ends with the model round before it."""
    now = [0.0]
    setup = project(tmp_path, {"hello.txt": "hi\n"})
    limits = SpeculationLimits(max_rounds=8, max_messages=40, wall_clock_s=1.0, output_tokens=4096)
    go = tmp_path / "go"  # outside the project: a name made there would make the run stale
    command = f"[ -e {go} ] || sleep 30; echo ran"
    spec = running(setup, command, limits=limits, clock=lambda: now[0])
    now[0] = 10.0  # the command "runs" ten seconds, then the limit cuts it
    assert spec.done.wait(20) and spec.status is Status.LIMIT
    go.write_text("")  # the live run of it is quick
    now[0] = 20.0
    events = accepted(setup, spec)
    started = [e for e in events if isinstance(e, ToolStarted)]
    finished = [e for e in events if isinstance(e, ToolFinished)]
    assert [e.call_id for e in started] == ["c0"]
    assert len(finished) == 1 and not cancelled(finished[0])
    saved = [e for e in events if isinstance(e, SpeculationAccepted)]
    assert len(saved) == 1 and saved[0].saved_s == 0.0  # its one round ended at the start
