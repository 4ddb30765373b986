from __future__ import annotations

import dataclasses
import os
import shlex
import signal
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from qshell.tools import procgroup
from qshell.tools.base import ErrorType, ToolContext, ToolResult
from qshell.tools.shell import ShellArgs, ShellTool, is_terminal_command
from tests.waiting import wait_until

TOOL = ShellTool()
GONE_BOUND_S = 15.0


def sh(ctx: ToolContext, command: str, timeout: float | None = None):
    return TOOL.run(ShellArgs(command=command, timeout=timeout), ctx)


def alive(pid: int) -> bool:
    """True while `pid` runs; a zombie counts as gone (PID 1 may never reap orphans)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def read_pid(path: Path) -> int:
    assert wait_until(lambda: path.exists() and path.read_text().strip() != "", GONE_BOUND_S)
    return int(path.read_text())


def sh_cancelled_once_started(
    ctx: ToolContext, pid_file: Path, command: str, timeout: float | None = None
) -> ToolResult:
    """Run `command`, cancelling `ctx` from another thread once it wrote `pid_file`."""

    def cancel_once_started() -> None:
        wait_until(lambda: pid_file.exists() and pid_file.read_text().strip() != "", GONE_BOUND_S)
        ctx.cancel.cancel()

    canceller = threading.Thread(target=cancel_once_started)
    canceller.start()
    result = sh(ctx, command, timeout=timeout)
    canceller.join()
    return result


def assert_the_child_ended(
    result: ToolResult, error: ErrorType, pid_file: Path, stray_pids: list[int]
) -> None:
    """The call failed with `error`, and the child whose pid is in `pid_file` is gone."""
    pid = read_pid(pid_file)
    stray_pids.append(pid)
    assert result.error is not None and result.error.type is error
    assert wait_until(lambda: not alive(pid), GONE_BOUND_S)


@pytest.fixture
def stray_pids() -> Iterator[list[int]]:
    """Pids a test started; any still alive at the end are killed."""
    pids: list[int] = []
    yield pids
    for pid in pids:
        if alive(pid):
            os.kill(pid, signal.SIGKILL)


def test_shell_returns_output_and_exit_code(ctx: ToolContext) -> None:
    result = sh(ctx, "echo hello")
    assert result.error is None
    assert result.llm_content == "hello\n[exit code: 0]"


def test_shell_merges_stdout_and_stderr_in_order(ctx: ToolContext) -> None:
    result = sh(ctx, "echo one; echo two >&2; echo three")
    assert result.llm_content.splitlines()[:3] == ["one", "two", "three"]


def test_shell_runs_in_the_project_root(root: Path, ctx: ToolContext) -> None:
    assert sh(ctx, "pwd").llm_content.splitlines()[0] == str(root)


def test_shell_uses_the_context_environment(ctx: ToolContext) -> None:
    env = {**ctx.environ, "QSHELL_TOOL_TEST": "from-ctx"}
    result = sh(dataclasses.replace(ctx, environ=env), "echo $QSHELL_TOOL_TEST")
    assert result.llm_content.startswith("from-ctx")


def test_shell_closes_stdin(ctx: ToolContext) -> None:
    result = sh(ctx, "cat; echo done")
    assert result.llm_content == "done\n[exit code: 0]"


def test_shell_says_when_there_is_no_output(ctx: ToolContext) -> None:
    assert sh(ctx, "true").llm_content == "(no output)\n[exit code: 0]"


def test_shell_nonzero_exit_is_an_error_that_keeps_the_output(ctx: ToolContext) -> None:
    result = sh(ctx, "echo partial; exit 3")
    assert result.error is not None and result.error.type is ErrorType.NONZERO_EXIT
    assert "partial" in result.llm_content
    assert "[exit code: 3]" in result.llm_content


def test_shell_reports_a_command_killed_by_a_signal(ctx: ToolContext) -> None:
    result = sh(ctx, "kill -9 $$")
    assert result.error is not None and result.error.type is ErrorType.NONZERO_EXIT
    assert "SIGKILL" in result.llm_content


def test_shell_caps_output_keeping_head_and_tail(ctx: ToolContext) -> None:
    small = dataclasses.replace(ctx, max_output_chars=1000)
    result = sh(small, "seq 1 100000")
    lines = result.llm_content.splitlines()
    assert lines[:3] == ["1", "2", "3"]
    assert "100000" in lines
    assert "omitted" in result.llm_content
    assert len(result.llm_content) < 1200


def test_shell_timeout_kills_the_whole_process_group(
    root: Path, ctx: ToolContext, stray_pids: list[int]
) -> None:
    result = sh(ctx, "sleep 60 & echo $! > child.pid; echo started; wait", timeout=0.5)
    assert_the_child_ended(result, ErrorType.TIMEOUT, root / "child.pid", stray_pids)
    assert "started" in result.llm_content


def test_a_timeout_ends_a_child_that_left_for_a_session_of_its_own(
    root: Path, ctx: ToolContext, stray_pids: list[int]
) -> None:
    """A process that moved to a new session (as the sandbox's init does: bubblewrap's
    --new-session) is out of the command's group; the timeout still ends it, found as a
    descendant before its parent dies."""
    command = "setsid sleep 60 & echo $! > child.pid; wait"
    result = sh(ctx, command, timeout=0.5)
    assert_the_child_ended(result, ErrorType.TIMEOUT, root / "child.pid", stray_pids)


def test_a_cancel_ends_an_orphan_that_carries_the_commands_marker(
    root: Path, ctx: ToolContext, stray_pids: list[int]
) -> None:
    """A process that left the group and was orphaned before any signal (a sandbox whose
    outer process died while setting up) is found by the marker in its environment."""
    command = "(setsid sleep 60 & echo $! > child.pid) ; sleep 60"
    pid_file = root / "child.pid"
    result = sh_cancelled_once_started(ctx, pid_file, command, timeout=30)
    assert_the_child_ended(result, ErrorType.CANCELLED, pid_file, stray_pids)
    environ = Path(f"/proc/{os.getpid()}/environ").read_bytes()
    assert procgroup.COMMAND_ID_VARIABLE.encode() not in environ  # only the command's


def test_shell_timeout_escalates_to_sigkill(
    root: Path, ctx: ToolContext, stray_pids: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(procgroup, "KILL_GRACE_S", 0.2)
    command = "trap '' TERM; sleep 60 & echo $! > child.pid; wait"
    result = sh(ctx, command, timeout=0.5)
    assert_the_child_ended(result, ErrorType.TIMEOUT, root / "child.pid", stray_pids)


def test_shell_cancel_from_another_thread_kills_the_group(
    root: Path, ctx: ToolContext, stray_pids: list[int]
) -> None:
    pid_file = root / "child.pid"
    result = sh_cancelled_once_started(ctx, pid_file, "sleep 60 & echo $! > child.pid; wait")
    assert_the_child_ended(result, ErrorType.CANCELLED, pid_file, stray_pids)


def test_shell_does_not_start_when_already_cancelled(
    root: Path, cancelled_ctx: ToolContext
) -> None:
    result = sh(cancelled_ctx, "touch ran")
    assert result.error is not None and result.error.type is ErrorType.CANCELLED
    assert not (root / "ran").exists()


def test_shell_returns_when_a_background_job_keeps_the_pipe_open(
    ctx: ToolContext, stray_pids: list[int]
) -> None:
    result = sh(ctx, "sleep 30 & echo $!")
    pid = int(result.llm_content.splitlines()[0])
    stray_pids.append(pid)
    assert result.error is None
    assert result.llm_content.endswith("[exit code: 0]")


def test_shell_rejects_an_empty_command(ctx: ToolContext) -> None:
    result = sh(ctx, "   ")
    assert result.error is not None and result.error.type is ErrorType.INVALID_ARGS


def test_shell_reports_when_bash_cannot_start(ctx: ToolContext) -> None:
    broken = dataclasses.replace(ctx, environ={"PATH": "/nonexistent"})
    result = sh(broken, "echo hi")
    assert result.error is not None and result.error.type is ErrorType.IO


def test_shell_accesses_no_paths(ctx: ToolContext) -> None:
    assert TOOL.accesses(ShellArgs(command="ls"), ctx) == []


def test_a_timeout_the_call_asks_for_is_capped_by_the_context(ctx: ToolContext) -> None:
    capped = dataclasses.replace(ctx, shell_timeout_cap_s=0.3)
    result = sh(capped, "sleep 30", timeout=500)
    assert result.error is not None and result.error.type is ErrorType.TIMEOUT
    assert "0.3 s" in result.display or "0.3 s" in result.llm_content


@pytest.mark.parametrize(
    ("command", "terminal"),
    [
        ("cat a.txt", True),
        ("git status", True),
        ("git log --oneline -3", True),
        ("cat a.txt | head", False),
        ("cat $(ls)", False),
        ("cat *.txt", False),
        ("git diff", False),
        ("ls", False),
        ("echo 'unclosed", False),
    ],
)
def test_plain_cat_and_git_status_or_log_are_terminal(command: str, terminal: bool) -> None:
    assert is_terminal_command(command) is terminal


def test_a_cat_result_is_terminal_but_never_skips_the_round(root: Path, ctx: ToolContext) -> None:
    (root / "a.txt").write_text("hello\n")
    result = sh(ctx, "cat a.txt")
    assert result.llm_content.startswith("hello") and result.result_is_terminal
    assert not result.skip_llm_round
    assert not sh(ctx, "echo hi").result_is_terminal


def test_a_background_command_runs_at_the_lowest_priority_with_all_it_starts(
    ctx: ToolContext,
) -> None:
    """A speculation's command takes only CPU nothing else wants: the idle scheduling class
    (policy 5 in /proc's stat) or, without chrt, niceness 19 — its children too — and its
    session's autogroup at niceness 19 where the kernel has autogroups."""
    stat = "awk '{print $41, $19}' /proc/self/stat"
    command = f"{stat}; bash -c {shlex.quote(stat)}; cat /proc/self/autogroup 2>/dev/null"
    quiet = sh(ctx, command).llm_content.splitlines()
    background = sh(dataclasses.replace(ctx, background=True), command).llm_content.splitlines()
    assert quiet[:2] == ["0 0", "0 0"]
    assert background[:2] in (["5 0", "5 0"], ["0 19", "0 19"])
    if os.path.exists("/proc/self/autogroup"):
        assert quiet[2].endswith(" nice 0") and background[2].endswith(" nice 19")
