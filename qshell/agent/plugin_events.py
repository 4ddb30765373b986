"""The events of a turn as the gate plugins see them, and their failures said in between.

`observed(events, plugins)` wraps a turn's events where they are handed to a front-end
(Conversation's verbs, the print run): each event goes to the `qshell_event` observers
before the front-end gets it, so every event the user sees is observed once (a
speculation's are observed when its accepted turn replays them, not while it runs
unseen), and before each one a plugin failure not shown yet (plugins/host.py: a gate hook
that raised, here or in a speculation) comes as a `Notice` — never after the turn's
`TurnFinished` or `TurnFailed`, which stays its last event. It changes no event, and
closing it closes the turn. Runs in the thread that consumes the events.
"""

from __future__ import annotations

from collections.abc import Iterator

from qshell.agent.events import Event, Notice
from qshell.plugins import PluginHost


def observed(events: Iterator[Event], plugins: PluginHost) -> Iterator[Event]:
    """`events`, each shown to the observers first, pending plugin notices before each."""
    try:
        for event in events:
            yield from _notices(plugins)  # before, so a turn's last event stays its end
            plugins.event(event)
            yield event
    finally:  # closing the wrapper closes the turn at once (its finally blocks run now)
        close = getattr(events, "close", None)
        if close is not None:
            close()


def _notices(plugins: PluginHost) -> Iterator[Event]:
    for text in plugins.take_notices():
        notice = Notice(text)
        plugins.event(notice)
        yield notice
