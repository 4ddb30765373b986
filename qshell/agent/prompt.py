"""The system prompt, built once per session and then kept byte-identical.

Prompt-cache stability matters more than freshness here: the prompt holds no timestamps,
no directory listings and nothing else that changes during a session. It is the base
instructions (with `conciseReplies`, one asking for short final answers), a few stable
facts (platform, project root), and the project instructions file (`AGENTS.md`, else `QSHELL.md`, at the project root) when there is one, its secrets
redacted (qshell/redaction: a marker the model cannot write back, since no session vault
holds it). The instructions' text is in
qshell/prompts/ (`system*.md`); this module only assembles it. Pure.
"""

from __future__ import annotations

import platform
from pathlib import Path

from qshell.agent.prediction import PREDICTION_PROMPT
from qshell.config import DEFAULTS
from qshell.latency.retrieval import test_command
from qshell.latency.tool_offer import top_level_files
from qshell.prompts import load
from qshell.redaction import redact

INSTRUCTION_FILES = ("AGENTS.md", "QSHELL.md")
MAX_INSTRUCTIONS_CHARS = 40_000

BASE_PROMPT = load("system")

CONCISE_PROMPT = load("system_concise")
"""`conciseReplies` (seed 004 §7.3): a summary round's output tokens are most of its time."""


COMPACT_PROMPT = load("system_compact")
COMPACT_INSTRUCTIONS_CHARS = 2_000


def find_instructions(root: Path) -> Path | None:
    for name in INSTRUCTION_FILES:
        path = root / name
        if path.is_file():
            return path
    return None


def project_facts(root: Path) -> list[str]:
    """For a small model, which cannot explore cheaply: the project's top-level files and
    the command that runs its tests (latency/retrieval.py)."""
    facts = []
    names = top_level_files(root)
    if names:
        facts.append("Files at the top of the project: " + ", ".join(names))
    command = test_command(root)
    if command:
        facts.append(f"The tests run with: {command}")
    return facts


def build_system_prompt(
    root: Path,
    *,
    extra: str = "",
    compact: bool = False,
    predict_next: bool = False,
    concise: bool = DEFAULTS.concise_replies,
) -> str:
    """The whole system prompt for a session rooted at `root`; `compact` is the short
    variant for a small local model, whose every prompt token costs real time (it already
    asks for brief answers, so `concise` adds nothing to it); `concise` asks for short
    final answers; `predict_next` asks each answer to end with the next prompt
    (agent/prediction.py)."""
    parts = [COMPACT_PROMPT] if compact else [BASE_PROMPT, *([CONCISE_PROMPT] if concise else [])]
    parts.append(f"Environment: {platform.system()} ({platform.machine()}); project root: {root}")
    if compact:
        parts.extend(project_facts(root))
    limit = COMPACT_INSTRUCTIONS_CHARS if compact else MAX_INSTRUCTIONS_CHARS
    instructions = find_instructions(root)
    if instructions is not None:
        try:
            text = instructions.read_text(encoding="utf-8", errors="replace")
        except OSError:
            text = ""
        if text.strip():
            text, _ = redact(text[:limit])
            parts.append(f"Project instructions from {instructions.name}:\n\n{text.strip()}")
    if predict_next:
        parts.append(PREDICTION_PROMPT)
    if extra.strip():
        parts.append(extra.strip())
    return "\n\n".join(parts) + "\n"
