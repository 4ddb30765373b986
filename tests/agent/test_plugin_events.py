"""A turn's events as the plugins see them: each observed once, in order, before the
front-end gets it; a plugin failure comes as one Notice, never after the turn's end."""

from __future__ import annotations

from collections.abc import Generator, Iterator

from qshell.agent.events import Event, Notice, TextDelta, TurnFinished
from qshell.agent.plugin_events import observed
from qshell.llm.messages import Usage
from qshell.plugins import hookimpl
from tests.plugins.helpers import host_of

END = TurnFinished("hi", Usage(), 1)


class Watcher:
    def __init__(self) -> None:
        self.seen: list[object] = []

    @hookimpl
    def qshell_event(self, event):
        self.seen.append(event)


def test_each_event_is_observed_once_before_the_front_end_gets_it():
    watcher = Watcher()
    host = host_of(("watcher", watcher))
    shown: list[Event] = []
    for event in observed(iter([TextDelta("h"), TextDelta("i"), END]), host):
        assert watcher.seen[-1] is event  # the observer saw it first
        shown.append(event)
    assert shown == [TextDelta("h"), TextDelta("i"), END] == watcher.seen


def test_a_failure_comes_as_one_notice_before_the_next_event_and_never_after_the_end():
    host = host_of(("watcher", Watcher()))

    def turn() -> Iterator[Event]:
        host.report("flaky", "qshell_tool_gate", "KeyError: 'k'")
        yield TextDelta("x")
        host.report("flaky", "qshell_tool_gate", "KeyError: 'k'")  # said already
        host.report("late", "qshell_tool_gate", "OSError")
        yield END

    shown = list(observed(turn(), host))
    assert shown == [
        Notice("plugin flaky failed in qshell_tool_gate: KeyError: 'k'"),
        TextDelta("x"),
        Notice("plugin late failed in qshell_tool_gate: OSError"),
        END,
    ]
    host.report("after", "qshell_event", "boom")
    assert list(observed(iter([END]), host)) == [
        Notice("plugin after failed in qshell_event: boom"),
        END,
    ]


def test_closing_the_wrapper_closes_the_turn_at_once():
    closed: list[bool] = []

    def turn() -> Iterator[Event]:
        try:
            yield TextDelta("a")
            yield TextDelta("b")
        finally:
            closed.append(True)

    events = observed(turn(), host_of())
    assert isinstance(events, Generator)
    assert next(events) == TextDelta("a")
    events.close()
    assert closed == [True]
