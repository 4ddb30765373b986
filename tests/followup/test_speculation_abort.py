"""Aborting a speculation never waits: typing during a slow speculative tool returns at once,
the run stops as its tools honour the cancel, and the overlay goes when the run has ended.
Every wait is bounded; only the order of things is asserted, never elapsed time."""

from __future__ import annotations

import json
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from qshell.cancel import CancelToken
from qshell.config import ApprovalMode, Settings
from qshell.followup.gate import SpeculativeRunner
from qshell.followup.speculation import Speculation
from qshell.followup.speculator import Speculator
from qshell.followup.states import Status
from qshell.llm.messages import Message
from qshell.overlay import Overlay
from qshell.telemetry import Telemetry
from qshell.tools import tools_by_name
from qshell.tools.base import ErrorType, Kind, ToolContext, ToolResult
from qshell.tools.glob import GlobArgs, GlobTool
from qshell.tools.grep import GrepArgs, GrepTool
from qshell.tools.read_file import ReadFileArgs, ReadFileTool
from tests.agent.scripted import RecordingTool, call
from tests.followup.helpers import answered_conversation
from tests.waiting import wait_until

WAIT_S = 30.0
SUGGESTION = "look into it"


class StubbornTool(RecordingTool):
    """A read tool that blocks until the test lets it go, cancel or not (the worst case)."""

    def __init__(self) -> None:
        super().__init__("stubborn", Kind.READ)
        self.started = threading.Event()
        self.release = threading.Event()
        self.saw_cancel: bool | None = None

    def run(self, args: Any, ctx: ToolContext) -> ToolResult:
        self.started.set()
        self.release.wait(WAIT_S)
        self.saw_cancel = ctx.cancel.cancelled
        return ToolResult(llm_content="finally")


@pytest.fixture
def setup(tmp_path, monkeypatch):
    setup = answered_conversation(tmp_path, monkeypatch)
    return setup


@pytest.fixture
def pool():
    pool = ThreadPoolExecutor(2, thread_name_prefix="test-abort")
    yield pool
    pool.shutdown(wait=True)


def speculator_for(setup, pool, tmp_path: Path, started: list[Speculation]) -> Speculator:
    def submit(task):
        started.append(task.__self__)
        return pool.submit(task)

    telemetry = Telemetry(tmp_path / "telemetry.jsonl")
    return Speculator(setup.conversation, Settings(), submit_task=submit, telemetry=telemetry)


def records(tmp_path: Path) -> list[dict]:
    path = tmp_path / "telemetry.jsonl"
    lines = path.read_text().splitlines() if path.exists() else []
    return [r for r in map(json.loads, lines) if r["event"] == "speculation"]


def test_typing_during_a_slow_speculative_tool_returns_before_the_tool_ends(setup, pool, tmp_path):
    tool = StubbornTool()
    session = setup.conversation.session
    session.tools = [*session.tools, tool]
    session.tools_by_name = tools_by_name(session.tools)
    setup.script(
        Message.assistant("", [call("stubborn", json.dumps({"text": "x"}), "s1")]),
        Message.assistant("never reached"),
    )
    started: list[Speculation] = []
    speculator = speculator_for(setup, pool, tmp_path, started)
    speculator.user_typed("")
    speculator.start(SUGGESTION)
    assert tool.started.wait(WAIT_S)
    spec = started[-1]

    speculator.user_typed("something else")  # the keystroke: must not wait for the tool

    assert not tool.release.is_set() and not spec.done.is_set()  # it returned first
    assert spec.overlay.directory.exists()  # still in use by the running tool
    assert records(tmp_path) == []  # recorded once the run has really ended
    tool.release.set()
    assert spec.done.wait(WAIT_S)
    assert tool.saw_cancel is True
    assert spec.status is Status.ABORTED
    assert not spec.overlay.directory.exists()
    pool.shutdown(wait=True)
    assert [(r["outcome"], r["reason"]) for r in records(tmp_path)] == [("aborted", "typed")]


def test_a_slow_shell_command_is_killed_by_the_abort(setup, pool, tmp_path):
    fifo = setup.root / "pipe"
    os.mkfifo(fifo)  # `cat` blocks opening it until somebody writes: forever, here
    setup.script(
        Message.assistant("", [call("shell", json.dumps({"command": "cat pipe"}), "c1")]),
        Message.assistant("never reached"),
    )
    started: list[Speculation] = []
    speculator = speculator_for(setup, pool, tmp_path, started)
    speculator.user_typed("")
    speculator.start(SUGGESTION)
    spec = started[-1]
    assert wait_until(lambda: any(getattr(e, "name", "") == "shell" for e in spec.events), WAIT_S)
    speculator.user_typed("x")
    assert spec.done.wait(WAIT_S)
    assert spec.status is Status.ABORTED
    assert not spec.overlay.directory.exists()
    # nothing of it runs on, not even a sandbox that lost its outer process while starting
    assert wait_until(lambda: not _running_in(setup.root), WAIT_S)


def _running_in(root) -> bool:
    """Whether a live process names `root` on its command line (a sandbox binds it)."""
    needle = str(root).encode()
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{entry.name}/cmdline").read_bytes()
            state = Path(f"/proc/{entry.name}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if needle in cmdline and state != "Z":
            return True
    return False


def test_aborting_a_speculation_that_never_started_removes_its_overlay_at_once(setup):
    session = setup.conversation.session
    overlay = Overlay.create(session.project_root, session.tool_context.paths)
    spec = Speculation(session, SUGGESTION, overlay)
    ended: list[str] = []
    spec.abort(then=lambda: ended.append("recorded"))
    assert spec.done.is_set() and spec.status is Status.ABORTED
    assert not overlay.directory.exists() and ended == ["recorded"]
    spec.run()  # the pool ran it after all: it does nothing
    assert spec.status is Status.ABORTED


def cancelled_context(setup, overlay: Overlay) -> ToolContext:
    cancel = CancelToken()
    cancel.cancel()
    context = setup.conversation.session.tool_context
    return ToolContext(paths=context.paths, cancel=cancel, environ=context.environ)


@pytest.mark.parametrize(
    ("tool", "args"),
    [
        (ReadFileTool(), ReadFileArgs(path="a.txt")),
        (GrepTool(), GrepArgs(pattern="one")),
        (GlobTool(), GlobArgs(pattern="*.txt")),
    ],
)
def test_the_speculative_read_tools_honour_the_cancel(setup, tool, args):
    session = setup.conversation.session
    with Overlay.create(session.project_root, session.tool_context.paths) as overlay:
        runner = SpeculativeRunner(overlay, ApprovalMode.DEFAULT)
        result = runner.execute(tool, args, cancelled_context(setup, overlay))
    assert result.error is not None and result.error.type is ErrorType.CANCELLED


def test_a_speculative_shell_command_does_not_start_once_cancelled(setup):
    from qshell.tools.shell import ShellArgs, ShellTool

    session = setup.conversation.session
    with Overlay.create(session.project_root, session.tool_context.paths) as overlay:
        runner = SpeculativeRunner(overlay, ApprovalMode.DEFAULT)
        ctx = cancelled_context(setup, overlay)
        result = runner.execute(ShellTool(), ShellArgs(command="cat a.txt"), ctx)
    assert result.error is not None and result.error.type is ErrorType.CANCELLED
