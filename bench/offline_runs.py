"""Running `qshell -p` on the offline default as a new user would, for the offline benches.

Shared by offline_compare.py and offline_everyday.py: `write_project` lays a throwaway
project out from a dict of files (at a fixed path the caller chooses: the project's path
is in the system prompt, so a random one would change greedy answers), `isolated_env` is
this process's environment without provider keys or qshell settings and with a private
HOME, QSHELL_HOME, XDG dirs and TMPDIR (so the offline default answers, and a model
prepared once stays in that HOME for the next run), and `run_print` runs the real
`python -m qshell -p PROMPT -o stream-json` there, reading stdout line by line as it comes
to time the first answer text. `read_stream` turns stream-json lines into the answer, the
tools called and those times; `project_diff` and `pytest_after` say what a run left in
the project. Each call runs one process at a time in the caller's thread.
"""

from __future__ import annotations

import contextlib
import difflib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

RUN_TIMEOUT_S = 600.0
ANSWER_CHARS = 72
PYTEST_TIMEOUT_S = 120.0
# what running Python or pytest leaves in a project: not a change the model made
CACHE_DIRS = frozenset({"__pycache__", ".pytest_cache"})
PROVIDER_PREFIXES = ("OPENAI_", "ANTHROPIC_", "QSHELL_", "XDG_")
XDG_NAMES = ("XDG_CONFIG_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME", "XDG_DATA_HOME")


@dataclass(frozen=True, slots=True)
class UsedTool:
    """One tool call of a run: its name, arguments, and how it ended (`status` is
    stream-json's `success`/`error`, empty when no result came)."""

    name: str
    args: Mapping[str, Any]
    status: str = ""
    output: str = ""


@dataclass(frozen=True, slots=True)
class PrintRun:
    """One `qshell -p` process: exit code, final answer (or the error), tools in call
    order, seconds from the process start to its exit and (None: never) to the first
    answer text on stdout, the model stream-json's `init` named, its stderr, and seconds
    to the first text of the round that gave the answer and to the `result` record
    (`Streamed` says what each is)."""

    code: int
    answer: str
    tools: tuple[UsedTool, ...]
    first_text_s: float | None
    total_s: float
    model: str = ""
    stderr: str = ""
    answer_text_s: float | None = None
    result_s: float | None = None


@dataclass(frozen=True, slots=True)
class Streamed:
    """What stream-json lines say, times in seconds since the process started.
    `first_text_s`: the first non-empty `message` delta, of any round (text a model writes
    before a tool call counts); `answer_text_s`: the first one after the last tool call,
    result or withdrawal, so of the answer itself; both fall back to the `result` record's
    time when no delta came (an answer made of tool output). A failed turn's answer is its
    error message."""

    answer: str = ""
    tools: tuple[UsedTool, ...] = ()
    model: str = ""
    first_text_s: float | None = None
    answer_text_s: float | None = None
    result_s: float | None = None


def write_project(directory: Path, files: Mapping[str, str]) -> Path:
    """A fresh copy of `files` at `directory` (whatever was there is removed first)."""
    shutil.rmtree(directory, ignore_errors=True)
    for name, text in files.items():
        path = directory / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return directory


