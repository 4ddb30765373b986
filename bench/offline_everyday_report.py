"""The everyday-prompts bench's record, its judgements and its Markdown report.

A run of bench/offline_everyday.py is a `BenchRun`: the warm-up, then per prompt an
`Answered` (the `PrintRun`, the project's diff and the pytest verdict afterwards). The
judgements are a person's, kept in a JSON file as `{key: {"answer_sha256": …, "useful":
true|false, "why": "…"}}`; each is bound to the answer and the diff it was made on by
`answer_sha256`, so when a new model or prompt changes an answer its old judgement shows as
"unjudged (answer changed)" instead of being counted. Nothing here writes a judgement.
`summary_lines` is the printed table and counts, `markdown` the whole report: the project,
then per prompt the prompt, the command, the full answer, tools with their arguments, the
diff, pytest afterwards, timings and the judgement. Pure functions of the record.
"""

from __future__ import annotations

import hashlib
import json
import re
import shlex
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bench.offline_runs import PrintRun, UsedTool, one_line
from bench.stats import percentile

TOOL_OUTPUT_CHARS = 600
STDERR_LINES = 8
TABLE_ANSWER_CHARS = 60


@dataclass(frozen=True, slots=True)
class Prompt:
    """One of the twelve: a key, the kind issue 29 names, the text typed, and the flags
    it runs with."""

    key: str
    kind: str
    text: str
    flags: tuple[str, ...] = ()

    def command(self) -> str:
        return shlex.join(["qshell", "-p", self.text, "-o", "stream-json", *self.flags])


@dataclass(frozen=True, slots=True)
class Answered:
    """A prompt's run and what it left: the project's diff, and whether its tests pass."""

    prompt: Prompt
    run: PrintRun
    diff: str
    tests_pass: bool
    tests_summary: str

    @property
    def sha256(self) -> str:
        return answer_sha256(self.run.answer, self.diff)


@dataclass(frozen=True, slots=True)
class BenchRun:
    warmup: PrintRun
    answered: tuple[Answered, ...]
    load_start: str
    load_end: str
    project: Path
    files: Mapping[str, str]  # the fixture
    started: str  # when, for the report's header


def run_to_json(bench: BenchRun) -> str:
    """The whole run, for `--rerender`: judgements are made after reading the answers, and
    a second run would not give them again (a test run's output carries its duration)."""
    return json.dumps(asdict(bench), default=str, indent=1, ensure_ascii=False) + "\n"


def _print_run(data: Mapping[str, Any]) -> PrintRun:
    tools = tuple(UsedTool(**tool) for tool in data["tools"])
    return PrintRun(**{**data, "tools": tools})


def run_from_json(text: str) -> BenchRun:
    data = json.loads(text)
    answered = tuple(
        Answered(
            prompt=Prompt(**{**a["prompt"], "flags": tuple(a["prompt"]["flags"])}),
            run=_print_run(a["run"]),
            diff=a["diff"],
            tests_pass=a["tests_pass"],
            tests_summary=a["tests_summary"],
        )
        for a in data["answered"]
    )
    return BenchRun(
        warmup=_print_run(data["warmup"]),
        answered=answered,
        load_start=data["load_start"],
        load_end=data["load_end"],
        project=Path(data["project"]),
        files=data["files"],
        started=data["started"],
    )


@dataclass(frozen=True, slots=True)
class Judgement:
    useful: bool
    why: str
    answer_sha256: str


def answer_sha256(answer: str, diff: str) -> str:
    """What a judgement is bound to: the answer and the diff, a NUL between them."""
    return hashlib.sha256(f"{answer}\0{diff}".encode()).hexdigest()


def load_judgements(path: Path) -> dict[str, Judgement]:
    """The judgements in `path` (none when it does not exist); a malformed file stops the
    bench with one line saying which entry is wrong."""
    if not path.exists():
        return {}
    try:
        raw = json.loads(path.read_text())
        return {
            str(key): Judgement(bool(entry["useful"]), str(entry["why"]), entry["answer_sha256"])
            for key, entry in raw.items()
        }
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise SystemExit(
            f"{path}: want {{key: {{answer_sha256, useful, why}}}} ({type(exc).__name__}: {exc})"
        ) from None


def judged(answered: Answered, judgements: Mapping[str, Judgement]) -> Judgement | None:
    """The judgement that holds for this answer: None when there is none or when it was
    made on another answer."""
    found = judgements.get(answered.prompt.key)
    return found if found is not None and found.answer_sha256 == answered.sha256 else None


def verdict(answered: Answered, judgements: Mapping[str, Judgement]) -> str:
    found = judgements.get(answered.prompt.key)
    holds = judged(answered, judgements)
    if holds is not None:
        return f"{'useful' if holds.useful else 'not useful'}: {holds.why}"
    if found is not None:
        was = "useful" if found.useful else "not useful"
        return f"unjudged (answer changed; it was judged {was}: {found.why})"
    return "unjudged"


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f} s"


def _spread(values: Sequence[float]) -> str:
    if not values:
        return "-"
    return f"median {statistics.median(values):.1f} s, p99 {percentile(values, 0.99):.1f} s"


def _mark(answered: Answered, judgements: Mapping[str, Judgement]) -> str:
    holds = judged(answered, judgements)
    return "?" if holds is None else ("✓" if holds.useful else "✗")


