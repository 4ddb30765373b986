"""The telemetry a suggestion's life records: its outcomes and their fields.

One `suggestion` event per outcome (shown, cycled, filled, accepted, ignored, suppressed),
with why, how, how long after it showed, the seed's length similarity, the suggestion's
length and kind (followup/kinds.py), which candidate it was (`index`, 0 for the first), how
many there were and the model's confidence in it (followup/gating.py learns from both); the
suggestion's and the prompt's text only with `telemetry.logText`. Pure functions: the
controller records what they build.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Sequence
from typing import Any

from qshell.followup.kinds import kind_of


class SuggestionOutcome(enum.StrEnum):
    SHOWN = "shown"
    CYCLED = "cycled"  # another candidate is shown instead (Alt-] / Alt-[, or typing)
    FILLED = "filled"  # Tab / Right / Enter-on-empty put it in the input buffer
    ACCEPTED = "accepted"  # the submitted text equals the suggestion
    IGNORED = "ignored"
    SUPPRESSED = "suppressed"  # a guard or a filter stopped it; `reason` says which


def outcome_fields(
    outcome: SuggestionOutcome,
    *,
    index: int | None,
    candidates: int | None,
    log_text: bool,
    confidence: float | None = None,
    reason: str | None = None,
    method: str | None = None,
    time_ms: int | None = None,
    similarity: float | None = None,
    suggestion: str | None = None,
    prompt: str | None = None,
) -> dict[str, Any]:
    """One outcome's fields; texts only when `log_text`."""
    fields: dict[str, Any] = {
        "outcome": outcome.value,
        "reason": reason,
        "method": method,
        "time_ms": time_ms,
        "similarity": similarity,
        "suggestion_length": len(suggestion) if suggestion is not None else None,
        "kind": kind_of(suggestion) if suggestion is not None else None,
        "index": index,
        "candidates": candidates,
        "confidence": confidence,
    }
    if log_text:
        if suggestion is not None:
            fields["suggestion"] = suggestion
        if prompt is not None:
            fields["prompt"] = prompt
    return fields


def candidates_of(
    first: str, offered: Sequence[tuple[str, float | None]]
) -> tuple[tuple[str, float | None], ...]:
    """`first`'s candidate, then the other offered ones, stripped, without empty ones or
    repeats; each with its confidence."""
    found = {text.strip(): confidence for text, confidence in reversed(offered)}
    kept = [(first, found.get(first))]
    for text, _ in offered:
        text = text.strip()
        if text and all(text != seen for seen, _ in kept):
            kept.append((text, found[text]))
    return tuple(kept)


def similarity(suggestion: str, submitted: str) -> float:
    """The seed's length ratio: len(submitted) / len(suggestion), rounded to 2 decimals.

    Both texts are stripped first, so an accepted suggestion always scores 1.0. Values
    above 1.0 mean the user wrote more than was suggested.
    """
    ratio = len(submitted.strip()) / (len(suggestion.strip()) or 1)
    return math.floor(ratio * 100 + 0.5) / 100  # JavaScript's Math.round, as in the seed


def ms(seconds: float) -> int:
    return max(0, round(seconds * 1000))
