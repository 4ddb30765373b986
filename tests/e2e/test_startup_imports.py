"""What starting qshell loads: `qshell --version` nothing heavy, and the REPL, up to its first
prompt, none of the machinery a later moment needs (Roadmap 17: the CPU to the first prompt).

The REPL runs in a pseudo-terminal against the scripted server with Python's `-X importtime`
report going to a file; once the prompt is active the user leaves with Ctrl-D, and every
module it imported is read from the report. Speculation's run (speculation.py, the gate,
the kernel overlay run, acceptance), the overlay's apply and journal, and httpx's
command-line client (click, pygments, rich's progress bars) must not be among them; the
garbage collector must be back on once the prompt is up (gcpause.py).
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pexpect

from tests.e2e.pty import PROMPT_ACTIVE
from tests.fakes.llm_server import ScriptedLLMServer

LATER = (
    "qshell.followup.speculation",
    "qshell.followup.gate",
    "qshell.followup.overlay_run",
    "qshell.followup.acceptance",
    "qshell.overlay.overlay",
    "qshell.overlay.journal",
    "httpx._main",
    "click",
    "pygments",
    "rich.progress",
)
HEAVY = ("httpx", "pydantic", "rich", "prompt_toolkit", "qshell.agent", "qshell.shellproof")


def imported(report: str) -> set[str]:
    """The module names in a `-X importtime` report."""
    found = set()
    for line in report.splitlines():
        if line.startswith("import time:") and "|" in line:
            found.add(line.rsplit("|", 1)[1].strip())
    return found


def test_the_first_prompt_loads_nothing_a_later_moment_needs(
    llm_server: ScriptedLLMServer, project: Path, tmp_path: Path
):
    report = tmp_path / "importtime.txt"
    script = f"{shlex.quote(sys.executable)} -X importtime -m qshell 2>{shlex.quote(str(report))}"
    env = {
        **os.environ,
        "TERM": "xterm-256color",
        "PROMPT_TOOLKIT_NO_CPR": "1",
        "QSHELL_SUGGESTIONS": "0",
        "OPENAI_BASE_URL": llm_server.openai_base_url,
        "OPENAI_API_KEY": llm_server.api_key or "",
        "OPENAI_MODEL": "m1",
    }
    child = pexpect.spawn("bash", ["-c", script], cwd=str(project), env=env, timeout=30)
    child.expect_exact(PROMPT_ACTIVE.encode())
    child.sendeof()
    child.expect(pexpect.EOF)
    child.close()
    modules = imported(report.read_text())
    assert "qshell.ui.repl" in modules  # the report is the REPL's
    assert sorted(m for m in LATER if m in modules) == []


def test_version_loads_nothing_heavy():
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "qshell", "--version"],
        capture_output=True,
        text=True,
        check=True,
    )
    modules = imported(done.stderr)
    assert "qshell.cli" in modules
    assert sorted(m for m in modules if m.split(".")[0] in HEAVY or m in HEAVY) == []
