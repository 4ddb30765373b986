"""shell: run one bash command in the project root and return its combined output.

The command runs as `bash -c` in its own process group with stdin closed; stdout and
stderr are merged in order by one reader thread into a head-and-tail buffer, so memory is
bounded and a full pipe can never deadlock. On timeout or cancellation the whole group is
terminated (SIGTERM, then SIGKILL), and with it every group its processes made (the
sandbox's own session: tools/procgroup.py `Group`). Background processes that outlive a normal exit are
left running, but the tool stops reading their output shortly after the command exits,
which it sees the moment it happens (a pidfd, `_ExitWatch`), not at its next poll.
When the context has a `launcher` (the sandbox, for a command qshell runs on its own),
it starts the command: `bash -c` runs inside it. A `background` context's command (a
speculation's) runs under the idle scheduling class (`chrt --idle 0`; `nice -n 19` where
there is no chrt), with all it starts, in a session whose autogroup is at niceness 19
(the kernel shares the CPU between sessions first): it takes only CPU nothing else
wants, so the user's own turn never waits on a guess.
It does not judge whether a command is safe (that is policy's job), but it refuses a
command holding a redaction marker of this session (`unready`): bash cannot put the
secret back, so the command would write the marker where a secret was, or send it. Stateless: each call
owns its process and reader thread, so concurrent calls are independent. A plain `cat`,
`git status` or `git log` marks its result `result_is_terminal` (tools/base.py).
"""

from __future__ import annotations

import functools
import math
import os
import secrets
import select
import selectors
import shlex
import shutil
import signal
import subprocess
import threading
import time
from dataclasses import replace
from typing import IO, ClassVar

from pydantic import BaseModel, ConfigDict, Field

from qshell.tools.base import (
    MAX_SHELL_TIMEOUT_S,
    Access,
    ErrorType,
    Kind,
    ToolContext,
    ToolError,
    ToolResult,
)
from qshell.tools.procgroup import COMMAND_ID_VARIABLE, Group, end_group
from qshell.tools.truncate import HeadTailBuffer

TERMINAL_UNSAFE = frozenset("|;&<>`$(){}*?[]\n")
TERMINAL_GIT = frozenset({("git", "status"), ("git", "log")})

POST_EXIT_DRAIN_S = 1.0
READ_CHUNK_BYTES = 65536
WAIT_POLL_S = 0.05


class ShellArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    command: str = Field(description="The bash command line to run in the project root.")
    timeout: float | None = Field(
        default=None,
        gt=0,
        description=f"Seconds before the command is killed (default from settings, max "
        f"{MAX_SHELL_TIMEOUT_S:.0f}).",
    )


