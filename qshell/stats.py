"""`qshell stats`: the figures of this project's sessions, local telemetry and decisions.

It reads three append-only files and changes none: the project's session transcripts
(rounds, tokens, and the cache hit rate — cached / prompt tokens — overall and by round
position: first, middle, summary), the telemetry events of every project (suggestion
outcomes; speculation outcomes and the seconds accepted ones saved) and the decision log
(latency/decisions.py), of this project's sessions only (skip, fast and fallback rates,
the vetoes, the median times to first token and to a free prompt). `render` prints a
table, `as_json` a dict whose older keys keep their meaning. Main thread.
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from qshell.agent.events import RoundPosition
from qshell.agent.transcript import records
from qshell.errors import QshellError
from qshell.latency.decisions import DECISION_EVENT, DECISIONS_FILENAME
from qshell.telemetry import EVENTS_FILENAME, TELEMETRY_DIRNAME, read_events

POSITIONS = tuple(str(p) for p in RoundPosition)


@dataclass
class CacheCount:
    """Prompt and cached tokens of some rounds (those that reported caching)."""

    rounds: int = 0
    prompt_tokens: int = 0
    cached_tokens: int = 0

    def add(self, usage: Mapping[str, Any]) -> None:
        self.rounds += 1
        if _ints([usage.get("cached_tokens")]):
            self.prompt_tokens += _count(usage, "prompt_tokens")
            self.cached_tokens += _count(usage, "cached_tokens")

    @property
    def hit_rate(self) -> float | None:
        return self.cached_tokens / self.prompt_tokens if self.prompt_tokens else None


@dataclass
class ProjectStats:
    sessions: int = 0
    rounds: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    cache_creation_tokens: int = 0
    reasoning_tokens: int = 0
    rounds_with_cache_info: int = 0
    positions: dict[str, CacheCount] = field(
        default_factory=lambda: {p: CacheCount() for p in POSITIONS}
    )

    def add(self, usage: Mapping[str, Any], position: object) -> None:
        self.rounds += 1
        self.prompt_tokens += _count(usage, "prompt_tokens")
        self.completion_tokens += _count(usage, "completion_tokens")
        if _ints([usage.get("cached_tokens")]):
            self.rounds_with_cache_info += 1
            self.cached_tokens += _count(usage, "cached_tokens")
        self.cache_creation_tokens += _count(usage, "cache_creation_tokens")
        self.reasoning_tokens += _count(usage, "reasoning_tokens")
        if isinstance(position, str) and position in self.positions:
            self.positions[position].add(usage)


def collect_stats(directory: Path) -> ProjectStats:
    """The usage records of every transcript in a project's directory."""
    stats = ProjectStats()
    for path in sorted(directory.glob("*.jsonl")):
        stats.sessions += 1
        for record in records(path):
            usage = record.get("usage")
            if record.get("type") == "usage" and isinstance(usage, dict):
                stats.add(usage, record.get("position"))
    return stats


@dataclass
class Followups:
    """Suggestion and speculation outcomes, from the telemetry events."""

    suggestions: Counter[str] = field(default_factory=Counter)
    speculations: Counter[str] = field(default_factory=Counter)
    saved_ms: int = 0
    accepted_by_index: Counter[int] = field(default_factory=Counter)  # 0: the first guess
    gate: Counter[str] = field(default_factory=Counter)  # speculated / gated by confidence

    @classmethod
    def read(cls, state: Path) -> Followups:
        found = cls()
        for event in read_events(state / TELEMETRY_DIRNAME / EVENTS_FILENAME):
            if event.get("event") == "suggestion":
                found.suggestions[str(event.get("outcome"))] += 1
                index = event.get("index")
                if event.get("outcome") == "accepted" and isinstance(index, int):
                    found.accepted_by_index[index] += 1
            elif event.get("event") == "speculation_gate":
                found.gate[str(event.get("outcome"))] += 1
            elif event.get("event") == "speculation":
                found.speculations[str(event.get("outcome"))] += 1
                saved = event.get("saved_ms")
                found.saved_ms += saved if isinstance(saved, int) else 0
        return found


