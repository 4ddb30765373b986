"""StreamToolCall over real HTTP: where each wire format says a tool call is complete.

The scripted server holds its stream right after the chunk that completes a call (OpenAI:
the first delta of the next call, or the finish chunk; Anthropic: the block's
`content_block_stop`). The provider must hand the call out while the server still holds:
a watchdog releases the hold after a while only so that a broken provider fails instead
of hanging, and the test then fails on `released_by_watchdog`. No time is asserted.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from qshell.cancel import CancelToken
from qshell.llm.base import StreamDone, StreamEvent, StreamText, StreamToolCall
from qshell.llm.messages import ChatRequest, Message
from tests.fakes.llm_server import Hold, Reply, ScriptedLLMServer, ToolCallSpec, always
from tests.fakes.providers import provider_for

PROTOCOLS = ["openai", "anthropic"]
WATCHDOG_S = 20.0


def request() -> ChatRequest:
    return ChatRequest(model="m1", system="sys", messages=[Message.user("go")])


def three_calls(**options: object) -> Reply:
    calls = [
        ToolCallSpec("read_file", {"path": "a.txt"}),
        ToolCallSpec("grep", {"pattern": "def main", "path": "src"}),
        ToolCallSpec("glob", {"pattern": "**/*.py"}),
    ]
    return Reply.tool_calls(calls, "Looking.", **options)  # type: ignore[arg-type]


class Watchdog:
    """Releases `hold` after WATCHDOG_S unless released first; says whether it had to."""

    def __init__(self, hold: Hold) -> None:
        self.hold = hold
        self.released_by_watchdog = False
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        if not self.hold.released.wait(WATCHDOG_S):
            self.released_by_watchdog = True
            self.hold.release()


def stream(server: ScriptedLLMServer, protocol: str) -> Iterator[StreamEvent]:
    provider = provider_for(server, protocol)
    try:
        yield from provider.stream(request(), CancelToken())
    finally:
        provider.close()


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_each_call_is_announced_once_in_order_before_the_end_and_is_the_final_call(
    llm_server, protocol
):
    llm_server.add_rule(always(), three_calls())
    events = list(stream(llm_server, protocol))
    done = events[-1]
    assert isinstance(done, StreamDone)
    announced = [e for e in events if isinstance(e, StreamToolCall)]
    assert [e.index for e in announced] == [0, 1, 2]
    assert [e.call for e in announced] == done.message.tool_calls
    assert "".join(e.text for e in events if isinstance(e, StreamText)) == "Looking."


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("held_call", [0, 1, 2])
def test_a_call_is_announced_at_its_completion_point_while_the_rest_is_still_held(
    llm_server, protocol, held_call
):
    rule = llm_server.add_rule(always(), three_calls())
    hold = llm_server.hold(rule, after_call=held_call)
    watchdog = Watchdog(hold)
    seen: list[int] = []
    for event in stream(llm_server, protocol):
        if isinstance(event, StreamToolCall):
            seen.append(event.index)
            if event.index == held_call:
                # the server has sent nothing past this call's completing chunk
                assert not hold.released.is_set()
                assert seen == list(range(held_call + 1))
                hold.release()
        elif isinstance(event, StreamDone):
            assert hold.released.is_set()
    assert not watchdog.released_by_watchdog
    assert seen == [0, 1, 2]


def test_an_openai_call_is_not_announced_before_a_later_call_begins(llm_server):
    """Held after the call's last argument piece: the next index has not begun, so the call
    is not known to be complete yet (a later delta could still extend its arguments)."""
    rule = llm_server.add_rule(always(), three_calls())
    hold = llm_server.hold(rule, after_first_chunk=True)  # after the first text piece
    events: list[StreamEvent] = []
    watchdog = Watchdog(hold)
    for event in stream(llm_server, "openai"):
        if isinstance(event, StreamText) and not hold.released.is_set():
            assert not any(isinstance(e, StreamToolCall) for e in events)
            hold.release()
        events.append(event)
    assert not watchdog.released_by_watchdog
    assert [e.index for e in events if isinstance(e, StreamToolCall)] == [0, 1, 2]


def test_interleaved_openai_deltas_never_announce_a_call_before_its_arguments_are_whole(
    llm_server,
):
    llm_server.add_rule(always(), three_calls(interleave=True))
    events = list(stream(llm_server, "openai"))
    done = events[-1]
    assert isinstance(done, StreamDone)
    announced = [e for e in events if isinstance(e, StreamToolCall)]
    assert [e.call for e in announced] == done.message.tool_calls


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_round_cut_at_the_output_limit_announces_only_the_calls_completed_before_the_cut(
    llm_server, protocol
):
    calls = [
        ToolCallSpec("read_file", {"path": "a.txt"}),
        ToolCallSpec("read_file", '{"path": "b.t'),  # cut inside its arguments
    ]
    llm_server.add_rule(always(), Reply.tool_calls(calls, stop_reason="max_tokens"))
    events = list(stream(llm_server, protocol))
    done = events[-1]
    assert isinstance(done, StreamDone) and done.stop_reason == "max_tokens"
    assert [c.complete for c in done.message.tool_calls] == [True, False]
    announced = [e for e in events if isinstance(e, StreamToolCall)]
    assert [(e.index, e.call) for e in announced] == [(0, done.message.tool_calls[0])]
