"""THE agent loop: one turn is model rounds and tool batches until the model stops.

`run_turn(session, prompt, runner, cancel, router=)` yields typed events. Each round
streams one model response through the router (latency/router.py: after a tool batch it
may send the round to the fast model, and it tells the turn's decision log what it did);
its tool calls run as a batch (agent/batch.py: consecutive calls of concurrency-safe
kinds in parallel, the rest in order, results always in call order) and the results go
back in the next round; a round the provider paused (`pause_turn`) is followed by one that
continues it, its text the start of the answer. It ends when the model answers without tools, or stops without
finishing its answer — cut off at the output limit, refused, filtered — in which case no
call of that round runs and each is answered "not run" (`TurnFinished`, with the stop
reason and a one-line note), when every result of a batch says its output is the answer
(`skip_llm_round`, latency/directives.py: the outputs are the turn's text, no model round
reads them back), when `maxTurns` rounds have run, on a provider error, or on
cancel (`TurnFailed`). When every result of a batch is terminal and the session
summarizes in background (D3), `SummaryStarted` comes before the round that reads them
back, so a front-end may give the prompt back while it streams. Near the
context window the history is compacted first (`HistoryCompacted`), and a first round
rejected as too long is retried once after compacting (agent/compaction.py). Normal
turns, `--print` and speculation all use it and differ only in the ToolRunner and the
consumer of the events. Invariant: whenever the generator returns, every tool call in
the history has exactly one result and no partial assistant message was kept. It runs
in the caller's thread (tool batches use a small pool) and never touches the terminal.
With `streamAheadTools`, a read call may start while its response still streams
(latency/stream_ahead.py); its events and its result still come in call order.
"""

from __future__ import annotations

from collections.abc import Generator, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from qshell.agent import compaction
from qshell.agent.batch import run_batch
from qshell.agent.events import (
    Event,
    FailureKind,
    PredictionStarted,
    ReasoningDelta,
    RoundFinished,
    SummaryStarted,
    TextDelta,
    TurnFailed,
    TurnFinished,
)
from qshell.agent.prediction import PredictionFilter, read_prediction, split_prediction
from qshell.agent.session import Session
from qshell.cancel import CancelToken
from qshell.errors import Cancelled, ContextTooLong, QshellError
from qshell.latency import routing
from qshell.latency.router import Router, Watch
from qshell.latency.stream_ahead import EarlyCalls
from qshell.llm.base import StreamDone, StreamReasoning, StreamText, StreamToolCall
from qshell.llm.fork import CacheSafeParams
from qshell.llm.messages import (
    FINISHED_STOPS,
    ChatRequest,
    Message,
    ToolCall,
    ToolResultBlock,
    Usage,
)
from qshell.permissions.runner import ToolRunner
from qshell.tools.base import ToolResult


@dataclass(frozen=True, slots=True)
class PendingCalls:
    """A turn to resume mid-batch: the last assistant message's calls still unanswered.

    `known` holds results already obtained elsewhere (an accepted speculation ran them);
    those calls are not run again and produce no events.
    """

    calls: Sequence[ToolCall]
    known: Mapping[str, ToolResult] = field(default_factory=dict)


TurnEnd = TurnFinished | TurnFailed  # the last event of every turn


def run_turn(
    session: Session,
    prompt: str | None,
    runner: ToolRunner,
    cancel: CancelToken,
    *,
    pending: PendingCalls | None = None,
    router: Router | None = None,
) -> Iterator[Event]:
    """Run one user turn; `prompt=None` continues from the current history, and `pending`
    first answers the calls of a turn that stopped mid-batch. `router` picks each round's
    model and logs its decisions (latency/router.py); without one every round runs on
    the session's model and nothing is logged, as for a speculation's fork."""
    turn = _Turn(session, runner, cancel, router or Router(), may_retry=prompt is not None)
    try:  # every event passes the turn's decision log (latency/decisions.py)
        for event in turn.events(prompt, pending):
            yield turn.log.saw(event)
    finally:
        turn.log.close()


