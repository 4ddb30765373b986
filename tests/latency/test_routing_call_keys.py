"""The turn's facts pair each result with its own call when every response names its
call `call_0` (some servers do): a failed call stays unresolved after another succeeds."""

from __future__ import annotations

from qshell.latency.routing import Veto, facts, vetoes
from qshell.llm.messages import Message
from tests.agent.scripted import call
from tests.latency.test_routing import LIMIT, _note, _routed


def test_a_failed_call_0_stays_unresolved_after_another_call_0_succeeds(tmp_path):
    bad = Message.assistant("", [call("note", '{"wrong": 1}', "call_0")])
    steps = [bad, _note("b", "call_0"), Message.assistant("done")]
    session, *_ = _routed(tmp_path, "what now?", steps)
    turn = facts(session)
    assert not turn.batch_error and turn.unresolved_error
    assert vetoes(turn, context_limit=LIMIT) == [Veto.UNRESOLVED_ERROR]


def test_the_same_call_0_succeeding_later_resolves_its_error(tmp_path):
    bad = Message.assistant("", [call("note", '{"text": 1}', "call_0")])  # text must be a str
    steps = [bad, _note("a", "call_0"), _note("a", "call_0"), Message.assistant("done")]
    session, *_ = _routed(tmp_path, "what now?", steps)
    assert facts(session).unresolved_error  # {"text": 1} never succeeded
