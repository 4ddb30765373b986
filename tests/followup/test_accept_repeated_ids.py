"""Accepting a speculation whose server numbers every response's call `call_0`: each call
keeps its own result (acceptance.py's `_plan` keys them by the response that made them)."""

from __future__ import annotations

from qshell.agent.events import ToolFinished, ToolStarted, TurnFinished
from qshell.agent.session import check_history
from qshell.followup.states import SpeculationOutcome, Status
from qshell.llm.messages import Message
from tests.followup.test_speculation import edit_call, read_call, run_accept, setup, speculate

__all__ = ["setup"]  # the fixture, shared with test_speculation.py


def test_an_accepted_boundary_edit_with_the_id_of_the_speculated_read_runs_live(setup):
    spec = speculate(setup, "change it", read_call("call_0"), edit_call("call_0"))
    assert spec.status is Status.BOUNDARY
    setup.script(Message.assistant("done live"))
    events = run_accept(setup, spec, outcome=SpeculationOutcome.ACCEPTED)
    assert (setup.root / "a.txt").read_text() == "two\n"
    finished = [e for e in events if isinstance(e, ToolFinished)]
    assert [e.name for e in finished] == ["read_file", "edit"]
    assert finished[1].result.edit is not None  # the edit's own result, shown as its diff
    history = setup.conversation.session.history
    assert "Edited a.txt" in history[-2].tool_results[0].content  # what the model was sent
    assert check_history(history) == []
    assert isinstance(events[-1], TurnFinished) and events[-1].text == "done live"


def test_the_replayed_and_live_calls_of_one_turn_have_keys_of_their_own(setup):
    """A front-end tells the calls apart by key (response, id), though every id is call_0."""
    spec = speculate(setup, "change it", read_call("call_0"), edit_call("call_0"))
    setup.script(Message.assistant("done live"))
    events = run_accept(setup, spec, outcome=SpeculationOutcome.ACCEPTED)
    started = [e.key for e in events if isinstance(e, ToolStarted)]
    finished = [e.key for e in events if isinstance(e, ToolFinished)]
    assert started == finished and len(set(started)) == 2
    assert {call_id for _, call_id in started} == {"call_0"}
    history = setup.conversation.session.history
    assert [history[index].tool_calls[0].name for index, _ in started] == ["read_file", "edit"]
