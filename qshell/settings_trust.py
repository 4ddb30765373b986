"""What a repository's own `.qshell/settings.json` may do: only make qshell stricter.

A cloned repository is input written by whoever made it, so its settings file is not the
user's. `RULES` classifies every setting (one dotted snake_case path per field of
`config.Settings`, sections included): FREE ones a project sets as it likes; STRICTER,
LOWER, HIGHER, ADD and NARROW ones it may only tighten against the user's own value (the
user file over the defaults); USER ones (where requests go, which model, what plugins are
told, telemetry text) it may not set at all. `confine` turns a project layer into the one
that is merged, with what it ignored or only added; `notice` says that in one line. The
user's environment variables and command-line flags are merged after it with full power.
This module works on plain JSON data (config validates and dumps the layers first), so it
imports nothing of qshell; it does no I/O and holds no state: any thread may call it.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic.alias_generators import to_camel


class Trust(enum.Enum):
    FREE = "free"  # a preference: the project's value is used
    STRICTER = "stricter"  # one of `order`, loosest first: only a later one than the user's
    LOWER = "lower"  # a limit: only one at or below the user's
    HIGHER = "higher"  # a threshold: only one at or above the user's
    ADD = "add"  # a list of rules: the project's are added to the user's, never replace them
    NARROW = "narrow"  # an allowlist: only entries the user's list has
    USER = "user"  # the user's alone: a project's value is ignored


@dataclass(frozen=True, slots=True)
class Rule:
    trust: Trust
    order: tuple[Any, ...] = ()  # STRICTER: every value (as JSON), loosest first


FREE = Rule(Trust.FREE)
LOWER = Rule(Trust.LOWER)
HIGHER = Rule(Trust.HIGHER)
ADD = Rule(Trust.ADD)
NARROW = Rule(Trust.NARROW)
USER = Rule(Trust.USER)
OFF_ONLY = Rule(Trust.STRICTER, (True, False))
ON_ONLY = Rule(Trust.STRICTER, (False, True))
# `enabled: None` means on (off only with the embedded model); true forces it on
FORCED_ON_AUTO_OFF = Rule(Trust.STRICTER, (True, None, False))

RULES: Mapping[str, Rule] = {
    # where requests go and what they carry: the user's alone (a model name can route
    # to another vendor on a router, and bills the user)
    "provider": USER,
    "model": USER,
    "fast_model": USER,
    "base_url": USER,
    "approval_mode": Rule(Trust.STRICTER, ("yolo", "auto-edit", "default", "plan")),
    "max_turns": LOWER,
    "max_tokens": LOWER,
    "max_retries": LOWER,
    "shell_timeout_s": LOWER,
    "context_window": LOWER,
    "compact_threshold": LOWER,
    "show_reasoning": FREE,
    "secret_patterns": ADD,
    "protected_paths": ADD,
    "tool_post_exec_allowlist": NARROW,
    "always_summarize": FREE,
    "stream_ahead_tools": OFF_ONLY,  # reads started before the answer is complete
    "summarize_in_background": FREE,
    "summary_tier_strategy": FREE,  # the user's own fast model or primary
    "lean_summary_rounds": FREE,
    "concise_replies": FREE,
    "background_reasoning": FREE,
    "dashscope_cache": FREE,
    "timeouts.connect_s": LOWER,
    "timeouts.first_token_s": LOWER,
    "timeouts.idle_s": LOWER,
    # off per project (a tutoring or quiz repository); on again only by the user, since a
    # suggestion is what speculation runs on
    "suggestions.enabled": FORCED_ON_AUTO_OFF,
    "suggestions.cache_cold_tokens": FREE,
    "suggestions.delay_ms": FREE,
    "suggestions.fold": FREE,
    "suggestions.consequential": ADD,
    "suggestions.alternatives": FREE,
    "speculation.enabled": FORCED_ON_AUTO_OFF,
    "speculation.max_rounds": LOWER,
    "speculation.max_messages": LOWER,
    "speculation.wall_clock_s": LOWER,
    "speculation.output_tokens": LOWER,
    "speculation.gating": ON_ONLY,
    "speculation.min_confidence": HIGHER,
    "speculation.staged": ON_ONLY,
    "suggestions.backoff": ON_ONLY,
    "speculation.full_confidence": HIGHER,
    "speculation.dwell_ms": HIGHER,
    "sandbox.enabled": Rule(Trust.STRICTER, ("off", "auto", "on")),
    "sandbox.speculate_commands": OFF_ONLY,
    "sandbox.apply_ignored": OFF_ONLY,
    "sandbox.max_processes": LOWER,
    "telemetry.log_text": USER,
    "plugins.options": USER,  # what the user's plugins are told (paths, globs to protect)
    "local.model_path": USER,  # a GGUF file the embedded model server parses and runs
    "local.context_size": LOWER,
    "local.threads": FREE,
    "local.chat_template": FREE,
    "local.small_model": FREE,
    "local.max_rounds": LOWER,
    "local.max_tokens": LOWER,
    "local.start_timeout_s": LOWER,
}
REASON = "a project may only make qshell stricter"
_UNSET: Any = object()  # a setting left out of the merged layer
SHOWN_VALUE_CHARS = 40


@dataclass(frozen=True, slots=True)
class Refusal:
    """A project setting not applied as written: `ignored` (the value, or for NARROW the
    entries, shown) or only `added` to the user's list."""

    path: str
    value: Any
    added: bool = False


