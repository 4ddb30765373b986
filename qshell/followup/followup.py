"""Followup: next-prompt suggestions and their speculation, wired to one Conversation.

It decides after each turn whether a suggestion may be generated (the guards), takes it
from the answer when the answer ended with its prediction (agent/prediction.py), else
generates it in a small background pool from the session's cache-safe parameters (so the
request shares the main request's cached prefix), and hands display timing and outcomes to the
framework-agnostic SuggestionController. Each suggestion the controller reports ready
(`on_ready`: generated, or back on an emptied line) is speculated at once by the
Speculator; a submitted prompt that matches is run from that speculation (`prepared`).
A suggestion that would push, deploy, delete… (followup/consequence.py: the
`suggestions.consequential` rules and the plugins' `qshell_consequential_words`) is
suppressed (reason `consequential`) unless the user's own prompts in this session asked for
that kind; shown, it carries `marker` and its speculation runs reads only. A suggestion
offers up to `suggestions.alternatives` candidates (each under the same rules, each with
its own confidence); `cycle` shows another, and the speculation follows the one shown. A shown
suggestion is speculated only as far as the ConfidenceGate says (followup/gating.py:
`speculation.gating`, `minConfidence`, `fullConfidence`, `staged`: the model's confidence,
corrected by what this user did with suggestions of about that confidence and of that
kind): whole, staged — held after its first tool batch until the user shows intent, which
`fill` (Tab) and typing its start are — or not at all; each suggestion's decision is one
`speculation_gate` event. A suggestion the answer did not fold in is asked for every
turn until this user has ignored several in a row, then every few turns
(`ConfidenceGate.ask_gap`; suppressed as `backoff` in between).
Suggestions go through one SuggestionFlights, so the one a completed speculation
pipelined is the one asked for after its accepted turn, never a second request; a
submitted prompt forgets every other context. Closing the conversation (or `close`)
ends every suggestion and speculation at once, closing their HTTP streams. Front-ends call
its verbs — `turn_ended`, `user_typed`, `fill`, `cycle`, `dismiss`, `submitted`, `prepared`,
`close` — and show what `on_change` tells them. It never touches the terminal;
`on_change` runs on a background thread, so a front-end must hop to its UI thread before
touching widgets.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import TYPE_CHECKING

from qshell.agent.conversation import Conversation
from qshell.agent.events import Event, FailureKind, TurnFailed, TurnFinished
from qshell.agent.session import Session
from qshell.cancel import CancelToken
from qshell.config import Settings
from qshell.followup.consequence import ConsequenceRules
from qshell.followup.controller import Scheduler, SuggestionController, ThreadingScheduler
from qshell.followup.flights import SuggestionContext, SuggestionFlights
from qshell.followup.gating import ConfidenceGate, GatingResult
from qshell.followup.guards import background_enabled
from qshell.followup.kinds import kind_of
from qshell.followup.speculator import Speculator
from qshell.followup.suggestion import (
    GuardInputs,
    SuggestionResult,
    count_assistant_turns,
    folded_suggestion,
    guard_reason,
    screened,
)
from qshell.llm.fork import CacheSafeParams
from qshell.plugins import SuggestionCheck
from qshell.telemetry import Telemetry

if TYPE_CHECKING:  # loaded with the first speculation, not at start-up (speculator.py)
    from qshell.followup.speculation import Speculation

BACKGROUND_WORKERS = 2
CONSEQUENTIAL = "consequential"  # the suppression reason: a kind the user never asked for
BACKOFF = "backoff"  # the suppression reason: suggestions this user ignored, asked for less
MARKER = "⚠"
# builds a front-end's suggestion engine around its `on_change(text | None)` callback
FollowupFactory = Callable[[Callable[[str | None], None]], "Followup"]


class Followup:
    """Suggestions for one interactive conversation."""

    def __init__(
        self,
        conversation: Conversation,
        settings: Settings,
        *,
        on_change: Callable[[str | None], None],
        telemetry: Telemetry,
        scheduler: Scheduler | None = None,
    ) -> None:
        self.conversation = conversation
        self.enabled = background_enabled(
            settings.suggestions.enabled, conversation.session.provider.name
        )
        self.cache_cold_tokens = settings.suggestions.cache_cold_tokens
        self.alternatives = settings.suggestions.alternatives
        self._pool = ThreadPoolExecutor(BACKGROUND_WORKERS, thread_name_prefix="qshell-followup")
        self._params: CacheSafeParams | None = None
        # the prediction the last answer ended with, and the params it belongs to
        self._folded: tuple[CacheSafeParams | None, tuple[str, float | None]] | None = None
        self._previous_prompt = ""
        self._accepted: Speculation | None = None
        self._telemetry = telemetry
        self.gate = ConfidenceGate.watching(
            telemetry,
            base=settings.speculation.min_confidence,
            enabled=settings.speculation.gating,
            full=settings.speculation.full_confidence,
            staged=settings.speculation.staged,
            backoff=settings.suggestions.backoff,
        )
        self._turns_unasked = 0  # turns since the last suggestion request (ask_gap)
        self._confidence: dict[str, float | None] = {}  # generated text → its confidence
        self._decided: dict[tuple[int, str], GatingResult] = {}  # one decision a suggestion
        plugins = conversation.session.tool_context.plugins
        self.consequences = ConsequenceRules(
            (*settings.suggestions.consequential, *plugins.consequential_words())
        )
        self._asked: frozenset[str] = frozenset()  # kinds the user's own prompts asked for
        self.flights = SuggestionFlights()
        self.speculator = Speculator(
            conversation,
            settings,
            submit_task=self._pool.submit,
            telemetry=telemetry,
            flights=self.flights,
            may_pipeline=self.may_pipeline,
        )
        self.controller = SuggestionController(
            generate=self._generate,
            submit_task=self._pool.submit,
            scheduler=scheduler or ThreadingScheduler(),
            on_change=on_change,
            on_ready=self._ready,
            telemetry=telemetry,
            log_text=settings.telemetry.log_text,
            delay_s=settings.suggestions.delay_ms / 1000,
        )
        self._unregister = conversation.on_close(self.close)

    def _ready(self, text: str, cycle: int) -> None:
        """A suggestion is ready to show: speculate it while it stays the live one, if
        the confidence gate lets it."""
        decision = self._gate(text, cycle)
        if not decision.speculate:
            return
        self.speculator.start(
            text,
            still_wanted=lambda: self.controller.is_current(cycle, text),
            reads_only=bool(self.consequences.kinds(text)),
            stage=decision.stage,
            kind=decision.kind,
        )

    def _gate(self, text: str, cycle: int) -> GatingResult:
        """The gate's decision on a shown suggestion, made and recorded once."""
        key = (cycle, text)
        decision = self._decided.get(key)
        if decision is None:
            confidence = self._confidence.get(text)
            decision = self._decided[key] = self.gate.decide(confidence, kind_of(text))
            self._telemetry.record(
                "speculation_gate",
                outcome="gated" if not decision.speculate else "speculated",
                reason=decision.reason,
                stage=str(decision.stage),
                kind=decision.kind,
                slow=decision.slow,
                confidence=confidence,
                gated=not decision.speculate,
                threshold=decision.threshold,
                estimate=decision.estimate,
                acceptance_rate=decision.rate,
            )
        return decision

    def _generate(self, cancel: CancelToken) -> SuggestionResult:
        result = self._generated(cancel)
        if len(result.candidates) > self.alternatives:
            result = replace(result, alternatives=result.alternatives[: self.alternatives - 1])
        for candidate in result.candidates:
            self._confidence[candidate.text] = candidate.confidence
        return result

    def _generated(self, cancel: CancelToken) -> SuggestionResult:
        params = self._params
        folded = self._folded
        if folded is not None and folded[0] is params:  # the answer predicted it: no request
            prediction, confidence = folded[1]
            return self._screened(folded_suggestion(prediction, self._previous_prompt, confidence))
        if params is None:
            return SuggestionResult(None, "no_cache_safe_params", None)
        self._turns_unasked += 1
        if self._turns_unasked < self.gate.ask_gap():  # this user ignores them: ask less
            return SuggestionResult(None, BACKOFF, None)
        self._turns_unasked = 0
        model = self.conversation.fast_model or None
        provider = self.conversation.session.provider
        context = SuggestionContext(provider, params, model, self._previous_prompt)
        return self._screened(self.flights.get(context, cancel))

    def _screened(self, result: SuggestionResult) -> SuggestionResult:
        """The plugins' rejection rules, on a suggestion about to be offered."""
        session = self.conversation.session
        mode = str(self.conversation.approval_mode)
        check = SuggestionCheck(self._previous_prompt, mode, session.project_root)
        result = screened(result, session.tool_context.plugins, check)
        return result.narrowed(
            lambda text: CONSEQUENTIAL if self.consequences.kinds(text) - self._asked else None
        )

    def marker(self, text: str | None) -> str:
        """The mark a shown suggestion carries when it would push, deploy, delete…
        (`⚠ push`), else ""."""
        kinds = self.consequences.kinds(text) if text else frozenset()
        return f"{MARKER} {', '.join(sorted(kinds))}" if kinds else ""

    def turn_ended(self, last: Event | None, *, permission_pending: bool = False) -> None:
        """A main turn ended with `last` (its TurnFinished or TurnFailed): maybe suggest."""
        session = self.conversation.session
        failed = isinstance(last, TurnFailed)
        cancelled = isinstance(last, TurnFailed) and last.kind is FailureKind.CANCELLED
        reason = self._guard_reason(
            session,
            failed=failed and not cancelled,
            permission_pending=permission_pending,
            aborted=last is None or cancelled,
        )
        self._params = session.cache_safe
        prediction = last.prediction if isinstance(last, TurnFinished) else None
        confidence = last.prediction_confidence if isinstance(last, TurnFinished) else None
        self._folded = None if prediction is None else (self._params, (prediction, confidence))
        self._confidence.clear()
        self._decided.clear()
        self.controller.turn_finished(reason)

    def may_pipeline(self, fork: Session) -> bool:
        """Whether a suggestion may follow a completed speculation's `fork` once it is
        accepted: the guards `turn_ended` will ask then, asked of the fork now, and
        whether this user's outcomes still warrant a request every turn."""
        return self._guard_reason(fork) is None and self.gate.ask_gap() == 1

    def _guard_reason(
        self,
        session: Session,
        *,
        failed: bool = False,
        permission_pending: bool = False,
        aborted: bool = False,
    ) -> str | None:
        return guard_reason(
            GuardInputs(
                enabled=self.enabled,
                interactive=True,
                assistant_turns=count_assistant_turns(session.history),
                last_turn_failed=failed,
                approval_mode=self.conversation.approval_mode,
                permission_pending=permission_pending,
                last_usage=session.stats.last_usage,
                cache_cold_tokens=self.cache_cold_tokens,
                aborted=aborted,
            )
        )

    def user_typed(self, buffer_text: str) -> None:
        # the speculator first: an emptied line that brings the suggestion back speculates
        # it again, and that start must see the line as it now is
        self.speculator.user_typed(buffer_text)
        self.controller.user_typed(buffer_text)

    def fill(self, method: str, index: int | None = None) -> str | None:
        """Put the suggestion in the input line (Tab, Right…): intent, so a staged
        speculation of it goes on."""
        text = self.controller.fill(method, index)
        if text is not None:
            self.speculator.intent(text, method)
        return text

    def cycle(self, step: int) -> str | None:
        """Show the next (1) or previous (-1) candidate; its speculation follows it once
        it has stayed on screen for the suggestion delay."""
        return self.controller.cycle(step)

    @property
    def choices(self) -> tuple[tuple[str, ...], int]:
        """The live suggestion's candidates and which one is shown."""
        return self.controller.choices

    def dismiss(self) -> None:
        """Esc: the suggestion goes for good; a staged speculation of it then goes on
        only if the user types it."""
        self.controller.dismiss()
        self.speculator.dismissed()

    @property
    def visible_text(self) -> str | None:
        return self.controller.visible_text

    def submitted(self, text: str) -> str | None:
        """The user submitted `text`; notes in the transcript which suggestion was showing."""
        self._previous_prompt = text
        self._asked |= self.consequences.kinds(text)
        shown = self.controller.submitted(text)
        self._accepted = taken = self.speculator.take(text)
        following = self.speculator.next_context(taken) if taken is not None else None
        self.flights.keep_only([following] if following is not None else [])
        if shown is not None:
            self.conversation.session.note(
                "suggestion", shown=shown, accepted=shown.strip() == text.strip()
            )
        return shown

    def prepared(self) -> Iterator[Event] | None:
        """The real turn for the prompt just submitted, when it was already speculated."""
        spec, self._accepted = self._accepted, None
        if spec is None:
            return None
        return self.conversation.run_prepared(self.speculator.prepared_turn(spec))

    def close(self) -> None:
        """End every suggestion and speculation now (their streams close) and start no
        more; the conversation's close calls it. Safe to call again."""
        self._unregister()
        self.controller.cancel()
        self.speculator.cancel()
        self.flights.close()
        self._pool.shutdown(wait=False, cancel_futures=True)
