"""Speculator: starts, aborts, hands over and pipelines speculations for one conversation.

When a suggestion is ready to show, `start(text)` creates a private overlay and runs the
suggestion as a Speculation in the background pool (never for a slash command, never when
the overlay directory is unsafe — then speculation is off, with one warning). Typing away
from the suggestion or submitting other text aborts it; submitting the same text hands it to
`prepared_turn`, which the Conversation runs as the real turn (asking first, in default
mode, about the commands it ran: consent.py). When a speculation completes, the next
suggestion is requested from the augmented context at once (pipelining) — unless its answer
already predicted it (agent/prediction.py), so accepting keeps flowing: it goes through the
conversation's SuggestionFlights, where the suggestion asked for after the accepted turn —
the same context — joins it or takes its result; it is not requested when `may_pipeline`
says the guards would suppress it after the turn, and aborting the speculation (or an accept
that does not adopt it) ends it. Each outcome is one local `speculation` telemetry event (an
abort's once the run it cancelled has ended). Verbs are called from the front-end's thread
and never wait for a run: an abort returns at once; runs happen in the pool. A STAGED
start (followup/gating.py) holds its run after the first tool batch: `intent` (the
front-end's Tab) and typing the suggestion's start let it go on; once `dismissed`, the
dwell time no longer does.
"""

from __future__ import annotations

import enum
import logging
import threading
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from qshell.agent.conversation import Conversation, PreparedTurn
from qshell.agent.events import ApplyChoice, Event, Notice, ToolFinished, TurnFinished
from qshell.agent.session import Session
from qshell.cancel import CancelToken
from qshell.config import Settings
from qshell.followup.flights import SuggestionContext, SuggestionFlights
from qshell.followup.guards import background_enabled
from qshell.followup.kinds import OTHER
from qshell.followup.states import SpeculationLimits, SpeculationOutcome, Stage, Status
from qshell.telemetry import Telemetry

if TYPE_CHECKING:  # the run's machinery loads with the first speculation (start-up cost)
    from qshell.followup import applying
    from qshell.followup.acceptance import Acceptance
    from qshell.followup.speculation import Speculation
    from qshell.permissions.runner import MainToolRunner

log = logging.getLogger(__name__)


class AbortReason(enum.StrEnum):
    """Why a running speculation was thrown away (its telemetry `reason`)."""

    REPLACED = "replaced"  # another suggestion is being speculated
    TYPED = "typed"  # the user typed away from the suggestion
    DIFFERENT_PROMPT = "different_prompt"  # the user submitted something else
    CANCELLED = "cancelled"  # the front-end stopped suggestions (/clear, exit)