@dataclass
class Decisions:
    """The decision records of some sessions."""

    decisions: Counter[str] = field(default_factory=Counter)
    after_batch: int = 0  # decisions made after a tool batch (skip or the next round's tier)
    fast_requested: int = 0
    fallbacks: int = 0
    fast_tokens_consumed: int = 0
    vetoes: Counter[str] = field(default_factory=Counter)
    first_token_ms: list[int] = field(default_factory=list)
    user_idle_ms: list[int] = field(default_factory=list)

    @classmethod
    def read(cls, state: Path, sessions: set[str]) -> Decisions:
        found = cls()
        turns: dict[str, dict[str, Any]] = {}
        for record in read_events(state / TELEMETRY_DIRNAME / DECISIONS_FILENAME):
            session = record.get("session_id")
            if record.get("event") != DECISION_EVENT or not isinstance(session, str):
                continue  # another event, or a record of the wrong shape (a hand edit)
            if session not in sessions:
                continue
            found.add(record)
            turns.setdefault(str(record.get("turn_id")), record)
        for turn in turns.values():
            found.first_token_ms.extend(_ints([turn.get("t_first_token_ms")]))
            found.user_idle_ms.extend(_ints([turn.get("t_user_idle_ms")]))
        return found

    def add(self, record: Mapping[str, Any]) -> None:
        self.decisions[str(record.get("decision"))] += 1
        if _ints([record.get("batches_before")]) and record["batches_before"] > 0:
            self.after_batch += 1
        if record.get("tier_requested") == "fast":
            self.fast_requested += 1
        if record.get("fallback_triggered") is True:
            self.fallbacks += 1
            self.fast_tokens_consumed += next(iter(_ints([record.get("fast_tokens_consumed")])), 0)
        if record.get("veto_reason"):
            self.vetoes[str(record["veto_reason"])] += 1

    @property
    def skip_rate(self) -> float | None:
        return _rate(self.decisions["skip"], self.after_batch)

    @property
    def fallback_rate(self) -> float | None:
        return _rate(self.fallbacks, self.fast_requested)


def _ints(values: Iterable[object]) -> list[int]:
    return [v for v in values if isinstance(v, int) and not isinstance(v, bool)]


def _count(record: Mapping[str, Any], key: str) -> int:
    """`record[key]` when it is a count; 0 when it is missing or of the wrong type."""
    return next(iter(_ints([record.get(key)])), 0)


def _rate(part: int, whole: int) -> float | None:
    return part / whole if whole else None


def _median(values: list[int]) -> float | None:
    return statistics.median(values) if values else None


@dataclass(frozen=True, slots=True)
class Report:
    root: Path
    project: ProjectStats
    followups: Followups
    decisions: Decisions


def report(state: Path, directory: Path, root: Path) -> Report:
    """The figures; a file that cannot be read is one `QshellError` line naming it."""
    sessions = {p.stem for p in directory.glob("*.jsonl")}
    try:
        return Report(
            root,
            collect_stats(directory),
            Followups.read(state),
            Decisions.read(state, sessions),
        )
    except OSError as exc:
        why = exc.strerror or type(exc).__name__
        raise QshellError(f"qshell stats: cannot read {exc.filename}: {why}") from exc


