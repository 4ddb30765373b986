"""The reserved subcommands: `qshell stats` and `qshell plugins`.

`stats` summarises this project's session transcripts (sessions, rounds, tokens, cached
tokens); `plugins` lists the gate plugins a run here loads (importing them, as a run would),
their source and hooks, and why any failed. They write to the given stdout; `--json` gives
machine-readable output. Main thread.
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TextIO

from qshell.dirs import Dirs
from qshell.errors import InputError


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


def collect_stats(directory: Path) -> ProjectStats:
    from qshell.agent.transcript import records

    stats = ProjectStats()
    for path in sorted(directory.glob("*.jsonl")):
        stats.sessions += 1
        for record in records(path):
            usage = record.get("usage")
            if record.get("type") != "usage" or not isinstance(usage, dict):
                continue
            stats.rounds += 1
            stats.prompt_tokens += int(usage.get("prompt_tokens") or 0)
            stats.completion_tokens += int(usage.get("completion_tokens") or 0)
            if usage.get("cached_tokens") is not None:
                stats.rounds_with_cache_info += 1
                stats.cached_tokens += int(usage["cached_tokens"])
            stats.cache_creation_tokens += int(usage.get("cache_creation_tokens") or 0)
            stats.reasoning_tokens += int(usage.get("reasoning_tokens") or 0)
    return stats


def suggestion_outcomes(state: Path) -> Counter[str]:
    """How often suggestions were shown, accepted, … — local telemetry of every project."""
    from qshell.telemetry import EVENTS_FILENAME, TELEMETRY_DIRNAME, read_events

    events = read_events(state / TELEMETRY_DIRNAME / EVENTS_FILENAME)
    return Counter(str(e.get("outcome")) for e in events if e.get("event") == "suggestion")


def suggestion_summary(counts: Counter[str]) -> str:
    shown = counts["shown"]
    rate = f" ({100 * counts['accepted'] / shown:.0f}% of shown)" if shown else ""
    return (
        f"suggestions (all projects): shown {shown}, accepted {counts['accepted']}{rate}, "
        f"filled {counts['filled']}, ignored {counts['ignored']}, "
        f"suppressed {counts['suppressed']}"
    )


def run_subcommand(
    name: str,
    rest: Sequence[str],
    args: argparse.Namespace,
    root: Path,
    environ: Mapping[str, str],
    stdout: TextIO,
) -> int:
    if rest:
        raise InputError(f"`qshell {name}` takes no arguments (to send a prompt, use -p)")
    if name == "stats":
        from qshell.agent.transcript import transcripts_dir

        state = Dirs.from_environ(environ).state
        stats = collect_stats(transcripts_dir(state, root))
        outcomes = suggestion_outcomes(state)
        if args.json:
            stdout.write(json.dumps({**asdict(stats), "suggestions": dict(outcomes)}) + "\n")
            return 0
        share = (
            f"{100 * stats.cached_tokens / stats.prompt_tokens:.1f}%"
            if stats.prompt_tokens
            else "n/a"
        )
        stdout.write(
            f"sessions in {root}: {stats.sessions}\n"
            f"model rounds: {stats.rounds}\n"
            f"prompt tokens: {stats.prompt_tokens} (cached: {stats.cached_tokens}, {share}; "
            f"written to the cache: {stats.cache_creation_tokens}; "
            f"{stats.rounds - stats.rounds_with_cache_info} rounds did not report caching)\n"
            f"completion tokens: {stats.completion_tokens} "
            f"(reasoning: {stats.reasoning_tokens})\n"
        )
        stdout.write(suggestion_summary(outcomes) + "\n")
        return 0
    if name == "doctor":
        from qshell.doctor import doctor_report

        stdout.write("\n".join(doctor_report(root, environ)) + "\n")
        return 0
    return list_plugins(args, root, environ, stdout)


def list_plugins(
    args: argparse.Namespace, root: Path, environ: Mapping[str, str], stdout: TextIO
) -> int:
    """`qshell plugins`: the plugins a run here loads, in the order they are consulted,
    with their source and hooks, and those that failed to load with why."""
    from qshell.cli import plugin_host
    from qshell.config import load_settings

    settings = load_settings(project_root=root, environ=environ)
    infos = plugin_host(args, settings, root, environ).infos
    if args.json:
        stdout.write(json.dumps([asdict(i) for i in infos]) + "\n")
        return 0
    if not infos:
        stdout.write("no plugins loaded\n")
    for info in infos:
        hooks = ", ".join(info.hooks) or "no hooks"
        said = f"skipped ({info.error})" if info.error else hooks
        stdout.write(f"{info.name} ({info.source} {info.location}): {said}\n")
    return 0
