"""`sandbox.enabled` against what the machine has: `off` uses none; `auto` without
bubblewrap keeps the proof alone and says why once; `on` without it lets no command run
without asking, saying why; the probe's answer is cached per boot."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from qshell.config import SandboxMode
from qshell.permissions.confine import confinement
from qshell.permissions.policy import shell_concern
from qshell.sandbox import probe
from qshell.sandbox.probe import CACHE_NAME
from qshell.tools.base import ToolContext
from qshell.tools.paths import PathResolver


@pytest.fixture
def no_bwrap(monkeypatch, tmp_path):
    """A PATH on which bwrap cannot be found."""
    empty = tmp_path / "bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))


def context(root: Path, mode: SandboxMode) -> ToolContext:
    paths = PathResolver(root, home=Path(os.environ["HOME"]))
    confined = confinement(mode, paths, os.environ, None)
    return ToolContext(
        paths=paths,
        sandbox=confined.launcher,
        sandbox_missing=confined.missing,
        sandbox_note=confined.note,
        sandbox_mode=confined.mode,
    )


def test_off_uses_no_sandbox(tmp_path):
    ctx = context(tmp_path, SandboxMode.OFF)
    assert ctx.sandbox is None and ctx.sandbox_mode.startswith("off")
    assert shell_concern("ls", ctx) is None


def test_auto_without_bubblewrap_keeps_the_proof_and_says_why(tmp_path, no_bwrap):
    ctx = context(tmp_path, SandboxMode.AUTO)
    assert ctx.sandbox is None and "bwrap is not installed" in ctx.sandbox_note
    assert shell_concern("ls", ctx) is None


def test_on_without_bubblewrap_runs_no_command_without_asking(tmp_path, no_bwrap):
    ctx = context(tmp_path, SandboxMode.ON)
    concern = shell_concern("ls", ctx)
    assert concern is not None and "sandbox.enabled: on" in concern and "bwrap" in concern


def test_the_probe_is_cached_for_this_boot(tmp_path, no_bwrap):
    first = probe(tmp_path)
    record = json.loads((tmp_path / CACHE_NAME).read_text())
    assert record["probe"]["jail"] is False and record["key"]["bwrap"] is None
    record["probe"]["reason"] = "from the cache"
    (tmp_path / CACHE_NAME).write_text(json.dumps(record))
    assert probe(tmp_path).reason == "from the cache" != first.reason