def as_json(found: Report) -> dict[str, Any]:
    """The machine-readable figures: the older keys (`sessions` … `suggestions`) first."""
    project = asdict(found.project)
    project["positions"] = {
        name: {**asdict(count), "hit_rate": count.hit_rate}
        for name, count in found.project.positions.items()
    }
    followups, decisions = found.followups, found.decisions
    return {
        **project,
        "cache_hit_rate": _rate(found.project.cached_tokens, found.project.prompt_tokens),
        "suggestions": dict(followups.suggestions),
        "suggestion_acceptance_rate": _rate(
            followups.suggestions["accepted"], followups.suggestions["shown"]
        ),
        "speculations": dict(followups.speculations),
        "speculation_acceptance_rate": _rate(
            followups.speculations["accepted"], sum(followups.speculations.values())
        ),
        "time_saved_s": followups.saved_ms / 1000,
        "accepted_by_index": {str(k): v for k, v in sorted(followups.accepted_by_index.items())},
        "speculation_gate": dict(followups.gate),
        "decisions": dict(decisions.decisions),
        "skip_rate": decisions.skip_rate,
        "fast_requested": decisions.fast_requested,
        "fallbacks": decisions.fallbacks,
        "fallback_rate": decisions.fallback_rate,
        "fast_tokens_consumed": decisions.fast_tokens_consumed,
        "vetoes": dict(decisions.vetoes),
        "median_first_token_ms": _median(decisions.first_token_ms),
        "median_user_idle_ms": _median(decisions.user_idle_ms),
    }


def _pct(rate: float | None) -> str:
    return "n/a" if rate is None else f"{100 * rate:.1f}%"


def _of(part: int, whole: int) -> str:
    return f"{part}/{whole} ({_pct(_rate(part, whole))})" if whole else "n/a"


def render(found: Report) -> str:
    """The figures as a two-column table, one section per source."""
    p, f, d = found.project, found.followups, found.decisions
    unreported = p.rounds - p.rounds_with_cache_info
    rows: list[tuple[str, str]] = [
        ("sessions", str(p.sessions)),
        ("model rounds", str(p.rounds)),
        ("prompt tokens", f"{p.prompt_tokens} (cached: {p.cached_tokens})"),
        ("written to the cache", str(p.cache_creation_tokens)),
        ("completion tokens", f"{p.completion_tokens} (reasoning: {p.reasoning_tokens})"),
        ("cache hit rate", f"{_pct(_rate(p.cached_tokens, p.prompt_tokens))}"),
    ]
    for name, count in p.positions.items():
        rows.append((f"  {name} rounds", f"{_pct(count.hit_rate)} of {count.rounds} rounds"))
    if unreported:
        rows.append(("rounds that did not report caching", str(unreported)))
    s = f.suggestions
    shown = f" ({100 * s['accepted'] / s['shown']:.0f}% of shown)" if s["shown"] else ""
    rows += [
        (
            "suggestions (all projects)",
            f"shown {s['shown']}, accepted {s['accepted']}{shown}, filled {s['filled']}, "
            f"ignored {s['ignored']}, suppressed {s['suppressed']}",
        ),
        ("  accepted by guess", _by_guess(f.accepted_by_index)),
        ("speculations accepted", _of(f.speculations["accepted"], sum(f.speculations.values()))),
        ("  held back by confidence", _of(f.gate["gated"], sum(f.gate.values()))),
        ("time saved", f"{f.saved_ms / 1000:.1f} s"),
        (
            "round decisions",
            ", ".join(f"{k} {v}" for k, v in sorted(d.decisions.items())) or "none",
        ),
        ("  skip rate (D1)", _of(d.decisions["skip"], d.after_batch)),
        ("  fast rounds fallen back", _of(d.fallbacks, d.fast_requested)),
        ("  vetoes", ", ".join(f"{k} {v}" for k, v in d.vetoes.most_common()) or "none"),
        ("  median first token", _ms(_median(d.first_token_ms))),
        ("  median time to prompt", _ms(_median(d.user_idle_ms))),
    ]
    width = max(len(label) for label, _ in rows)
    table = "".join(f"{label.ljust(width)}  {value}\n" for label, value in rows)
    return f"qshell stats for {found.root}\n{table}"


_ORDINALS = ("1st", "2nd", "3rd")


def _by_guess(counts: Counter[int]) -> str:
    """Accepted suggestions by which guess they were: `1st 5, 2nd 2, 3rd 0`."""
    if not counts:
        return "n/a"
    last = max(len(_ORDINALS), max(counts) + 1)
    names = [_ORDINALS[i] if i < len(_ORDINALS) else f"#{i + 1}" for i in range(last)]
    return ", ".join(f"{name} {counts[i]}" for i, name in enumerate(names))


def _ms(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.0f} ms"