def isolated_env(home: Path, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """This process's environment without provider keys or qshell settings, with HOME,
    QSHELL_HOME, XDG_* and TMPDIR inside `home`, no plugin loading, this interpreter's
    directory first on PATH (so the model's `python -m pytest` finds the venv's pytest),
    and `extra` (a model's `QSHELL_LOCAL__*` settings, say) on top."""
    keep = {k: v for k, v in os.environ.items() if not k.startswith(PROVIDER_PREFIXES)}
    keep.pop("XDG_RUNTIME_DIR", None)
    temp = home / "tmp"
    temp.mkdir(parents=True, exist_ok=True)
    private = {
        "HOME": str(home),
        "QSHELL_HOME": str(home / "qshell"),
        "QSHELL_PLUGINS": "",
        **{name: str(home / name.lower()) for name in XDG_NAMES},
        **{name: str(temp) for name in ("TMPDIR", "TEMP", "TMP")},
        "PATH": os.pathsep.join([str(Path(sys.executable).parent), keep.get("PATH", "")]),
    }
    return {**keep, **private, **(extra or {})}


def read_stream(lines: Iterable[tuple[float, str]]) -> Streamed:
    """The answer, the tools called and the times of a run's stream-json `lines`, each
    stamped with the seconds since the process started."""
    answer, model = "", ""
    first = answer_first = result = None
    tools: list[UsedTool] = []
    ids: dict[str, int] = {}
    for stamp, line in lines:
        record = _record(line)
        kind = record.get("type")
        if kind == "init":
            model = str(record.get("model") or "")
        elif kind == "message" and record.get("content"):
            first = stamp if first is None else first
            answer_first = stamp if answer_first is None else answer_first
        elif kind in ("tool_use", "tool_result", "message_withdrawn"):
            answer_first = None  # the text so far was not the answer
            _follow_tool(record, tools, ids)
        elif kind == "result":
            error = record.get("error")
            message = error.get("message", "") if isinstance(error, dict) else ""
            answer, result = str(record.get("result") or message or ""), stamp
    if answer and result is not None:
        first = result if first is None else first
        answer_first = result if answer_first is None else answer_first
    return Streamed(answer, tuple(tools), model, first, answer_first, result)


def _follow_tool(record: Mapping[str, Any], tools: list[UsedTool], ids: dict[str, int]) -> None:
    """Add a `tool_use` record's call to `tools`, or a `tool_result`'s outcome to its call."""
    tool_id = str(record.get("tool_id"))
    if record.get("type") == "tool_use":
        ids[tool_id] = len(tools)
        tools.append(UsedTool(str(record.get("tool_name")), record.get("parameters") or {}))
    elif record.get("type") == "tool_result" and tool_id in ids:
        used = tools[ids[tool_id]]
        output = str(record.get("output") or record.get("error") or "")
        tools[ids[tool_id]] = UsedTool(used.name, used.args, str(record.get("status")), output)


def _record(line: str) -> dict[str, Any]:
    try:
        value = json.loads(line)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def run_print(
    prompt: str,
    *,
    cwd: Path,
    env: Mapping[str, str],
    flags: Sequence[str] = (),
    timeout_s: float = RUN_TIMEOUT_S,
) -> PrintRun:
    """`python -m qshell -p PROMPT -o stream-json FLAGS` in `cwd`, its stdout read line by
    line as it arrives; past `timeout_s` its process group is killed (exit code -1)."""
    command = [sys.executable, "-m", "qshell", "-p", prompt, "-o", "stream-json", *flags]
    with tempfile.TemporaryFile() as errors:
        started = time.perf_counter()
        proc = subprocess.Popen(
            command,
            cwd=cwd,
            env=dict(env),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=errors,
            start_new_session=True,
        )
        timer = threading.Timer(timeout_s, _kill_group, (proc,))
        timer.start()
        try:
            assert proc.stdout is not None
            stamped = [
                (time.perf_counter() - started, raw.decode(errors="replace"))
                for raw in iter(proc.stdout.readline, b"")
            ]
            code = proc.wait()
        finally:
            timer.cancel()
        total = time.perf_counter() - started
        errors.seek(0)
        stderr = errors.read().decode(errors="replace")
    got = read_stream(stamped)
    answer = got.answer
    if code == -signal.SIGKILL and total >= timeout_s:
        code, answer = -1, f"(timed out after {timeout_s:.0f} s)"
    elif code != 0 and not answer and stderr.strip():
        answer = stderr.strip().splitlines()[-1]
    return PrintRun(
        code,
        answer,
        got.tools,
        got.first_text_s,
        total,
        got.model,
        stderr,
        got.answer_text_s,
        got.result_s,
    )


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)


def project_files(directory: Path) -> dict[str, str]:
    """The project's text files by relative path, caches left out."""
    found = {}
    for path in sorted(directory.rglob("*")):
        relative = path.relative_to(directory)
        if path.is_file() and not CACHE_DIRS.intersection(relative.parts):
            found[relative.as_posix()] = path.read_text(errors="replace")
    return found


def project_diff(directory: Path, original: Mapping[str, str]) -> str:
    """A unified diff from `original` to what is in `directory` now (empty: unchanged);
    a new file is diffed from /dev/null, a removed one to it, an empty one is named."""
    now = project_files(directory)
    chunks: list[str] = []
    for name in sorted(set(original) | set(now)):
        before, after = original.get(name), now.get(name)
        if before == after:
            continue
        fromfile = f"a/{name}" if before is not None else "/dev/null"
        tofile = f"b/{name}" if after is not None else "/dev/null"
        lines = list(
            difflib.unified_diff(
                (before or "").splitlines(keepends=True),
                (after or "").splitlines(keepends=True),
                fromfile=fromfile,
                tofile=tofile,
            )
        )
        # an empty file made or removed has no lines to diff, but it is a change
        chunks.extend(lines or [f"--- {fromfile}\n", f"+++ {tofile}\n", "(an empty file)\n"])
    return "".join(line if line.endswith("\n") else line + "\n" for line in chunks)


def pytest_after(directory: Path, env: Mapping[str, str]) -> tuple[bool, str]:
    """Whether `python -m pytest -q` passes in `directory`, and its summary line."""
    try:
        done = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"],
            cwd=directory,
            env={**env, "PYTHONDONTWRITEBYTECODE": "1"},
            capture_output=True,
            text=True,
            timeout=PYTEST_TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return False, f"pytest timed out after {PYTEST_TIMEOUT_S:.0f} s"
    lines = [line for line in done.stdout.splitlines() if line.strip()]
    return done.returncode == 0, (lines[-1] if lines else done.stderr.strip()[-200:])


def one_line(text: str, width: int = ANSWER_CHARS) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"
