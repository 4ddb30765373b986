"""Guards: whether a next-prompt suggestion may be generated after a main turn, and why not.

Each guard is a named suppression reason, checked in a fixed order by `guard_reason`; the
first that applies wins, `None` means "go ahead". The inputs are plain values the caller
collects from its session and UI state (`GuardInputs`), so this module reads no session,
terminal or network and has no side effects. `background_enabled` resolves the on/off
setting (with the embedded-provider default). Pure functions
over immutable values: safe from any thread.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from qshell.config import DEFAULTS, ApprovalMode
from qshell.llm.messages import Message, Usage

EMBEDDED_PROVIDER = "local"  # the in-process model: a fork costs real local compute
MIN_ASSISTANT_TURNS = 2  # assistant messages in the history before the first suggestion

DISABLED = "disabled"
NON_INTERACTIVE = "non_interactive"
EARLY_CONVERSATION = "early_conversation"
LAST_TURN_ERROR = "last_turn_error"
PLAN_MODE = "plan_mode"
PERMISSION_PENDING = "permission_pending"
CACHE_COLD = "cache_cold"
ABORTED = "aborted"


@dataclass(frozen=True, slots=True, kw_only=True)
class GuardInputs:
    """What the guards look at, collected by the caller right after a main turn ended.

    `last_usage` is the usage of the turn's last model round (None when unknown);
    `cache_cold_tokens` is the threshold in tokens for the cache-cold guard.
    """

    enabled: bool
    interactive: bool
    assistant_turns: int
    last_turn_failed: bool
    approval_mode: ApprovalMode
    permission_pending: bool
    last_usage: Usage | None
    cache_cold_tokens: int = DEFAULTS.suggestions.cache_cold_tokens
    aborted: bool = False


def uncached_tokens(usage: Usage) -> int | None:
    """Input tokens not read from the cache plus output tokens; None if caching is unknown."""
    if usage.cached_tokens is None:
        return None
    return max(usage.prompt_tokens - usage.cached_tokens, 0) + usage.completion_tokens


def _cache_cold(inputs: GuardInputs) -> bool:
    if inputs.last_usage is None:
        return False
    uncached = uncached_tokens(inputs.last_usage)
    return uncached is not None and uncached > inputs.cache_cold_tokens


# The guards in the order they are checked; the first that holds names the reason.
GUARDS: tuple[tuple[str, Callable[[GuardInputs], bool]], ...] = (
    (DISABLED, lambda i: not i.enabled),
    (NON_INTERACTIVE, lambda i: not i.interactive),
    (EARLY_CONVERSATION, lambda i: i.assistant_turns < MIN_ASSISTANT_TURNS),
    (LAST_TURN_ERROR, lambda i: i.last_turn_failed),
    (PLAN_MODE, lambda i: i.approval_mode is ApprovalMode.PLAN),
    (PERMISSION_PENDING, lambda i: i.permission_pending),
    (CACHE_COLD, _cache_cold),
    (ABORTED, lambda i: i.aborted),
)


def guard_reason(inputs: GuardInputs) -> str | None:
    """The first suppression reason that applies, or None when a suggestion may be made."""
    for reason, applies in GUARDS:
        if applies(inputs):
            return reason
    return None


def background_enabled(setting: bool | None, provider_name: str) -> bool:
    """Whether suggestions (or speculation) run: the setting (`QSHELL_SUGGESTIONS` and
    `QSHELL_SPECULATION` are read into it by `load_settings`); unset, on except for the
    embedded `local` provider, whose single-slot server would queue the user's turn behind
    background requests."""
    if setting is not None:
        return setting
    return provider_name != EMBEDDED_PROVIDER


def count_assistant_turns(history: Sequence[Message]) -> int:
    """Assistant messages in the history (tool-call-only rounds count too)."""
    return sum(1 for message in history if message.role == "assistant")
