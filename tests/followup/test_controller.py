"""SuggestionController: the display state machine, driven by a fake clock and scheduler.

Nothing here sleeps or reads the wall clock: `FakeScheduler.advance()` moves the fake
clock and runs the timers that fall due, and generation runs either at once
(`run_now`) or when the test says so (`ManualRunner`). Events are read back from a real
telemetry file.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from threading import Event
from typing import Any

import pytest

from qshell.cancel import CancelToken
from qshell.followup.controller import (
    ACCEPT_DEBOUNCE_MS,
    SUGGESTION_DELAY_MS,
    SuggestionController,
    SuggestionState,
    ThreadingScheduler,
    similarity,
)
from qshell.followup.suggestion import Candidate
from qshell.telemetry import Telemetry, read_events

DELAY_S = SUGGESTION_DELAY_MS / 1000
DEBOUNCE_S = ACCEPT_DEBOUNCE_MS / 1000


class FakeClock:
    def __init__(self, start: float = 1000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now


class FakeTimer:
    def __init__(self, due: float, fn: Callable[[], None]) -> None:
        self.due, self.fn = due, fn
        self.cancelled = self.fired = False

    def cancel(self) -> None:
        self.cancelled = True


class FakeScheduler:
    """Timers that fire only inside `advance()`, in due order, with the clock set to their due time."""

    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock
        self.timers: list[FakeTimer] = []

    def call_later(self, delay_s: float, fn: Callable[[], None]) -> FakeTimer:
        timer = FakeTimer(self.clock.now + delay_s, fn)
        self.timers.append(timer)
        return timer

    @property
    def waiting(self) -> list[FakeTimer]:
        return [t for t in self.timers if not (t.cancelled or t.fired)]

    def advance(self, seconds: float) -> None:
        target = self.clock.now + seconds
        while due := sorted((t for t in self.waiting if t.due <= target), key=lambda t: t.due):
            timer = due[0]
            self.clock.now = max(self.clock.now, timer.due)
            timer.fired = True
            timer.fn()
        self.clock.now = target


class ManualRunner:
    """A task pool that runs submitted work only when the test calls `run_all()`."""

    def __init__(self) -> None:
        self.tasks: list[Callable[[], None]] = []

    def __call__(self, fn: Callable[[], None]) -> None:
        self.tasks.append(fn)

    def run_all(self) -> None:
        tasks, self.tasks = self.tasks, []
        for task in tasks:
            task()


def run_now(fn: Callable[[], None]) -> None:
    fn()


@dataclass(frozen=True)
class Result:
    text: str | None
    reason: str | None = None
    alternatives: tuple[str, ...] = ()
    confidence: float | None = None

    @property
    def candidates(self) -> list[Candidate]:
        texts = (self.text, *self.alternatives) if self.text is not None else ()
        return [Candidate(text, self.confidence) for text in texts]


class Generator:
    """Returns queued results (the last one repeats) and keeps every token it was given."""

    def __init__(self, *results: Result) -> None:
        self.results = list(results) or [Result("run the tests")]
        self.tokens: list[CancelToken] = []

    def __call__(self, token: CancelToken) -> Result:
        self.tokens.append(token)
        return self.results.pop(0) if len(self.results) > 1 else self.results[0]


class Harness:
    def __init__(
        self,
        tmp_path: Path,
        *results: Result,
        runner: Callable[[Callable[[], None]], object] = run_now,
        log_text: bool = False,
        telemetry: Telemetry | None = None,
        on_change: Callable[[str | None], None] | None = None,
    ) -> None:
        self.clock = FakeClock()
        self.scheduler = FakeScheduler(self.clock)
        self.generator = Generator(*results)
        self.changes: list[str | None] = []
        self.ready: list[str] = []
        self.cycles: list[int] = []
        self.path = tmp_path / "events.jsonl"
        self.controller = SuggestionController(
            generate=self.generator,
            submit_task=runner,
            scheduler=self.scheduler,
            clock=self.clock,
            on_change=on_change or self.changes.append,
            on_ready=self.on_ready,
            telemetry=telemetry or Telemetry(self.path, clock=lambda: 1.5),
            log_text=log_text,
        )

    def on_ready(self, text: str, cycle: int) -> None:
        self.ready.append(text)
        self.cycles.append(cycle)

    def events(self) -> list[dict[str, Any]]:
        return read_events(self.path)

    def outcomes(self) -> list[str]:
        return [event["outcome"] for event in self.events()]

    def show(self) -> None:
        self.controller.turn_finished()
        self.scheduler.advance(DELAY_S)
        assert self.controller.visible_text is not None


@pytest.fixture
def h(tmp_path: Path) -> Harness:
    return Harness(tmp_path)


# Delay and replacement


def test_suggestion_is_not_visible_before_the_delay_and_is_visible_after(h: Harness) -> None:
    h.controller.turn_finished()
    assert h.controller.state is SuggestionState.PENDING
    h.scheduler.advance(DELAY_S - 0.001)
    assert h.controller.visible_text is None
    assert h.changes == []
    h.scheduler.advance(0.001)
    assert h.controller.state is SuggestionState.SHOWN
    assert h.controller.visible_text == "run the tests"
    assert h.changes == ["run the tests"]


def test_delay_counts_from_the_end_of_the_turn_not_from_the_result(tmp_path: Path) -> None:
    runner = ManualRunner()
    h = Harness(tmp_path, runner=runner)
    h.controller.turn_finished()
    h.clock.now += 0.250  # generation took 250 ms
    runner.run_all()
    h.scheduler.advance(0.049)
    assert h.controller.visible_text is None
    h.scheduler.advance(0.001)
    assert h.controller.visible_text == "run the tests"


def test_a_slow_generation_is_shown_as_soon_as_it_arrives(tmp_path: Path) -> None:
    runner = ManualRunner()
    h = Harness(tmp_path, runner=runner)
    h.controller.turn_finished()
    h.clock.now += 2.0
    runner.run_all()
    assert h.controller.visible_text == "run the tests"
    assert h.scheduler.timers == []
    shown = h.events()[0]
    assert (shown["outcome"], shown["time_ms"]) == ("shown", 2000)


def test_a_new_turn_replaces_a_pending_suggestion(tmp_path: Path) -> None:
    h = Harness(tmp_path, Result("first"), Result("second"))
    h.controller.turn_finished()
    h.scheduler.advance(0.1)
    h.controller.turn_finished()
    h.scheduler.advance(DELAY_S)
    assert h.changes == ["second"]
    assert h.outcomes() == ["shown"]


def test_a_new_turn_clears_a_shown_suggestion_at_once(tmp_path: Path) -> None:
    h = Harness(tmp_path, Result("first"), Result(None, "too_long"))
    h.show()
    h.controller.turn_finished()
    assert h.changes == ["first", None]
    assert h.controller.state is SuggestionState.HIDDEN
    assert h.outcomes() == ["shown", "ignored", "suppressed"]
    assert h.events()[1]["reason"] == "new_turn"


def test_a_null_result_shows_nothing_and_records_suppressed_with_its_reason(
    tmp_path: Path,
) -> None:
    h = Harness(tmp_path, Result(None, "evaluative"))
    h.controller.turn_finished()
    h.scheduler.advance(1.0)
    assert h.changes == []
    assert h.controller.state is SuggestionState.HIDDEN
    [event] = h.events()
    assert (event["outcome"], event["reason"]) == ("suppressed", "evaluative")


def test_a_guard_reason_suppresses_without_generating_or_scheduling(h: Harness) -> None:
    h.controller.turn_finished(suppressed_reason="disabled")
    h.scheduler.advance(1.0)
    assert h.generator.tokens == []
    assert h.scheduler.timers == []
    assert h.changes == []
    [event] = h.events()
    assert event == {
        "event": "suggestion",
        "timestamp": 1.5,
        "outcome": "suppressed",
        "reason": "disabled",
        "method": None,
        "time_ms": None,
        "similarity": None,
        "suggestion_length": None,
        "kind": None,
        "index": None,
        "candidates": None,
        "confidence": None,
    }


def test_a_failing_generation_is_suppressed_as_an_error(tmp_path: Path) -> None:
    def explode(token: CancelToken) -> Result:
        raise RuntimeError("boom")

    h = Harness(tmp_path)
    h.controller._generate = explode
    h.controller.turn_finished()
    assert h.changes == []
    assert [(e["outcome"], e["reason"]) for e in h.events()] == [("suppressed", "error")]


# Fill (Tab, Right, Enter on an empty line)


def test_fill_returns_the_text_hides_the_ghost_and_records_filled(h: Harness) -> None:
    h.show()
    h.clock.now += 1.2
    assert h.controller.fill("tab") == "run the tests"
    assert h.changes == ["run the tests", None]
    assert h.controller.state is SuggestionState.HIDDEN
    filled = h.events()[-1]
    assert (filled["outcome"], filled["method"], filled["time_ms"]) == ("filled", "tab", 1200)
    assert filled["suggestion_length"] == len("run the tests")


def test_fill_does_not_submit_anything(h: Harness) -> None:
    h.show()
    h.controller.fill("enter")
    assert h.outcomes() == ["shown", "filled"]


def test_fill_with_nothing_shown_returns_none(h: Harness) -> None:
    assert h.controller.fill("enter") is None
    assert h.events() == []


def test_fill_recovers_when_on_change_throws(tmp_path: Path) -> None:
    def broken(text: str | None) -> None:
        raise RuntimeError("renderer crashed")

    h = Harness(tmp_path, on_change=broken)
    h.show()
    assert h.controller.fill("tab") == "run the tests"
    h.clock.now += DEBOUNCE_S
    h.controller.user_typed("run the tests")
    h.controller.user_typed("")
    assert h.controller.fill("tab") == "run the tests"
    assert h.outcomes() == ["shown", "filled", "filled"]


def test_double_fill_is_blocked_by_the_debounce_and_released_after_it(h: Harness) -> None:
    h.show()
    assert h.controller.fill("tab") == "run the tests"
    h.controller.user_typed("run the tests")
    h.controller.user_typed("")  # Ctrl-U at once: the ghost comes back
    assert h.controller.visible_text == "run the tests"
    h.clock.now += DEBOUNCE_S - 0.001
    assert h.controller.fill("tab") is None
    h.clock.now += 0.001
    assert h.controller.fill("tab") == "run the tests"


def test_fill_during_the_pending_window_uses_the_pending_text(h: Harness) -> None:
    h.controller.turn_finished()
    h.scheduler.advance(0.1)
    assert h.controller.fill("enter") == "run the tests"
    h.scheduler.advance(1.0)
    assert h.changes == []  # the ghost never appears over the filled buffer
    [filled] = h.events()
    assert (filled["outcome"], filled["method"], filled["time_ms"]) == ("filled", "enter", None)
    assert h.controller.submitted("run the tests") == "run the tests"
    assert h.outcomes() == ["filled", "accepted"]


def test_fill_never_replaces_text_the_user_typed(h: Harness) -> None:
    h.show()
    h.controller.user_typed("fix the bug")
    assert h.controller.fill("tab") is None


def test_fill_after_typing_over_and_emptying_the_buffer_fills_the_restored_text(
    h: Harness,
) -> None:
    h.show()
    h.controller.user_typed("x")
    h.controller.user_typed("")
    assert h.controller.fill("right") == "run the tests"


# Typing, Esc, and restoring on an empty buffer


def test_typing_hides_the_suggestion_and_emptying_the_buffer_restores_it(h: Harness) -> None:
    h.show()
    h.controller.user_typed("n")
    h.controller.user_typed("no")
    assert h.controller.visible_text is None
    h.controller.user_typed("")
    assert h.controller.visible_text == "run the tests"
    assert h.changes == ["run the tests", None, "run the tests"]
    assert h.outcomes() == ["shown"]


def test_esc_hides_the_suggestion_for_good_and_records_ignored(h: Harness) -> None:
    h.show()
    h.clock.now += 0.5
    h.controller.dismiss()
    h.controller.user_typed("x")
    h.controller.user_typed("")
    assert h.controller.visible_text is None
    assert h.changes == ["run the tests", None]
    ignored = h.events()[-1]
    assert (ignored["outcome"], ignored["reason"], ignored["time_ms"]) == (
        "ignored",
        "dismissed",
        500,
    )
    assert h.controller.submitted("x") is None
    assert h.outcomes() == ["shown", "ignored"]


def test_ignored_is_not_recorded_twice(h: Harness) -> None:
    h.show()
    h.controller.dismiss()
    h.controller.dismiss()
    h.controller.cancel()
    assert h.outcomes() == ["shown", "ignored"]


def test_dismiss_with_nothing_to_dismiss_records_nothing(h: Harness) -> None:
    h.controller.dismiss()
    assert h.events() == []


def test_typing_cancels_the_generation_token(tmp_path: Path) -> None:
    runner = ManualRunner()
    h = Harness(tmp_path, runner=runner)
    h.controller.turn_finished()
    h.controller.user_typed("w")
    runner.run_all()
    [token] = h.generator.tokens
    assert token.cancelled


def test_typing_cancels_the_token_while_generate_is_running(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    seen: list[CancelToken] = []

    def generate(token: CancelToken) -> Result:
        seen.append(token)
        h.controller.user_typed("w")  # the user types while the request is in flight
        return Result("run the tests")

    h.controller._generate = generate
    h.controller.turn_finished()
    assert seen[0].cancelled
    h.scheduler.advance(1.0)
    assert h.changes == []
    assert [(e["outcome"], e["reason"]) for e in h.events()] == [("suppressed", "aborted")]


def test_a_generation_finishing_after_the_user_typed_is_discarded(tmp_path: Path) -> None:
    runner = ManualRunner()
    h = Harness(tmp_path, runner=runner)
    h.controller.turn_finished()
    h.controller.user_typed("w")
    runner.run_all()
    h.controller.user_typed("")
    h.scheduler.advance(1.0)
    assert h.changes == []
    assert h.controller.state is SuggestionState.HIDDEN


def test_typing_during_the_pending_window_cancels_the_show(h: Harness) -> None:
    h.controller.turn_finished()
    h.scheduler.advance(0.1)
    h.controller.user_typed("w")
    h.scheduler.advance(1.0)
    assert h.changes == []
    assert h.controller.submitted("w") is None  # never seen, nothing recorded
    assert h.events() == []


def test_emptying_the_buffer_inside_the_delay_waits_for_the_rest_of_it(h: Harness) -> None:
    h.controller.turn_finished()
    h.scheduler.advance(0.1)
    h.controller.user_typed("w")
    h.controller.user_typed("")
    assert h.controller.visible_text is None
    h.scheduler.advance(DELAY_S - 0.1)
    assert h.controller.visible_text == "run the tests"


def test_no_suggestion_is_generated_while_the_user_has_typed_ahead(h: Harness) -> None:
    h.controller.user_typed("next question")
    h.controller.turn_finished()
    assert h.generator.tokens == []
    assert [(e["outcome"], e["reason"]) for e in h.events()] == [("suppressed", "typing")]


# Submitting


def test_submitted_returns_the_shown_suggestion_and_records_accepted(h: Harness) -> None:
    h.show()
    h.controller.fill("tab")
    h.clock.now += 0.8
    assert h.controller.submitted("run the tests ") == "run the tests"
    accepted = h.events()[-1]
    assert accepted["outcome"] == "accepted"
    assert accepted["similarity"] == 1.0
    assert accepted["method"] == "tab"
    assert accepted["time_ms"] == 800
    assert accepted["reason"] is None
    assert h.controller.state is SuggestionState.HIDDEN


def test_typing_the_suggestion_exactly_counts_as_accepted(h: Harness) -> None:
    h.show()
    h.controller.user_typed("run the tests")
    h.controller.submitted("run the tests")
    assert h.outcomes() == ["shown", "accepted"]
    assert h.events()[-1]["method"] == "typed"


def test_submitting_other_text_returns_the_suggestion_and_records_ignored(h: Harness) -> None:
    h.show()
    h.controller.user_typed("no")
    assert h.controller.submitted("no, first commit") == "run the tests"
    ignored = h.events()[-1]
    assert (ignored["outcome"], ignored["reason"]) == ("ignored", "different_text")
    assert ignored["similarity"] == round(len("no, first commit") / len("run the tests"), 2)


def test_editing_a_filled_suggestion_is_recorded_as_ignored_with_its_fill_method(
    h: Harness,
) -> None:
    h.show()
    h.controller.fill("right")
    h.controller.user_typed("run the tests again")
    h.controller.submitted("run the tests again")
    assert [(e["outcome"], e["method"]) for e in h.events()[1:]] == [
        ("filled", "right"),
        ("ignored", "right"),
    ]


def test_submitted_without_a_suggestion_returns_none_and_records_nothing(h: Harness) -> None:
    assert h.controller.submitted("hello") is None
    assert h.events() == []


def test_after_submit_the_suggestion_does_not_come_back(h: Harness) -> None:
    h.show()
    h.controller.user_typed("x")
    h.controller.submitted("x")
    h.controller.user_typed("y")
    h.controller.user_typed("")
    assert h.controller.visible_text is None
    assert h.controller.submitted("y") is None


def test_submit_resets_the_fill_debounce(h: Harness) -> None:
    h.show()
    h.controller.fill("tab")
    h.controller.submitted("run the tests")
    h.show()
    assert h.controller.fill("tab") == "run the tests"


# Cancel, cleanup and failures


def test_cancel_prevents_a_pending_show(h: Harness) -> None:
    h.controller.turn_finished()
    h.controller.cancel()
    assert all(t.cancelled for t in h.scheduler.timers)
    h.scheduler.advance(1.0)
    assert h.changes == []
    assert h.events() == []


def test_cancel_stops_a_generation_in_flight(tmp_path: Path) -> None:
    runner = ManualRunner()
    h = Harness(tmp_path, runner=runner)
    h.controller.turn_finished()
    h.controller.cancel()
    runner.run_all()
    assert h.generator.tokens[0].cancelled
    h.scheduler.advance(1.0)
    assert h.changes == []


def test_cancel_while_shown_hides_and_records_ignored(h: Harness) -> None:
    h.show()
    h.controller.cancel()
    assert h.changes == ["run the tests", None]
    assert [(e["outcome"], e["reason"]) for e in h.events()] == [
        ("shown", None),
        ("ignored", "cancelled"),
    ]


def test_cancel_resets_the_fill_debounce(h: Harness) -> None:
    h.show()
    h.controller.fill("tab")
    h.controller.cancel()
    h.show()
    assert h.controller.fill("tab") == "run the tests"


def test_a_telemetry_error_does_not_block_the_state_change(tmp_path: Path) -> None:
    class BrokenTelemetry(Telemetry):
        def record(self, event: str, /, **fields: Any) -> None:
            raise OSError("disk on fire")

    h = Harness(tmp_path, telemetry=BrokenTelemetry(None))
    h.show()
    h.controller.dismiss()
    assert h.controller.state is SuggestionState.HIDDEN
    assert h.changes == ["run the tests", None]


# Telemetry fields


def test_text_is_not_logged_unless_log_text_is_on(h: Harness) -> None:
    h.show()
    h.controller.fill("tab")
    h.controller.submitted("run the tests")
    content = h.path.read_text()
    assert "run the tests" not in content
    assert all("suggestion" not in e and "prompt" not in e for e in h.events())


def test_log_text_adds_the_suggestion_and_the_prompt(tmp_path: Path) -> None:
    h = Harness(tmp_path, log_text=True)
    h.show()
    h.controller.submitted("do something else")
    shown, ignored = h.events()
    assert shown["suggestion"] == "run the tests"
    assert "prompt" not in shown
    assert (ignored["suggestion"], ignored["prompt"]) == ("run the tests", "do something else")


def test_shown_records_the_time_since_the_turn_ended(h: Harness) -> None:
    h.show()
    [shown] = h.events()
    assert (shown["outcome"], shown["time_ms"], shown["suggestion_length"]) == (
        "shown",
        SUGGESTION_DELAY_MS,
        len("run the tests"),
    )


def test_similarity_is_the_seeds_length_ratio_rounded_to_two_decimals() -> None:
    assert similarity("run the tests", "run the tests") == 1.0
    assert similarity("abcd", "ab") == 0.5
    assert similarity("abc", "abcd") == 1.33
    assert similarity("abcdefgh", "a") == 0.13  # 0.125 rounds half up, like Math.round
    assert similarity("", "abc") == 3.0


def test_negative_delays_are_rejected_with_their_values(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="-1"):
        SuggestionController(
            generate=Generator(),
            submit_task=run_now,
            scheduler=FakeScheduler(FakeClock()),
            on_change=lambda text: None,
            telemetry=Telemetry.disabled(),
            delay_s=-1,
        )


def test_threading_scheduler_timer_can_be_cancelled_before_it_fires() -> None:
    fired: list[bool] = []
    timer = ThreadingScheduler().call_later(3600.0, lambda: fired.append(True))
    timer.cancel()
    assert fired == []


def test_works_with_a_real_thread_pool_and_threading_scheduler(tmp_path: Path) -> None:
    shown = Event()
    changes: list[str | None] = []

    def on_change(text: str | None) -> None:
        changes.append(text)
        shown.set()

    with ThreadPoolExecutor(max_workers=1) as pool:
        controller = SuggestionController(
            generate=Generator(),
            submit_task=pool.submit,
            scheduler=ThreadingScheduler(),
            on_change=on_change,
            telemetry=Telemetry(tmp_path / "events.jsonl"),
            delay_s=0.02,
        )
        controller.turn_finished()
        assert shown.wait(timeout=10)  # a bound for a stuck run, not a timing assertion
    assert changes == ["run the tests"]
    assert controller.submitted("run the tests") == "run the tests"
    assert [e["outcome"] for e in read_events(tmp_path / "events.jsonl")] == [
        "shown",
        "accepted",
    ]


# Ready to speculate


def test_a_generated_suggestion_is_ready_before_its_delay_has_passed(h: Harness) -> None:
    h.controller.turn_finished()
    assert h.controller.state is SuggestionState.PENDING and h.changes == []
    assert h.ready == ["run the tests"]  # speculation may start while the ghost still waits
    h.scheduler.advance(DELAY_S)
    assert h.changes == ["run the tests"] and h.ready == ["run the tests"]


def test_emptying_the_line_makes_a_typed_over_suggestion_ready_again(h: Harness) -> None:
    h.show()
    h.controller.user_typed("x")
    h.controller.user_typed("")
    assert h.ready == ["run the tests", "run the tests"]


def test_a_suppressed_or_dropped_suggestion_is_never_ready(tmp_path: Path) -> None:
    runner = ManualRunner()
    h = Harness(tmp_path, Result(None, "too_long"), runner=runner)
    h.controller.turn_finished()
    runner.run_all()
    h.controller.turn_finished("plan_mode")
    h.controller.turn_finished()
    h.controller.user_typed("typing")  # dropped: typed over while it was generated
    runner.run_all()
    assert h.ready == []


def test_a_ready_suggestion_stays_current_until_its_cycle_ends(h: Harness) -> None:
    h.controller.turn_finished()
    cycle = h.cycles[-1]
    assert h.controller.is_current(cycle)
    h.controller.user_typed("x")  # typed over: hidden, but it comes back on an empty line
    assert h.controller.is_current(cycle)
    h.controller.user_typed("")
    assert h.cycles == [cycle, cycle]
    h.controller.submitted("something else")
    assert not h.controller.is_current(cycle)


@pytest.mark.parametrize("end", ["dismiss", "cancel", "new_turn"])
def test_a_dismissed_cancelled_or_replaced_suggestion_is_no_longer_current(
    h: Harness, end: str
) -> None:
    h.controller.turn_finished()
    cycle = h.cycles[-1]
    {"dismiss": h.controller.dismiss, "cancel": h.controller.cancel}.get(
        end, h.controller.turn_finished
    )()
    assert not h.controller.is_current(cycle)


def test_typing_the_start_of_the_suggestion_keeps_it_shown(h: Harness) -> None:
    h.show()
    for typed in ("r", "ru", "run th"):
        h.controller.user_typed(typed)
        assert h.controller.visible_text == "run the tests"
    h.controller.user_typed("run x")  # no longer its start: hidden, back on an empty line
    assert h.controller.visible_text is None
    h.controller.user_typed("")
    assert h.controller.visible_text == "run the tests"


# Alternatives


THREE = Result("run the tests", alternatives=("commit this", "show the diff"))


def test_cycling_shows_each_candidate_in_turn_both_ways_and_wraps(tmp_path: Path) -> None:
    h = Harness(tmp_path, THREE)
    h.show()
    assert h.controller.choices == (("run the tests", "commit this", "show the diff"), 0)
    assert h.controller.cycle(1) == "commit this"
    assert h.controller.cycle(1) == "show the diff"
    assert h.controller.cycle(1) == "run the tests"
    assert h.controller.cycle(-1) == "show the diff"
    assert h.controller.visible_text == "show the diff"
    shown = ["run the tests", "commit this", "show the diff", "run the tests", "show the diff"]
    assert h.changes == shown
    cycled = [e for e in h.events() if e["outcome"] == "cycled"]
    assert [(e["index"], e["candidates"]) for e in cycled] == [(1, 3), (2, 3), (0, 3), (2, 3)]


def test_a_cycled_to_candidate_is_ready_only_after_it_stayed_shown_for_the_delay(
    tmp_path: Path,
) -> None:
    h = Harness(tmp_path, THREE)
    h.show()
    assert h.ready == ["run the tests"]
    h.controller.cycle(1)  # "commit this", passed over at once
    h.scheduler.advance(DELAY_S / 2)
    h.controller.cycle(1)  # "show the diff": its own full delay starts now
    h.scheduler.advance(DELAY_S - 0.001)
    assert h.ready == ["run the tests"]
    h.scheduler.advance(0.001)
    assert h.ready == ["run the tests", "show the diff"]
    cycle = h.cycles[-1]
    assert h.controller.is_current(cycle, "show the diff")
    assert not h.controller.is_current(cycle, "run the tests")


def test_accepting_a_cycled_to_candidate_records_its_index(tmp_path: Path) -> None:
    h = Harness(tmp_path, THREE)
    h.show()
    h.controller.cycle(1)
    assert h.controller.fill("tab") == "commit this"
    assert h.controller.submitted("commit this") == "commit this"
    accepted = h.events()[-1]
    assert (accepted["outcome"], accepted["index"], accepted["candidates"]) == ("accepted", 1, 3)


def test_typing_another_candidates_words_by_hand_accepts_it(tmp_path: Path) -> None:
    h = Harness(tmp_path, THREE)
    h.show()
    h.controller.user_typed("show the diff")
    h.controller.submitted("show the diff")
    accepted = h.events()[-1]
    assert (accepted["outcome"], accepted["index"]) == ("accepted", 2)


def test_typing_the_start_of_another_candidate_switches_to_it(tmp_path: Path) -> None:
    h = Harness(tmp_path, THREE)
    h.show()
    h.controller.user_typed("c")
    assert h.controller.visible_text == "commit this"
    assert h.controller.cycle(1) is None  # only one candidate starts with "c"
    h.scheduler.advance(DELAY_S)
    assert h.ready == ["run the tests", "commit this"]
    h.controller.user_typed("cx")
    assert h.controller.visible_text is None  # fits none: hidden as before


def test_cycling_does_nothing_with_one_candidate_or_no_ghost(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    assert h.controller.cycle(1) is None
    h.show()
    assert h.controller.cycle(1) is None
    assert h.controller.choices == (("run the tests",), 0)
    h.controller.dismiss()
    assert h.controller.cycle(1) is None
    assert h.controller.choices == ((), 0)


def test_a_dismissed_suggestions_cycled_candidate_never_becomes_ready(tmp_path: Path) -> None:
    h = Harness(tmp_path, THREE)
    h.show()
    h.controller.cycle(1)
    h.controller.dismiss()
    h.scheduler.advance(DELAY_S * 2)
    assert h.ready == ["run the tests"]


def test_fill_by_index_takes_that_candidate_and_out_of_range_takes_nothing(
    tmp_path: Path,
) -> None:
    h = Harness(tmp_path, THREE)
    h.show()
    assert h.controller.fill("dot", index=5) is None
    assert h.controller.fill("dot", index=2) == "show the diff"
    filled = h.events()[-1]
    assert (filled["outcome"], filled["index"]) == ("filled", 2)
