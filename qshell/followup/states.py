"""What a speculation is and may do, as the speculator and the front-ends name it: `Status`, `RunStep`, `Stage`, `SpeculationOutcome`, `SpeculationLimits`.

Kept apart from speculation.py, which runs one (and so imports the agent loop, the gate and
the overlay), so that what only names a speculation's state — the speculator before its first
run, the REPL — does not load that machinery at start-up. Plain values: any thread.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from qshell.config import SpeculationSettings


class Status(enum.StrEnum):
    RUNNING = "running"
    COMPLETED = "completed"
    BOUNDARY = "boundary"
    LIMIT = "limit"
    FAILED = "failed"
    ABORTED = "aborted"


class RunStep(enum.StrEnum):
    """What an accept found the run doing (`finish_step`), which it lets end first."""

    OVER = "over"  # ended, or never started: nothing to finish
    ROUND = "round"  # a model round streams: it ends, its calls do not start
    BATCH = "batch"  # a tool batch runs: its calls finish, the next round does not start


class Stage(enum.StrEnum):
    """How far a suggestion is speculated before the user shows they want it (gating.py
    decides, speculation.py holds the run): the `stage` of its telemetry events."""

    FULL = "full"  # the whole turn, at once
    STAGED = "staged"  # up to its first expensive point, the rest once the user shows intent
    NONE = "none"  # not at all: the ghost text still shows


class SpeculationOutcome(enum.StrEnum):
    """How a speculation ended for the user: what `accept` returns, or that it was aborted.
    The value is the `outcome` of its telemetry event."""

    ACCEPTED = "accepted"  # its work joined the session (continued live if it stopped early)
    CONFLICT = "conflict"  # a file it wrote changed meanwhile: nothing applied, prompt ran
    FAILED = "error"  # unusable or broken: the prompt ran as a normal turn
    ABORTED = "aborted"  # the user typed or submitted something else
    RERUN = "rerun"  # asked about its commands, the user had the prompt run for real
    DISCARDED = "discarded"  # asked about its commands, the user dropped it (or cancelled)


@dataclass(frozen=True, slots=True)
class SpeculationLimits:
    """How far a speculation may run: model rounds, new messages, seconds, output tokens."""

    max_rounds: int
    max_messages: int
    wall_clock_s: float
    output_tokens: int

    @classmethod
    def of(cls, settings: SpeculationSettings) -> SpeculationLimits:
        return cls(
            max_rounds=settings.max_rounds,
            max_messages=settings.max_messages,
            wall_clock_s=settings.wall_clock_s,
            output_tokens=settings.output_tokens,
        )
