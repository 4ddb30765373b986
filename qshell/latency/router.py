"""The router (seed 004 D2): which model streams each round of a main session's turn.

A `Router` holds a session's `Routing` settings (latency/routing.py) and its `DecisionLog`;
composition builds one per conversation or `--print` run and passes it to `run_turn`. For
each round it plans the tier — the first round of a turn always on the primary model,
after a tool batch `Routing.plan` — and streams it through the loop's `_stream` with a
`Watch` that times the first token and, on the fast tier, cuts the stream when it starts
a tool call; the round then runs again on the primary model (nothing of the cut round
reaches the history; a `TextWithdrawn` says so on screen and takes the text back). It
tells the turn's `TurnLog` what it planned, measured and fell back from; the log only
records. A run without a router (`Router()`: primary only, no log) is what a speculation's
fork gets. It runs in the thread running the turn; it keeps no state between rounds.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Generator

from qshell.agent.events import Event, TentativeText, TextWithdrawn
from qshell.agent.session import Session
from qshell.errors import QshellError
from qshell.latency import routing
from qshell.latency.decisions import DecisionLog, TurnLog
from qshell.latency.routing import PRIMARY_ONLY, Plan, Routing, Tier
from qshell.llm.base import StreamDone, StreamEvent, StreamReasoning, StreamText
from qshell.llm.messages import ChatRequest

FALLBACK_NOTICE = "the fast model started a tool call; the primary model answers this round"


class Watch:
    """One stream's clock: the first chunk's time, the text it brought, and — when
    `cut_on_call` — whether it started a tool call (any chunk but text, reasoning or the
    end, which is how a provider that streams calls shows one)."""

    def __init__(self, clock: Callable[[], float], *, cut_on_call: bool) -> None:
        self._clock = clock
        self.started = clock()
        self.first: float | None = None
        self.chars = 0
        self.cut_on_call = cut_on_call
        self.was_cut = False

    def cut(self, chunk: StreamEvent) -> bool:
        """Note `chunk`; True when the stream must stop here."""
        now = self._clock()
        if self.first is None:
            self.first = now
        if isinstance(chunk, StreamText | StreamReasoning):
            self.chars += len(chunk.text)
            return False
        self.was_cut = self.cut_on_call and not isinstance(chunk, StreamDone)
        return self.was_cut

    def ttft_ms(self) -> int | None:
        return None if self.first is None else round(1000 * (self.first - self.started))


Streamer = Callable[[ChatRequest, Watch], Generator[Event, None, StreamDone | None]]


class Router:
    """The D2 plan of a session's rounds and its fast→primary fallback; `Router()` routes
    every round to the primary model and logs nothing."""

    def __init__(
        self,
        routing: Routing = PRIMARY_ONLY,
        decisions: DecisionLog | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.routing = routing
        self.decisions = decisions or DecisionLog.disabled()
        self._clock = clock

    def open_turn(self, session: Session) -> TurnLog:
        """The log of one turn of `session`, written to this router's decision log."""
        return TurnLog(session, self.decisions, strategy=self.routing.strategy, clock=self._clock)

    def stream(
        self,
        session: Session,
        request: ChatRequest,
        streamer: Streamer,
        log: TurnLog,
    ) -> Generator[Event, None, StreamDone | None]:
        """Plan and stream one round (`request` is the primary model's); on the fast tier,
        fall back to the primary model when its stream starts a tool call (or fails).
        Returns the round's StreamDone. The first round of a turn (no batch in `log` yet)
        is never routed."""
        facts = routing.facts(session)
        plan = self._plan(session, request, facts, after_batch=log.batches > 0)
        log.routed(plan, facts)
        fast = plan.tier is Tier.FAST
        watch = Watch(self._clock, cut_on_call=fast)
        reason = detail = ""
        if fast:
            yield TentativeText()
        try:
            done = yield from streamer(plan.request, watch)
        except QshellError as exc:
            if not fast:
                raise
            done, reason, detail = None, "error", type(exc).__name__
        else:
            if watch.was_cut or (done is not None and done.message.tool_calls):
                reason = "tool_call_seen"
            elif done is None:
                reason, detail = "error", "the stream ended early"
        log.streamed(plan.tier, first=watch.first, ttft_ms=watch.ttft_ms())
        if fast and reason:
            cut = done.usage if done is not None and done.usage.known else None
            log.fell_back(reason, detail, cut=cut, chars=watch.chars)
            yield TextWithdrawn(FALLBACK_NOTICE)
            watch = Watch(self._clock, cut_on_call=False)
            done = yield from streamer(request, watch)
            log.streamed(Tier.PRIMARY, first=watch.first, ttft_ms=watch.ttft_ms())
        log.stream_ended(chars=watch.chars)
        return done

    def _plan(
        self, session: Session, request: ChatRequest, facts: routing.TurnFacts, *, after_batch: bool
    ) -> Plan:
        if not after_batch:
            return Plan(request, Tier.PRIMARY, None, lean=False)
        return self.routing.plan(session, request, facts)