class Speculator:
    """The speculation side of next-prompt suggestions."""

    def __init__(
        self,
        conversation: Conversation,
        settings: Settings,
        *,
        submit_task: Callable[[Callable[[], None]], object],
        telemetry: Telemetry,
        flights: SuggestionFlights | None = None,
        may_pipeline: Callable[[Session], bool] = lambda fork: True,
    ) -> None:
        """`flights` is shared with whoever asks for suggestions after a turn;
        `may_pipeline(fork)` says whether the guards would let a suggestion follow the
        completed speculation's fork once it is accepted."""
        self.conversation = conversation
        self.enabled = background_enabled(
            settings.speculation.enabled, conversation.session.provider.name
        )
        self.limits = SpeculationLimits.of(settings.speculation)
        self.dwell_s = settings.speculation.dwell_ms / 1000
        self._submit = submit_task
        self._telemetry = telemetry
        self._lock = threading.Lock()
        self._current: Speculation | None = None
        self._typed = ""  # the input line as last typed: a speculation must still match it
        self._flights = flights or SuggestionFlights()
        self._may_pipeline = may_pipeline
        self._pipelined_by: Speculation | None = None  # the last one that asked ahead
        self._warned = False

    # -- lifecycle --------------------------------------------------------------------

    def start(
        self,
        suggestion: str,
        still_wanted: Callable[[], bool] = lambda: True,
        *,
        reads_only: bool = False,
        stage: Stage = Stage.FULL,
        kind: str = OTHER,
    ) -> None:
        """A suggestion is ready to show: speculate it, unless already doing so; a
        consequential one (`reads_only`) stops at its first call that is not a read; a
        STAGED one holds after its first tool batch until the user shows intent (`intent`,
        typing its start) or it has been on screen for `speculation.dwellMs`.

        `still_wanted` says whether the suggestion is still current (not dismissed, replaced
        or submitted over); it is asked again, under the lock `take` and `user_typed` use,
        when the new speculation is about to be registered, so one that went stale while
        it was being set up is dropped before it runs.
        """
        with self._lock:
            current = self._current
            if current is not None and current.prompt == suggestion:
                return
            self._current = None
        if current is not None:
            self._abort(current, AbortReason.REPLACED)
        session = self.conversation.session
        if not self.enabled or suggestion.startswith("/") or session.cache_safe is None:
            return
        from qshell.followup.speculation import Speculation
        from qshell.overlay import Overlay, OverlayUnavailable

        try:
            overlay = Overlay.create(session.project_root, session.tool_context.paths)
        except OverlayUnavailable as exc:
            if not self._warned:
                log.warning("speculation is off: %s", exc)
                self._warned = True
            self.enabled = False
            return
        fast = self.conversation.fast_model or None
        spec = Speculation(
            session,
            suggestion,
            overlay,
            model=fast,
            limits=self.limits,
            reads_only=reads_only,
            dwell_s=self.dwell_s if stage is Stage.STAGED else None,
            kind=kind,
        )
        spec.on_done = self._finished
        with self._lock:
            wanted = self._current is None and suggestion.startswith(self._typed) and still_wanted()
            if wanted:
                self._current = spec
        if not wanted:  # stale, or another thread registered one first: this never ran
            overlay.discard()
            return
        try:
            self._submit(spec.run)
        except RuntimeError:  # the pool is shutting down (the session is closing)
            with self._lock:
                if self._current is spec:
                    self._current = None
            overlay.discard()

    def user_typed(self, buffer_text: str) -> None:
        """Typing away from the suggestion aborts its speculation; typing its start is
        intent, which lets a staged one go on."""
        with self._lock:
            self._typed = buffer_text
            current = self._current
            if current is None or not buffer_text:
                return
            if current.prompt.startswith(buffer_text):
                current.resume("typed")
                return
            self._current = None  # aborted: the suggestion shown again speculates afresh
        self._abort(current, AbortReason.TYPED)

    def intent(self, text: str, why: str) -> None:
        """The user showed they want the suggestion `text` (`why`: "tab"…): a staged
        speculation of it goes on past its hold; one of another candidate (filled before
        its own speculation started) does not."""
        with self._lock:
            current = self._current
        if current is not None and current.prompt == text:
            current.resume(why)

    def dismissed(self) -> None:
        """The suggestion left the screen (Esc): its staged speculation no longer goes
        on by the dwell time, only at intent (typing it)."""
        with self._lock:
            current = self._current
        if current is not None:
            current.withdraw()

    def take(self, submitted: str) -> Speculation | None:
        """The user submitted `submitted`: the matching speculation, else abort any."""
        with self._lock:
            current, self._current = self._current, None
            self._typed = ""  # the line was consumed
        if current is None:
            return None
        if current.prompt.strip() == submitted.strip():
            return current
        self._abort(current, AbortReason.DIFFERENT_PROMPT)
        return None

    def prepared_turn(self, spec: Speculation) -> PreparedTurn:
        """The Conversation-side turn for an accepted speculation (see Conversation.run_prepared)."""
        from qshell.followup import applying, consent
        from qshell.followup.acceptance import APPLYING, LARGE_APPLY, accept, take_over

        def run(
            runner: MainToolRunner, cancel: CancelToken, checkpoint: Callable[[list[str]], None]
        ) -> Iterator[Event]:
            session = self.conversation.session
            ctx = session.tool_context
            step = spec.finish_step()
            quiet = consent.may_ask(spec, runner, ctx)  # the question comes before anything
            shown = yield from take_over(spec, step, cancel, show=not quiet)
            choice = yield from consent.choose(spec, runner, ctx, cancel, quiet=quiet)
            if choice is not ApplyChoice.APPLY:
                self._drop_pipelined(spec)
                self._record(spec, consent.declined_outcome(choice), None)
                router = self.conversation.router
                yield from consent.declined(spec, choice, session, runner, cancel, router)
                return
            router = self.conversation.router

            def accepting(progress: applying.Progress | None) -> Acceptance:
                return accept(
                    spec,
                    session,
                    runner,
                    cancel,
                    on_apply=checkpoint,
                    shown=shown,
                    router=router,
                    progress=progress,
                )

            count = len(spec.overlay.written) if spec.usable else 0
            if count >= LARGE_APPLY:  # seconds of work: its progress on screen meanwhile
                yield Notice(APPLYING.format(count=count))
                acceptance = yield from applying.beside(accepting)
            else:
                acceptance = accepting(None)
            if acceptance.outcome is not SpeculationOutcome.ACCEPTED:
                self._drop_pipelined(spec)  # the turn runs live: its context never comes
            self._record(spec, acceptance.outcome, acceptance.saved_s)
            yield from acceptance.events

        return run

    def next_context(self, spec: Speculation) -> SuggestionContext | None:
        """The context of the suggestion that follows `spec` once it is accepted whole
        (what its pipelining asks for); None before it has a round to fork from."""
        params = spec.fork.cache_safe
        if params is None:
            return None
        model = self.conversation.fast_model or None
        return SuggestionContext(spec.fork.provider, params, model, spec.prompt)

    def cancel(self) -> None:
        with self._lock:
            current, self._current = self._current, None
        if current is not None:
            self._abort(current, AbortReason.CANCELLED)

    # -- background -------------------------------------------------------------------------

    def _finished(self, spec: Speculation) -> None:
        """Pipelining: a completed speculation's next suggestion is requested right away,
        unless the guards would suppress it after the accepted turn. The result stays in
        the flights for the caller after the turn; this run only waits for it."""
        context = self.next_context(spec)
        if spec.status is not Status.COMPLETED or context is None:
            return
        end = spec.events[-1] if spec.events else None
        if isinstance(end, TurnFinished) and end.prediction is not None:
            return  # its answer predicted the next prompt: no request to make ahead
        if not self._may_pipeline(spec.fork):
            return
        with self._lock:
            self._pipelined_by = spec
        self._flights.get(context, CancelToken(), still_wanted=lambda: not spec.aborted)

    def _abort(self, spec: Speculation, why: AbortReason) -> None:
        """Cancel `spec` without waiting; its outcome is recorded once its run has ended."""
        spec.abort(then=lambda: self._record(spec, SpeculationOutcome.ABORTED, None, reason=why))
        self._drop_pipelined(spec)

    def _drop_pipelined(self, spec: Speculation) -> None:
        """End the suggestion `spec` pipelined (if it did): nobody will ask for it."""
        with self._lock:
            pipelined = spec is self._pipelined_by
        if pipelined:
            context = self.next_context(spec)
            if context is not None:
                self._flights.drop(context)

    def _record(
        self,
        spec: Speculation,
        outcome: SpeculationOutcome,
        saved_s: float | None,
        reason: AbortReason | None = None,
    ) -> None:
        boundary = spec.boundary
        self._telemetry.record(
            "speculation",
            outcome=str(outcome if spec.status is not Status.FAILED else SpeculationOutcome.FAILED),
            reason=str(reason) if reason else None,
            status=str(spec.status),
            boundary_type=str(boundary.type) if boundary else None,
            boundary_tool=boundary.tool if boundary else None,
            rounds=spec.fork.stats.rounds,
            tools_executed=sum(isinstance(e, ToolFinished) for e in spec.events),
            duration_ms=int(1000 * ((spec.completed_at or spec.clock()) - spec.started_at)),
            saved_ms=int(1000 * saved_s)
            if outcome is SpeculationOutcome.ACCEPTED and saved_s is not None
            else None,
            pipelined=spec is self._pipelined_by,
            kind=spec.kind,
            stage=str(spec.stage),
            resumed_by=spec.resumed_by,
            held_ms=int(1000 * spec.held_s),
            first_step_ms=None if spec.first_step_s is None else int(1000 * spec.first_step_s),
        )