def counts(bench: BenchRun, judgements: Mapping[str, Judgement], total: int) -> list[str]:
    """The useful count, the unjudged count and the timings, one line each."""
    found = [judged(a, judgements) for a in bench.answered]
    useful = sum(1 for j in found if j is not None and j.useful)
    unjudged = sum(1 for j in found if j is None)
    runs = [a.run for a in bench.answered]
    firsts = [r.first_text_s for r in runs if r.first_text_s is not None]
    answers = [r.answer_text_s for r in runs if r.answer_text_s is not None]
    warm = bench.warmup
    return [
        f"useful: {useful} / {total} (of {len(runs)} run, {unjudged} unjudged)",
        f"first text (any round): {_spread(firsts)} ({len(firsts)} of {len(runs)} gave text)",
        f"first text of the answer (after the last tool call): {_spread(answers)}",
        f"total per prompt (process start to exit): {_spread([r.total_s for r in runs])}",
        f"warm-up (first run, one-time model preparation): {warm.total_s:.1f} s,"
        f" first text {_seconds(warm.first_text_s)}, exit {warm.code}",
        f"load average: {bench.load_start} at the start, {bench.load_end} at the end",
    ]


def summary_lines(bench: BenchRun, judgements: Mapping[str, Judgement], total: int) -> list[str]:
    """The printed table (a row per prompt: first text, the answer's first text, total,
    the judgement's mark, tools, answer) and the counts under it."""
    rows = [
        f"{'prompt':<15} {'kind':<24} {'first':>7} {'answer':>7} {'total':>7}  ?"
        f" {'tools':<24} answer"
    ]
    for a in bench.answered:
        run = a.run
        tools = ",".join(t.name for t in run.tools) or "-"
        rows.append(
            f"{a.prompt.key:<15} {a.prompt.kind:<24} {_seconds(run.first_text_s):>7}"
            f" {_seconds(run.answer_text_s):>7} {_seconds(run.total_s):>7}"
            f"  {_mark(a, judgements)} {one_line(tools, 24):<24}"
            f" {one_line(run.answer, TABLE_ANSWER_CHARS)}"
        )
    return [*rows, "", *counts(bench, judgements, total)]


def fenced(text: str, language: str = "") -> str:
    """`text` in a Markdown code fence longer than any backtick run inside it."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{language}\n{text.rstrip(chr(10))}\n{fence}"


def _tool_lines(tools: Sequence[UsedTool]) -> list[str]:
    if not tools:
        return ["(no tool was called)", ""]
    lines = []
    for index, tool in enumerate(tools, 1):
        args = json.dumps(dict(tool.args), ensure_ascii=False)
        lines += [f"**{index}. `{tool.name}`** ({tool.status or 'no result'}), arguments:", ""]
        lines += [fenced(args, "json"), ""]
        if tool.status:
            output = tool.output
            if len(output) > TOOL_OUTPUT_CHARS:
                output = output[:TOOL_OUTPUT_CHARS] + f"\n… ({len(tool.output)} characters)"
            lines += ["what it returned:", "", fenced(output or "(nothing)"), ""]
    return lines


def _section(index: int, a: Answered, judgements: Mapping[str, Judgement]) -> list[str]:
    run = a.run
    stderr = run.stderr.strip().splitlines()[-STDERR_LINES:]
    tests = "passes" if a.tests_pass else "fails"
    return [
        f"## {index}. `{a.prompt.key}`: {a.prompt.kind}",
        "",
        f"Prompt: **{a.prompt.text}**",
        "",
        f"Command: `{a.prompt.command()}` (in the project)",
        "",
        f"Exit code {run.code}. Seconds from the start: first text {_seconds(run.first_text_s)},"
        f" the answer's first text {_seconds(run.answer_text_s)}, the result record"
        f" {_seconds(run.result_s)}, exit {_seconds(run.total_s)}.",
        "",
        f"**Judgement:** {verdict(a, judgements)}",
        "",
        f"answer_sha256: `{a.sha256}`",
        "",
        "### Answer",
        "",
        fenced(run.answer or "(empty)", "text"),
        "",
        "### Tools",
        "",
        *_tool_lines(run.tools),
        "### Diff of the project",
        "",
        fenced(a.diff, "diff") if a.diff else "(unchanged)",
        "",
        f"### pytest afterwards: {tests}",
        "",
        f"`python -m pytest -q`: {a.tests_summary}",
        *(["", "### stderr (last lines)", "", fenced("\n".join(stderr))] if stderr else []),
        "",
    ]


def _warmup_lines(run: PrintRun) -> list[str]:
    stderr = run.stderr.strip().splitlines()[-STDERR_LINES:]
    return [
        "## The warm-up",
        "",
        "`qshell -p hello -o stream-json`, the first run in the bench's fresh HOME: the"
        " offline model's one-time preparation happens here.",
        f"Exit code {run.code}; first text {_seconds(run.first_text_s)}, exit"
        f" {_seconds(run.total_s)}.",
        "",
        fenced(run.answer or "(empty)", "text"),
        *(["", "stderr (last lines):", "", fenced("\n".join(stderr))] if stderr else []),
        "",
    ]


def markdown(bench: BenchRun, judgements: Mapping[str, Judgement], total: int) -> str:
    """The whole report: header, counts and table, the project, then a section per prompt."""
    lines = [
        "# The offline default on twelve everyday prompts",
        "",
        f"Written by `python -m bench.offline_everyday` on {bench.started}; model"
        f" `{bench.warmup.model or '?'}`; the project at `{bench.project}`. Judgements are read"
        " from `bench/offline_everyday_judgement.json` and hold only for the answer and diff"
        " whose answer_sha256 they carry.",
        "",
        *(f"- {line}" for line in counts(bench, judgements, total)),
        "",
        fenced("\n".join(summary_lines(bench, judgements, total)[: len(bench.answered) + 1])),
        "",
        *_warmup_lines(bench.warmup),
        "## The project",
        "",
    ]
    for name, text in bench.files.items():
        lines += [f"`{name}`:", "", fenced(text), ""]
    for index, answered in enumerate(bench.answered, 1):
        lines += _section(index, answered, judgements)
    return "\n".join(lines)
