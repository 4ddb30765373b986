"""The shell read-only proof against the whole labelled development corpus (dev.jsonl).

No `rw` command may be judged read-only, and at least 90 % of the `ro` commands must be allowed.
The corpus lives outside the repository (`../shared/shell-safety/dev.jsonl`, or the path in
QSHELL_SHELL_CORPUS); the checker is built from principles, not from its lines."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from qshell.shellproof import check

DEFAULT_CORPUS = Path(__file__).resolve().parents[3] / "shared" / "shell-safety" / "dev.jsonl"
MIN_RO_ALLOWED = 0.90


def load_corpus() -> list[dict[str, str]]:
    path = Path(os.environ.get("QSHELL_SHELL_CORPUS", DEFAULT_CORPUS))
    if not path.is_file():
        pytest.skip(f"shell corpus not found at {path} (set QSHELL_SHELL_CORPUS)")
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    assert rows and {row["label"] for row in rows} <= {"ro", "rw"}
    return rows


def test_no_writing_command_in_the_corpus_is_judged_read_only():
    leaked = [
        f"{row['command']!r} ({row.get('why', '')})"
        for row in load_corpus()
        if row["label"] == "rw" and check(row["command"]).read_only
    ]
    assert not leaked, "rw commands judged read-only:\n" + "\n".join(leaked)


def test_at_least_ninety_percent_of_read_only_commands_are_allowed():
    ro = [row["command"] for row in load_corpus() if row["label"] == "ro"]
    rejected = [(command, check(command).reason) for command in ro]
    rejected = [(command, reason) for command, reason in rejected if reason != "read-only"]
    rate = 1 - len(rejected) / len(ro)
    detail = "\n".join(f"{command!r}: {reason}" for command, reason in rejected)
    print(f"ro allowed: {rate:.1%} ({len(ro) - len(rejected)}/{len(ro)})\n{detail}")
    assert rate >= MIN_RO_ALLOWED, f"only {rate:.1%} of ro commands allowed:\n{detail}"