@dataclass(frozen=True, slots=True)
class Confined:
    layer: dict[str, Any]  # the project layer to merge (snake_case keys, JSON values)
    refusals: tuple[Refusal, ...]


def confine(
    written: Mapping[str, Any], proposed: Mapping[str, Any], mine: Mapping[str, Any]
) -> Confined:
    """The project layer that may be merged. `written` is the file's data with snake_case
    keys (only which keys it sets is read), `proposed` the same file validated and dumped
    as JSON, `mine` the user's settings (user file over defaults) dumped the same way."""
    layer: dict[str, Any] = {}
    refusals: list[Refusal] = []
    _walk(written, proposed, mine, "", layer, refusals)
    return Confined(layer, tuple(refusals))


def _walk(
    written: Mapping[str, Any],
    proposed: Mapping[str, Any],
    mine: Mapping[str, Any],
    prefix: str,
    layer: dict[str, Any],
    refusals: list[Refusal],
) -> None:
    for key, raw in written.items():
        path = prefix + key
        rule = RULES.get(path)
        if rule is None and isinstance(raw, Mapping):
            section: dict[str, Any] = {}
            _walk(raw, proposed[key], mine[key], path + ".", section, refusals)
            if section:
                layer[key] = section
            continue
        if rule is None:  # Settings validated the file, so every field has a rule
            raise KeyError(f"setting {path} has no trust rule")
        value, refusal = _judge(rule, path, proposed[key], mine[key])
        if value is not _UNSET:
            layer[key] = value
        if refusal is not None:
            refusals.append(refusal)


def _judge(rule: Rule, path: str, theirs: Any, mine: Any) -> tuple[Any, Refusal | None]:
    """The value to merge (or _UNSET) and what was not applied, for one setting."""
    trust = rule.trust
    if trust is Trust.FREE:
        return theirs, None
    if trust is Trust.ADD:
        added = [*mine, *(x for x in theirs if x not in mine)]
        dropped = any(x not in theirs for x in mine)
        return added, Refusal(path, theirs, added=True) if dropped else None
    if trust is Trust.NARROW:
        extra = [x for x in theirs if x not in mine]
        kept = [x for x in theirs if x in mine]
        return kept, Refusal(path, extra) if extra else None
    if theirs == mine:
        return _UNSET, None
    if trust is Trust.STRICTER:
        allowed = _rank(rule, theirs) > _rank(rule, mine)
    elif trust is Trust.LOWER:
        allowed = theirs < mine
    elif trust is Trust.HIGHER:
        allowed = theirs > mine
    else:
        allowed = False
    return (theirs, None) if allowed else (_UNSET, Refusal(path, theirs))


def _rank(rule: Rule, value: Any) -> int:
    """Where `value` stands in a STRICTER rule's order; an unknown value is the loosest."""
    try:
        return rule.order.index(value)
    except ValueError:
        return -1


def notice(source: str, refusals: tuple[Refusal, ...]) -> str | None:
    """One line saying what of the project file `source` was not applied, or None.
    Values are shown as escaped JSON (a file's text never reaches the terminal raw)."""
    if not refusals:
        return None
    ignored = [f"{_key(r.path)} {_shown(r.value)}" for r in refusals if not r.added]
    added = [_key(r.path) for r in refusals if r.added]
    parts = []
    if ignored:
        parts.append("ignored " + ", ".join(ignored))
    if added:
        parts.append(" and ".join(added) + " only added to yours, not replacing them")
    return f"{source}: {'; '.join(parts)} ({REASON})"


def _key(path: str) -> str:
    return ".".join(to_camel(part) for part in path.split("."))


def _shown(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=True)
    if len(text) > SHOWN_VALUE_CHARS:
        return text[: SHOWN_VALUE_CHARS - 1] + "…"
    return text
