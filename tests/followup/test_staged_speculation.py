"""Staged speculation: a run held after its first tool batch, before the answer's round,
goes on at the user's intent or after the dwell time, ends there when aborted, and when
accepted there stops and lets the real turn go on live from that batch — the command it ran
not run again, the answer's round requested once."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import replace

from qshell.agent.events import SpeculationAccepted, TextDelta, ToolFinished, TurnFinished
from qshell.agent.session import check_history
from qshell.cancel import CancelToken
from qshell.errors import Cancelled
from qshell.followup.speculation import Speculation
from qshell.followup.states import RunStep, SpeculationLimits, SpeculationOutcome, Stage, Status
from qshell.llm.base import StreamEvent, StreamText
from qshell.llm.messages import ChatRequest, Message
from qshell.overlay import Overlay
from qshell.tools.read_file import ReadFileTool
from tests.agent.scripted import Step, call
from tests.followup.test_speculation import read_call, run_accept, setup
from tests.waiting import wait_until

__all__ = ["setup"]  # the fixture, shared with test_speculation.py
WAIT_S = 10.0


def staged(setup, *steps: Step, dwell_s: float = 60.0) -> tuple[Speculation, threading.Thread]:
    """A staged speculation of "read it again" started in a thread, its replies `steps`."""
    setup.script(*steps)
    session = setup.conversation.session
    overlay = Overlay.create(session.project_root, session.tool_context.paths)
    spec = Speculation(session, "read it again", overlay, dwell_s=dwell_s, kind="show")
    thread = threading.Thread(target=spec.run, daemon=True)
    thread.start()
    return spec, thread


def test_a_staged_run_holds_after_its_first_batch_and_goes_on_at_intent(setup):
    before = len(setup.provider.requests)
    spec, thread = staged(setup, read_call("r1"), Message.assistant("it says one"))
    assert wait_until(lambda: spec.holding, WAIT_S)
    assert spec.stage is Stage.STAGED
    assert len(setup.provider.requests) == before + 1  # the answer's round is not asked for
    assert [type(e) for e in spec.events if isinstance(e, ToolFinished)] == [ToolFinished]
    assert spec.first_step_s is not None and spec.first_step_s >= 0
    spec.resume("tab")
    thread.join(WAIT_S)
    assert spec.status is Status.COMPLETED and spec.resumed_by == "tab"
    assert len(setup.provider.requests) == before + 2
    assert isinstance(spec.events[-1], TurnFinished) and spec.events[-1].text == "it says one"


def test_a_staged_run_goes_on_by_itself_once_it_has_been_shown_for_the_dwell_time(setup):
    spec, thread = staged(setup, read_call("r1"), Message.assistant("it says one"), dwell_s=0.3)
    thread.join(WAIT_S)
    assert spec.status is Status.COMPLETED and spec.resumed_by == "dwell"
    assert spec.held_s > 0


def test_intent_before_the_stage_point_means_it_never_holds(setup):
    setup.script(read_call("r1"), Message.assistant("it says one"))
    session = setup.conversation.session
    overlay = Overlay.create(session.project_root, session.tool_context.paths)
    spec = Speculation(session, "read it again", overlay, dwell_s=60.0)
    spec.resume("typed")
    spec.run()  # on this thread: a hold would block it for a minute
    assert spec.status is Status.COMPLETED and spec.resumed_by == "typed" and spec.held_s == 0


def test_an_abort_while_held_ends_the_run_without_the_answers_round(setup):
    before = len(setup.provider.requests)
    spec, thread = staged(setup, read_call("r1"), Message.assistant("never asked for"))
    assert wait_until(lambda: spec.holding, WAIT_S)
    spec.abort()
    thread.join(WAIT_S)
    assert not thread.is_alive() and spec.status is Status.ABORTED
    assert len(setup.provider.requests) == before + 1
    assert not spec.overlay.directory.exists()


def test_accepted_while_held_the_real_turn_goes_on_live_from_the_batch(setup):
    before = len(setup.provider.requests)
    spec, thread = staged(setup, read_call("r1"))
    assert wait_until(lambda: spec.holding, WAIT_S)
    assert spec.finish_step() is RunStep.OVER  # held between steps: nothing to finish
    thread.join(WAIT_S)
    assert spec.status is Status.LIMIT and spec.usable
    setup.script(Message.assistant("it says one, live"))
    events = run_accept(setup, spec, outcome=SpeculationOutcome.ACCEPTED)
    assert [e.call_id for e in events if isinstance(e, ToolFinished)] == ["r1"]  # run once
    accepted = next(e for e in events if isinstance(e, SpeculationAccepted))
    assert not accepted.completed
    assert isinstance(events[-1], TurnFinished) and events[-1].text == "it says one, live"
    assert len(setup.provider.requests) == before + 2  # round 1 speculated, round 2 live
    assert check_history(setup.conversation.session.history) == []


def test_a_full_run_never_holds(setup):
    setup.script(read_call("r1"), Message.assistant("it says one"))
    session = setup.conversation.session
    overlay = Overlay.create(session.project_root, session.tool_context.paths)
    spec = Speculation(session, "read it again", overlay)
    spec.run()
    assert spec.stage is Stage.FULL and spec.status is Status.COMPLETED
    assert spec.resumed_by is None and spec.first_step_s is not None


def cut_answer(request: ChatRequest, cancel: CancelToken) -> Iterator[StreamEvent]:
    """An answer's round that streams its first words, then waits to be cut."""
    yield StreamText("it says ")
    cancel.wait(WAIT_S)
    raise Cancelled()