class _Turn:
    """One run of `run_turn`: its rounds so far and how it ends. Each step is a generator
    of events that returns the turn's last event, or None to go on."""

    def __init__(
        self,
        session: Session,
        runner: ToolRunner,
        cancel: CancelToken,
        router: Router,
        *,
        may_retry: bool,
    ) -> None:
        self.session = session
        self.runner = runner
        self.cancel = cancel
        self.router = router
        self.start_usage = session.stats.usage
        self.rounds = 0
        self.paused: list[str] = []  # the text of rounds the provider paused (`pause_turn`)
        # a first round too long for the context may compact and run again, once
        self.may_retry = may_retry
        self.log = router.open_turn(session)

    def events(self, prompt: str | None, pending: PendingCalls | None) -> Iterator[Event]:
        end: TurnEnd | None = yield from self.begin(prompt, pending)
        while end is None and self.rounds < self.session.options.max_turns:
            end = yield from self.round()
        yield end or self.failed(
            FailureKind.MAX_TURNS,
            f"stopped after {self.session.options.max_turns} model rounds (maxTurns); raise it "
            "with --max-turns or the maxTurns setting, or continue with --continue",
        )

    def begin(
        self, prompt: str | None, pending: PendingCalls | None
    ) -> Generator[Event, None, TurnEnd | None]:
        """Answer the pending calls, or compact if needed and add the prompt."""
        session = self.session
        if pending is not None:
            return (yield from self.answer(pending.calls, pending.known))
        if prompt is not None:
            try:
                compacted = compaction.compact_before_turn(session, prompt, self.cancel)
            except (Cancelled, QshellError) as exc:
                return self.error(exc)
            if compacted is not None:
                yield compacted
            session.append(Message.user(prompt))
        return None

    def round(self) -> Generator[Event, None, TurnEnd | None]:
        """One model round and the tool batch it asks for; the calls started while its
        response streamed (latency/stream_ahead.py) never outlive it."""
        with EarlyCalls.of(self.session, self.runner, self.cancel) as early:
            return (yield from self._round(early))

    def _round(self, early: EarlyCalls) -> Generator[Event, None, TurnEnd | None]:
        session, cancel = self.session, self.cancel
        if cancel.cancelled:
            return self.failed(FailureKind.CANCELLED, "cancelled")
        request = session.request(round_index=self.rounds)
        try:
            done = yield from self.router.stream(
                session,
                request,
                lambda r, w: _stream(session, r, cancel, early, w),
                self.log,
            )
        except ContextTooLong as exc:
            return (yield from self._compact_and_retry(exc))
        except (Cancelled, QshellError) as exc:
            return self.error(exc, mid_round=True)
        if done is None:
            return self.failed(
                FailureKind.STREAM_BROKEN, "the model stream ended early", mid_round=True
            )
        self.rounds += 1
        session.record_round(done.usage, position=self.log.round_done(done))
        if done.message.content:
            session.append(done.message)
            session.cache_safe = CacheSafeParams.capture(
                request, done.message, background_reasoning=session.options.background_reasoning
            )
        if not done.usage.known:  # size the history ourselves, for compaction
            session.stats.last_prompt_tokens = compaction.estimate_tokens(session, session.history)
        yield RoundFinished(round=self.rounds, usage=done.usage)
        calls = done.message.tool_calls
        if done.stop_reason == "pause_turn":  # Anthropic paused a long server-tool turn: the
            self.paused.append(done.message.text)  # next round sends its content back as it
            return None  # came and so continues it (Anthropic's "handling stop reasons")
        if done.stop_reason not in FINISHED_STOPS:
            return self.unfinished(done)
        if not calls:
            return self.finished(done.message.text, citations=done.citations)
        return (yield from self.answer(calls, early=early))

    def answer(
        self,
        calls: Sequence[ToolCall],
        known: Mapping[str, ToolResult] | None = None,
        early: EarlyCalls | None = None,
    ) -> Generator[Event, None, TurnEnd | None]:
        """Run a batch and answer its calls; when every result skips the next round, the
        turn ends here with the outputs as its answer (shown as the model's would be).
        When every result is terminal and the session summarizes in background (D3), the
        round that follows is announced as the summary (`SummaryStarted`)."""
        response = len(self.session.history) - 1  # the calls are the last message's
        blocks, answer, terminal = yield from run_batch(
            self.session,
            calls,
            self.runner,
            self.cancel,
            response=response,
            known=known,
            early=early,
        )
        self.session.answer_all(blocks)
        skipped = routing.facts(self.session) if answer is not None else None
        self.log.batch_done(skipped=skipped)
        if self.cancel.cancelled:
            return self.failed(FailureKind.CANCELLED, "cancelled")
        if answer is None:
            options = self.session.options
            follows = self.rounds < options.max_turns  # a round does follow
            background = terminal and follows and options.summarizes_in_background
            if background and routing.predicts_summary(self.session):  # no veto applies
                yield SummaryStarted(round=self.rounds + 1)
            return None
        self.session.note("round_skipped", tools=[c.name for c in calls])
        yield TextDelta(answer)
        return TurnFinished(text=answer, usage=self.usage(), rounds=self.rounds, skipped_round=True)

    def _compact_and_retry(self, exc: ContextTooLong) -> Generator[Event, None, TurnFailed | None]:
        """The first round was too long: compact the history before the prompt and retry."""
        if self.rounds or not self.may_retry or not compaction.can_retry_compacted(self.session):
            return self.error(exc)
        self.may_retry = False
        try:
            compacted = compaction.compact_for_retry(self.session, self.cancel)
        except (Cancelled, QshellError) as again:
            return self.error(again)
        yield compacted
        return None

    def unfinished(self, done: StreamDone) -> TurnFinished:
        """The round stopped before its answer was complete: none of its calls runs (each
        is answered "not run", so the history stays valid), and the turn ends saying why."""
        note = unfinished_note(done, self.session.options.max_tokens)
        calls = done.message.tool_calls
        if calls:
            why = f"not run: {note}"
            self.session.answer_all(
                [ToolResultBlock(tool_call_id=c.id, content=why, is_error=True) for c in calls]
            )
            names = ", ".join(dict.fromkeys(c.name for c in calls))
            note += f" ({names} did not run)"
        self.session.note("turn_unfinished", stop_reason=done.stop_reason, message=note)
        text = "".join(self.paused) + done.message.text
        if self.session.options.predicts_next:  # cut off inside its prediction line, maybe
            text = split_prediction(text)[0]
        return TurnFinished(
            text=text,
            usage=self.usage(),
            rounds=self.rounds,
            stop_reason=done.stop_reason,
            note=note,
        )

    def finished(self, text: str, *, citations: tuple[str, ...] = ()) -> TurnFinished:
        """The answer is complete: its text as shown, the sources it cites, and the next
        prompt it predicts."""
        prediction, confidence = None, None
        text = "".join(self.paused) + text
        if self.session.options.predicts_next:
            text, prediction, confidence = read_prediction(text)
        return TurnFinished(
            text=text,
            usage=self.usage(),
            rounds=self.rounds,
            prediction=prediction,
            prediction_confidence=confidence,
            citations=citations,
        )

    def usage(self) -> Usage:
        """This turn's share of the session's usage totals."""
        return _since(self.session.stats.usage, self.start_usage)

    def failed(self, kind: FailureKind, message: str, *, mid_round: bool = False) -> TurnFailed:
        """The turn's failure; `mid_round`: a model round failed, and what it cost is not
        known (the usage is a lower bound, `known=False`, not a zero that says it was)."""
        self.session.note("turn_failed", kind=str(kind), message=message)
        usage = self.usage()
        if mid_round:
            usage = usage.model_copy(update={"known": False})
        return TurnFailed(kind=kind, message=message, usage=usage, rounds=self.rounds)

    def error(self, exc: Exception, *, mid_round: bool = False) -> TurnFailed:
        """The TurnFailed for a provider error or a cancel."""
        if isinstance(exc, Cancelled):
            return self.failed(FailureKind.CANCELLED, "cancelled", mid_round=mid_round)
        return self.failed(FailureKind.of(exc), str(exc), mid_round=mid_round)


