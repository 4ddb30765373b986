"""Drive the real `qshell` in a pseudo-terminal with pexpect, against the scripted server."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pexpect

from tests.fakes.llm_server import ScriptedLLMServer

TIMEOUT_S = 20


def spawn_qshell(
    server: ScriptedLLMServer | None,
    cwd: Path,
    *args: str,
    term: str = "xterm-256color",
    extra_env: dict[str, str] | None = None,
) -> pexpect.spawn:
    env = {**os.environ, "TERM": term, "PROMPT_TOOLKIT_NO_CPR": "1", "QSHELL_MAX_RETRIES": "0"}
    env.pop("INSIDE_EMACS", None)
    env.pop("NO_COLOR", None)
    if server is not None:
        env |= {
            "OPENAI_BASE_URL": server.openai_base_url,
            "OPENAI_API_KEY": server.api_key or "",
            "OPENAI_MODEL": "m1",
        }
    env |= extra_env or {}
    child = pexpect.spawn(
        sys.executable,
        ["-m", "qshell", *args],
        cwd=str(cwd),
        env=env,
        encoding="utf-8",
        codec_errors="replace",
        timeout=TIMEOUT_S,
        dimensions=(40, 160),
    )
    return child


def finish(child: pexpect.spawn) -> int:
    """Wait for the process to exit; returns its exit status."""
    child.expect(pexpect.EOF)
    child.close()
    return child.exitstatus if child.exitstatus is not None else -(child.signalstatus or 0)
