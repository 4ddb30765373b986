"""Guards: whether a next-prompt suggestion may be generated after a main turn, and why not.

Each guard is a named suppression reason, checked in a fixed order by `guard_reason`; the
first that applies wins, `None` means "go ahead". The inputs are plain values the caller
collects from its session and UI state (`GuardInputs`), so this module reads no session,
terminal or network and has no side effects. `suggestions_enabled` resolves the on/off
switch (setting, `QSHELL_SUGGESTIONS` override, embedded-provider default). Pure functions
over immutable values: safe from any thread.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from qshell.config import ApprovalMode
from qshell.errors import ConfigError
from qshell.llm.messages import Message, Usage

ENV_SWITCH = "QSHELL_SUGGESTIONS"
ENV_ON = frozenset({"1", "true", "yes", "on"})
ENV_OFF = frozenset({"0", "false", "no", "off"})
EMBEDDED_PROVIDER = "local"  # the in-process model: a fork costs real local compute
MIN_ASSISTANT_TURNS = 2  # assistant messages in the history before the first suggestion
DEFAULT_CACHE_COLD_TOKENS = 10_000  # uncached input + output tokens of the last request

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
    cache_cold_tokens: int = DEFAULT_CACHE_COLD_TOKENS
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


def env_switch(environ: Mapping[str, str], name: str) -> bool | None:
    """An on/off environment variable (1/0, true/false, yes/no, on/off); None when unset.
    An unrecognised value raises ConfigError naming the variable."""
    raw = environ.get(name, "").strip().lower()
    if raw in ENV_ON:
        return True
    if raw in ENV_OFF:
        return False
    if raw:
        raise ConfigError(
            f"{name} must be 1 or 0 (or true/false, yes/no, on/off), not {environ[name]!r}"
        )
    return None


def suggestions_enabled(
    setting: bool | None, environ: Mapping[str, str], provider_name: str
) -> bool:
    """The effective switch: `QSHELL_SUGGESTIONS` (0/1/false/true…) wins over everything,
    then an explicit setting; unset, they are off for the embedded `local` provider (its
    single-slot server would queue the user's turn behind them) and on otherwise."""
    return background_enabled(setting, env_switch(environ, ENV_SWITCH), provider_name)


def background_enabled(setting: bool | None, switch: bool | None, provider_name: str) -> bool:
    """An environment switch, else the setting, else on unless the provider is `local`."""
    if switch is not None:
        return switch
    if setting is not None:
        return setting
    return provider_name != EMBEDDED_PROVIDER


def count_assistant_turns(history: Sequence[Message]) -> int:
    """Assistant messages in the history (tool-call-only rounds count too)."""
    return sum(1 for message in history if message.role == "assistant")