def _stream(
    session: Session,
    request: ChatRequest,
    cancel: CancelToken,
    early: EarlyCalls,
    watch: Watch | None = None,
) -> Generator[Event, None, StreamDone | None]:
    """Stream one model response as TextDelta events; returns its end (None if cut, or
    when `watch` cuts it: latency/router.py times it and stops a fast round's tool call).
    A call complete before the end is offered to `early`, which may start it at once.
    `PredictionStarted` comes once, when what still streams is the hidden prediction line
    and no call came before it."""
    done: StreamDone | None = None
    shown = PredictionFilter() if session.options.predicts_next else None  # prediction.py
    announced = False
    chunks = session.provider.stream(request, cancel)
    for chunk in chunks:
        if watch is not None and watch.cut(chunk):
            getattr(chunks, "close", lambda: None)()  # ends its HTTP response
            return None
        if isinstance(chunk, StreamText):
            text = chunk.text if shown is None else shown.feed(chunk.text)
            if text:
                yield TextDelta(text)
            if shown is not None and shown.predicting and not announced:
                announced = True
                yield PredictionStarted()
        elif isinstance(chunk, StreamReasoning):
            yield ReasoningDelta(chunk.text)
        elif isinstance(chunk, StreamToolCall):
            announced = True  # the answer goes on with a tool: no prompt back early
            early.offer(chunk)
        else:
            done = chunk
    tail = shown.finish() if shown is not None and done is not None else ""
    if tail:
        yield TextDelta(tail)
    return done


def unfinished_note(done: StreamDone, max_tokens: int) -> str:
    """One line saying why an answer did not finish, and what to do about it."""
    match done.stop_reason:
        case "max_tokens" if done.native_stop == "model_context_window_exceeded":
            return "the answer was cut off: the conversation filled the model's context window"
        case "max_tokens":
            return (
                f"the answer was cut off at the output limit ({max_tokens:,} tokens a round); "
                "raise maxTokens (QSHELL_MAX_TOKENS), or ask it to go on"
            )
        case "refusal":
            return "the model declined to answer (stop reason: refusal)"
        case "content_filter":
            return "the provider's content filter stopped the answer"
        case _:
            said = f" ({done.native_stop})" if done.native_stop else ""
            return f"the server ended the answer before it was complete{said}"


def _since(now: Usage, start: Usage) -> Usage:
    """The usage accumulated since `start` (this turn's share of the session totals)."""

    def sub(a: int | None, b: int | None) -> int | None:
        if a is None:
            return None
        return a - (b or 0)

    return Usage(
        prompt_tokens=now.prompt_tokens - start.prompt_tokens,
        completion_tokens=now.completion_tokens - start.completion_tokens,
        cached_tokens=sub(now.cached_tokens, start.cached_tokens),
        cache_creation_tokens=sub(now.cache_creation_tokens, start.cache_creation_tokens),
        reasoning_tokens=sub(now.reasoning_tokens, start.reasoning_tokens),
        known=now.known,
    )