def test_an_accept_at_the_hold_starts_no_round_even_when_the_dwell_ends_as_it_lands(
    setup, monkeypatch
):
    """Enter lands as the dwell time ends (or just after Tab): finish_step saw the run
    held and said OVER, so no round may start; one that did would be billed, and its first
    words replayed before the live round streams them again."""
    before = len(setup.provider.requests)
    spec, thread = staged(setup, read_call("r1"), cut_answer)
    assert wait_until(lambda: spec.holding, WAIT_S)
    stop = spec._stop

    def late(reason: Status) -> None:  # the hold ends between finish_step's look and its stop
        spec._go.set()
        wait_until(lambda: spec.done.is_set() or len(setup.provider.requests) > before + 1)
        stop(reason)

    monkeypatch.setattr(spec, "_stop", late)
    assert spec.finish_step() is RunStep.OVER
    thread.join(WAIT_S)
    assert len(setup.provider.requests) == before + 1  # the answer's round never asked for
    setup.provider.steps[:] = [Message.assistant("it says one, live")]
    events = run_accept(setup, spec, outcome=SpeculationOutcome.ACCEPTED)
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["it says one, live"]


def test_a_batch_whose_outputs_are_the_answer_is_not_held(setup, monkeypatch):
    """Every result says its output is the answer (D1): no model round follows the batch,
    so there is nothing expensive to hold before; the run completes, and accepting it asks
    for no round (held and accepted there, the live turn would ask for one a normal turn
    never would)."""
    real_run = ReadFileTool.run

    def skipping(self, args, ctx):
        return replace(real_run(self, args, ctx), skip_llm_round=True)

    monkeypatch.setattr(ReadFileTool, "run", skipping)
    spec, thread = staged(setup, read_call("r1"))
    thread.join(WAIT_S)
    assert spec.status is Status.COMPLETED and spec.held_s == 0
    requests = len(setup.provider.requests)
    events = run_accept(setup, spec, outcome=SpeculationOutcome.ACCEPTED)
    assert len(setup.provider.requests) == requests
    assert isinstance(events[-1], TurnFinished) and events[-1].skipped_round


def test_a_dwell_time_too_long_to_wait_for_holds_until_intent(setup):
    """`dwellMs` has no upper bound (a project may raise it): one past what a thread can
    wait for means "intent only", not a speculation failing at its hold."""
    spec, thread = staged(setup, read_call("r1"), Message.assistant("it says one"), dwell_s=1e12)
    assert wait_until(lambda: spec.holding or spec.done.is_set(), WAIT_S)
    assert spec.holding, spec.status
    spec.resume("tab")
    thread.join(WAIT_S)
    assert spec.status is Status.COMPLETED and spec.resumed_by == "tab"


def test_withdrawn_a_held_run_goes_on_only_at_intent(setup):
    """Its suggestion left the screen (Esc): the dwell time no longer lets it go on."""
    spec, thread = staged(setup, read_call("r1"), Message.assistant("it says one"), dwell_s=0.3)
    spec.withdraw()
    assert wait_until(lambda: spec.holding, WAIT_S)
    wait_until(lambda: spec.clock() > spec.started_at + 1.0)
    assert spec.holding and not spec.done.is_set()
    spec.resume("typed")
    thread.join(WAIT_S)
    assert spec.status is Status.COMPLETED and spec.resumed_by == "typed"


def test_a_parallel_batch_is_held_after_its_last_call_only(setup):
    both = Message.assistant(
        "", [call("read_file", '{"path": "a.txt"}', "r1"), call("ls", "{}", "l1")]
    )
    spec, thread = staged(setup, both, Message.assistant("it says one"))
    assert wait_until(lambda: spec.holding, WAIT_S)
    assert [e.call_id for e in spec.events if isinstance(e, ToolFinished)] == ["r1", "l1"]
    spec.resume("tab")
    thread.join(WAIT_S)
    assert spec.status is Status.COMPLETED


def test_the_wall_clock_limit_ends_a_held_run_and_accept_goes_on_live_from_its_batch(setup):
    setup.script(read_call("r1"))
    session = setup.conversation.session
    overlay = Overlay.create(session.project_root, session.tool_context.paths)
    limits = SpeculationLimits(
        max_rounds=20, max_messages=100, wall_clock_s=0.5, output_tokens=8000
    )
    spec = Speculation(session, "read it again", overlay, limits=limits, dwell_s=60.0)
    spec.run()  # on this thread: it returns once the limit ends the hold
    assert spec.status is Status.LIMIT and spec.usable and spec.resumed_by is None
    setup.script(Message.assistant("it says one, live"))
    events = run_accept(setup, spec, outcome=SpeculationOutcome.ACCEPTED)
    assert [e.call_id for e in events if isinstance(e, ToolFinished)] == ["r1"]
    assert isinstance(events[-1], TurnFinished) and events[-1].text == "it says one, live"