class _Reader:
    """Copies a pipe into a HeadTailBuffer on a daemon thread until EOF or `finish`."""

    def __init__(self, pipe: IO[bytes], sink: HeadTailBuffer) -> None:
        self._pipe = pipe
        self._sink = sink
        self._halt = threading.Event()
        self._thread = threading.Thread(target=self._run, name="shell-output", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        fd = self._pipe.fileno()
        with selectors.DefaultSelector() as selector:
            selector.register(fd, selectors.EVENT_READ)
            while not self._halt.is_set():
                if not selector.select(WAIT_POLL_S):
                    continue
                try:
                    data = os.read(fd, READ_CHUNK_BYTES)
                except OSError:
                    return
                if not data:
                    return
                self._sink.write(data)

    def finish(self, grace_s: float) -> None:
        """Wait up to `grace_s` for EOF, then stop reading and close the pipe."""
        self._thread.join(grace_s)
        self._halt.set()
        self._thread.join()
        self._pipe.close()


class ShellTool:
    name: ClassVar[str] = "shell"
    kind: ClassVar[Kind] = Kind.EXECUTE
    description: ClassVar[str] = (
        "Run a bash command in the project root and return its combined stdout and stderr "
        "plus the exit code. stdin is closed, so interactive programs fail; pass flags that "
        "avoid prompts and pagers. Long output keeps its beginning and end. The command and "
        "everything it started are killed on timeout. Redirect the output of background "
        "jobs (e.g. `cmd > log 2>&1 &`). Prefer read_file, grep, glob and edit for files."
    )
    Args: ClassVar[type[BaseModel]] = ShellArgs

    def accesses(self, args: ShellArgs, ctx: ToolContext) -> list[Access]:
        return []

    def unready(self, args: ShellArgs, ctx: ToolContext) -> ToolResult | None:
        """The failure a command meets whatever the user answers: one that holds a marker
        standing for a secret the model was shown redacted."""
        markers = ctx.secrets.given(args.command)
        if not markers:
            return None
        return ToolResult.fail(
            ErrorType.REDACTION_MARKER,
            f"{', '.join(markers)} stands for a secret qshell hid from you; a shell command "
            "cannot use it or write it back, so this one did not run. To change a file that "
            "holds it, use edit or write_file, which put it back in place",
        )

    def run(self, args: ShellArgs, ctx: ToolContext) -> ToolResult:
        if not args.command.strip():
            return ToolResult.fail(ErrorType.INVALID_ARGS, "command must not be empty")
        refused = self.unready(args, ctx)
        if refused is not None:
            return refused
        if ctx.cancel.cancelled:
            return ToolResult.fail(ErrorType.CANCELLED, "cancelled before the command started")
        timeout_s = min(args.timeout or ctx.shell_timeout_s, ctx.shell_timeout_cap_s)
        marker = secrets.token_hex(8)  # finds its processes wherever they went (procgroup.py)
        argv, environ = ["bash", "-c", args.command], {**ctx.environ, COMMAND_ID_VARIABLE: marker}
        try:
            if ctx.launcher is not None:
                argv, environ = ctx.launcher.wrap(argv, environ)
            if ctx.background:
                argv = [*yielding(), *argv]
            proc = subprocess.Popen(
                argv,
                cwd=ctx.paths.root,
                env=environ,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        except OSError as exc:
            return ToolResult.fail(ErrorType.IO, f"could not start bash: {exc}")
        half = max(ctx.max_output_chars // 2, 1)
        output = HeadTailBuffer(half, half)
        assert proc.stdout is not None
        reader = _Reader(proc.stdout, output)
        group = Group(proc.pid, marker)
        stop = _wait(proc, ctx, timeout_s, group)
        if stop is not None:
            end_group(proc, group=group)
        reader.finish(POST_EXIT_DRAIN_S)
        result = _result(output.text(), proc.returncode, stop, timeout_s)
        return replace(result, result_is_terminal=is_terminal_command(args.command))


# a command starts a session of its own, and with it an autogroup, which the kernel gives a
# fair share of the CPU whatever its tasks' classes: the group's own niceness first
_AUTOGROUP = 'echo 19 > /proc/self/autogroup 2>/dev/null; exec "$@"'


@functools.cache
def yielding() -> tuple[str, ...]:
    """What runs a command at the lowest priority: its autogroup (the session it starts)
    at niceness 19 where the kernel groups by session, then the idle scheduling class, or
    the highest niceness where there is no `chrt`."""
    shell = shutil.which("sh")
    group = (shell, "-c", _AUTOGROUP, "sh") if shell is not None else ()
    chrt = shutil.which("chrt")
    if chrt is not None:
        return (*group, chrt, "--idle", "0")
    nice = shutil.which("nice")
    return (*group, nice, "-n", "19") if nice is not None else group


def _wait(
    proc: subprocess.Popen[bytes], ctx: ToolContext, timeout_s: float, group: Group
) -> ErrorType | None:
    """Wait for the command; TIMEOUT or CANCELLED when it has to be stopped, else None."""
    cancelled = threading.Event()

    def on_cancel() -> None:
        cancelled.set()
        group.signal(signal.SIGTERM)

    unregister = ctx.cancel.on_cancel(on_cancel)
    exited = _ExitWatch(proc)
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return ErrorType.TIMEOUT
            if not exited.wait(min(WAIT_POLL_S, remaining)):
                if cancelled.is_set():
                    return ErrorType.CANCELLED
                continue
            return ErrorType.CANCELLED if cancelled.is_set() else None
    finally:
        exited.close()
        unregister()


class _ExitWatch:
    """Waits for a process to end and reaps it, woken the moment it does: through a pidfd
    (Linux 5.3), which `poll` sees readable once the process exited. Where there is none,
    `Popen.wait`, which polls with sleeps that double up to the timeout (a command ending
    at 16 ms was then seen at 31 ms)."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self._proc = proc
        self._poll: select.poll | None = None
        try:
            self._fd: int | None = os.pidfd_open(proc.pid)
        except (AttributeError, OSError):
            self._fd = None
            return
        self._poll = select.poll()
        self._poll.register(self._fd, select.POLLIN)

    def wait(self, timeout_s: float) -> bool:
        """Whether the process ended (and was reaped) within `timeout_s`."""
        if self._poll is None:
            try:
                self._proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                return False
            return True
        self._poll.poll(max(1, math.ceil(timeout_s * 1000)))
        return self._proc.poll() is not None

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def is_terminal_command(command: str) -> bool:
    """Whether the command's output is already the form a user reads (seed 004's table:
    `cat`, `git status`, `git log`) — one plain command, no pipes, redirects or
    expansions. It sets `result_is_terminal`, never `skip_llm_round`."""
    if any(c in TERMINAL_UNSAFE for c in command):
        return False
    try:
        words = shlex.split(command)
    except ValueError:
        return False
    return bool(words) and (words[0] == "cat" or tuple(words[:2]) in TERMINAL_GIT)


def _exit_note(returncode: int) -> str:
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        return f"[exit code: {returncode} (killed by {name})]"
    return f"[exit code: {returncode}]"


def _result(text: str, returncode: int, stop: ErrorType | None, timeout_s: float) -> ToolResult:
    body = text.rstrip("\n") or "(no output)"
    if stop is ErrorType.TIMEOUT:
        message = f"command timed out after {timeout_s:g} s; it and its children were killed"
    elif stop is ErrorType.CANCELLED:
        message = "command was cancelled; it and its children were killed"
    elif returncode != 0:
        message = f"command exited with code {returncode}"
    else:
        full = f"{body}\n{_exit_note(returncode)}"
        return ToolResult(llm_content=full, display=full)
    full = f"{body}\n{_exit_note(returncode)}"
    if stop is not None:
        full += f"\n[{message}]"
    error_type = stop or ErrorType.NONZERO_EXIT
    return ToolResult(llm_content=full, display=full, error=ToolError(error_type, message))
