"""The decision log's turn records: times from the turn's start (first token, user idle —
the D3 `SummaryStarted` when the turn yields one), positions, and safe appends."""

from __future__ import annotations

import json
import threading
from collections.abc import Generator
from pathlib import Path

from qshell.agent.events import (
    Event,
    RoundPosition,
    SummaryStarted,
    TextDelta,
    ToolStarted,
    TurnFinished,
)
from qshell.latency.decisions import DecisionLog, TurnLog
from qshell.latency.router import Router, Watch
from qshell.llm.base import StreamDone, StreamText
from qshell.llm.messages import ChatRequest, Message, Usage
from qshell.telemetry import Telemetry
from tests.agent.test_loop import make_session


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _log(tmp_path: Path):
    session, _ = make_session(tmp_path, [], [])
    clock = Clock()
    router = Router(decisions=DecisionLog(Telemetry(tmp_path / "d.jsonl")), clock=clock)
    return session, clock, router, router.open_turn(session)


def _streamer(clock: Clock, text: str, *, wait_s: float):
    def stream(request: ChatRequest, watch: Watch) -> Generator[Event, None, StreamDone]:
        clock.now += wait_s
        watch.cut(StreamText(text))
        yield TextDelta(text)
        clock.now += 0.5
        done = StreamDone(Message.assistant(text), Usage(prompt_tokens=9), "end_turn")
        watch.cut(done)
        return done

    return stream


def _records(tmp_path: Path) -> list[dict]:
    return [json.loads(x) for x in (tmp_path / "d.jsonl").read_text().splitlines()]


def _run(router: Router, log: TurnLog, clock: Clock, session) -> None:
    request = session.request()
    streamer = _streamer(clock, "hi", wait_s=0.25)
    done = yield_all(router.stream(session, request, streamer, log))
    assert log.round_done(done) is RoundPosition.FIRST


def yield_all(gen):
    try:
        while True:
            next(gen)
    except StopIteration as stop:
        return stop.value


def test_user_idle_is_the_time_of_the_turns_last_event(tmp_path):
    session, clock, router, log = _log(tmp_path)
    _run(router, log, clock, session)
    clock.now += 1.0
    log.saw(TurnFinished(text="hi", usage=Usage(), rounds=1))
    log.close()
    (record,) = _records(tmp_path)
    assert record["t_first_token_ms"] == 250 and record["primary_ttft_ms"] == 250
    assert record["total_rt_ms"] == 750 and record["t_user_idle_ms"] == 1750
    assert record["position"] == "first" and record["prompt_tokens"] == 9


def test_user_idle_is_the_summary_start_when_the_prompt_came_back_early(tmp_path):
    session, clock, router, log = _log(tmp_path)
    clock.now += 0.1
    log.saw(SummaryStarted(round=2))
    _run(router, log, clock, session)
    log.saw(TurnFinished(text="hi", usage=Usage(), rounds=1))
    log.close()
    (record,) = _records(tmp_path)
    assert record["t_user_idle_ms"] == 100 and record["t_first_token_ms"] == 350


def test_a_tool_call_after_the_summary_start_takes_the_idle_time_back(tmp_path):
    # the predicted summary called a tool: the REPL took the prompt away again, so the
    # user could type for good only at the next SummaryStarted
    session, clock, router, log = _log(tmp_path)
    clock.now += 0.1
    log.saw(SummaryStarted(round=2))
    clock.now += 0.2
    log.saw(ToolStarted("c1", "read_file", {}))
    clock.now += 0.3
    log.saw(SummaryStarted(round=3))
    _run(router, log, clock, session)
    log.saw(TurnFinished(text="hi", usage=Usage(), rounds=3))
    log.close()
    (record,) = _records(tmp_path)
    assert record["t_user_idle_ms"] == 600


def test_turns_logged_from_several_threads_leave_whole_lines(tmp_path):
    def turn() -> None:
        session, clock, router, log = _log(tmp_path)
        for _ in range(20):
            _run(router, log, clock, session)
        log.close()

    threads = [threading.Thread(target=turn) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    records = _records(tmp_path)
    assert len(records) == 80 and all(r["event"] == "decision" for r in records)
