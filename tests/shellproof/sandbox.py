"""A throwaway directory to run real tools in, and what running one there changed.

`Sandbox` lays out a small project (text, hex, JSON, archives, a subdirectory, a symlink)
and an empty HOME under a pytest tmp_path, runs a bash command line there with a minimal
environment and a timeout, and snapshots every entry (name, mode, mtime, content or link
target) of both trees so a test can tell whether the command wrote anything. The
environment carries `MARKER`, a value that appears in a command's output only when the
command printed its environment. Never run a command that touches the network with it.
"""

from __future__ import annotations

import gzip
import io
import os
import re
import shutil
import subprocess
import tarfile
from dataclasses import dataclass
from pathlib import Path
from shlex import quote

import pytest

from qshell.shellproof import check, sanitized_env

MARKER = "qshell-env-marker-5f3a"
RUN_TIMEOUT_S = 10.0
# the syscalls through which a tool reads a file's content or a directory's entries
READ_CALLS = "read,pread64,readv,preadv,getdents64,mmap,sendfile,splice,copy_file_range"
FD_PATH = re.compile(r"\d+<(/[^>]*)>")
FILE_CALL = re.compile(r'^(?:\d+ +)?\w+\((?:AT_FDCWD, |-?\d+, )?"([^"\\]*)"', re.MULTILINE)
EXECVE = re.compile(r'^(\d+) +execve\("([^"]*)".* = 0$')
TEXT = b"hello\nworld\nTODO fix\n"


@dataclass(frozen=True, slots=True)
class Case:
    """One argument form of a tool: what the proof must say and what running it shows.

    `verdict` is "ro" (proven read-only) or a piece of the refusal reason; `run` is SAME (it
    must leave both trees byte-identical and print no environment), WRITES (the real tool
    does change the directory), LEAKS (the real tool prints its environment) or NO (never run:
    network, programs, or nothing to show)."""

    command: str
    verdict: str = "ro"
    run: str = "same"


SAME, WRITES, LEAKS, NO = "same", "writes", "leaks", "no"


def tool_of(command: str) -> str:
    return command.split()[0]


Snapshot = dict[str, tuple[int, int, bytes]]


def snapshot(top: Path) -> Snapshot:
    """Every entry below `top` (hidden ones too, symlinks not followed)."""
    out: Snapshot = {}
    for directory, dirs, files in os.walk(top):
        for name in dirs + files:
            path = Path(directory, name)
            info = path.lstat()
            if path.is_symlink():
                body = b"-> " + os.readlink(path).encode()
            elif path.is_file():
                body = path.read_bytes()
            else:
                body = b""
            out[str(path.relative_to(top))] = (info.st_mode, info.st_mtime_ns, body)
    return out


class Sandbox:
    """A project directory and an empty HOME to run one real tool in."""

    def __init__(self, root: Path) -> None:
        self.work = root / "work"
        self.home = root / "home"
        self.work.mkdir()
        self.home.mkdir()
        self._populate()

    def _populate(self) -> None:
        work = self.work
        (work / "data.txt").write_bytes(TEXT)
        (work / "hex.txt").write_text(TEXT.hex() + "\n")
        (work / "data.json").write_text('{"name": "qshell", "list": [1, 2]}\n')
        (work / "magic").write_text("0\tstring\thello\thello text\n")
        (work / "sub").mkdir()
        (work / "sub" / "inner.txt").write_bytes(TEXT)
        (work / "link.txt").symlink_to("data.txt")
        (work / "data.gz").write_bytes(gzip.compress(TEXT, mtime=0))
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w") as archive:
            info = tarfile.TarInfo("member.txt")
            info.size = len(TEXT)
            archive.addfile(info, io.BytesIO(TEXT))
        (work / "archive.tar").write_bytes(buffer.getvalue())
        (work / "archive.tar.gz").write_bytes(gzip.compress(buffer.getvalue(), mtime=0))

    def init_git(self) -> None:
        """Make the work tree a git repository with one commit (before any snapshot)."""
        steps = [
            "git init -q",
            "git add data.txt hex.txt sub",
            "git -c user.name=t -c user.email=t@x commit -qm first",
            "git config user.name tester",
        ]
        for step in steps:
            assert self.run(step).returncode == 0, step

    def env(self) -> dict[str, str]:
        """The environment a proven command runs in (shellproof.sanitized_env), over a
        minimal one, plus `MARKER` (sanitized_env keeps only a few of the user's variables;
        the marker stands for whatever a command that prints its environment would show)."""
        return {**sanitized_env(self.base_env(), root=str(self.work)), "MARKER": MARKER}

    def base_env(self) -> dict[str, str]:
        return {
            "PATH": "/usr/bin:/bin:/usr/sbin:/sbin",
            "HOME": str(self.home),
            "LANG": "C.UTF-8",
            "LC_ALL": "C.UTF-8",
            "TERM": "dumb",
            "NO_COLOR": "1",
        }

    def run(self, command: str) -> subprocess.CompletedProcess[bytes]:
        try:
            return subprocess.run(
                ["bash", "--noprofile", "--norc", "-c", command],
                cwd=self.work,
                env=self.env(),
                stdin=subprocess.DEVNULL,
                capture_output=True,
                timeout=RUN_TIMEOUT_S,
                check=False,
            )
        except subprocess.TimeoutExpired:
            pytest.fail(f"{command!r} did not end within {RUN_TIMEOUT_S} s")

    def traced_reads(self, command: str) -> set[Path] | None:
        """The files and directories inside the work tree that `command` really reads (by
        strace), or None when strace is not installed or cannot trace here."""
        if shutil.which("strace") is None:
            return None
        log = self.work.parent / "strace.log"
        calls = f"execve,{READ_CALLS}"
        done = self.run(f"strace -f -qq -y -e trace={calls} -o {log} bash -c {quote(command)}")
        if not log.exists() or b"ptrace" in done.stderr:
            return None
        found = tool_reads(log.read_text(errors="replace"))
        log.unlink()
        work = self.work.resolve()
        return {p for p in found if p == work or work in p.parents}

    def looked_at(self, command: str) -> set[Path] | None:
        """The paths below the work tree or HOME that bash itself stats, tests for access or
        opens while running `command` (what a file test reveals), by strace; None when strace
        is not installed or cannot trace here."""
        if shutil.which("strace") is None:
            return None
        log = self.work.parent / "strace.log"
        done = self.run(f"strace -qq -e trace=%file -o {log} bash -c {quote(command)}")
        if not log.exists() or b"ptrace" in done.stderr:
            return None
        named = {Path(os.path.normpath(self.work / m)) for m in FILE_CALL.findall(log.read_text())}
        log.unlink()
        return {
            p for p in named if self.work in p.parents or p == self.home or self.home in p.parents
        }

    def expand(self, raw: str) -> list[Path]:
        """What bash makes of a read's source text in the work tree."""
        done = self.run(f'printf "%s\\0" {raw}')
        return [self.work / t for t in done.stdout.decode().split("\0")[:-1] if t]

    def state(self) -> tuple[Snapshot, Snapshot]:
        return snapshot(self.work), snapshot(self.home)


def tool_reads(log: str) -> set[Path]:
    """The paths read in an strace log by the programs bash started, not by bash itself
    (bash reads a directory to expand a glob before it runs the command)."""
    tools: set[str] = set()
    found: set[Path] = set()
    for line in log.splitlines():
        pid = line.split(" ", 1)[0]
        started = EXECVE.match(line)
        if started:
            if Path(started.group(2)).name != "bash":
                tools.add(pid)
        elif pid in tools:
            found.update(Path(m) for m in FD_PATH.findall(line))
    return found


BASH_BUILTINS = frozenset(
    [":", "type", "command", "printf", "echo", "true", "false", "pwd", "test", "["]
)


def require(tool: str) -> None:
    if tool not in BASH_BUILTINS and shutil.which(tool) is None:
        pytest.skip(f"{tool} is not installed")


def assert_verdict(case: Case) -> None:
    verdict = check(case.command)
    if case.verdict == "ro":
        assert verdict.read_only, f"{case.command!r}: {verdict.reason}"
    else:
        assert not verdict.read_only, f"{case.command!r} was proven read-only"
        assert case.verdict in verdict.reason, verdict.reason


def run_case(case: Case, sandbox: Sandbox) -> None:
    """Check the proof's verdict, then show on the real tool that it is right."""
    assert_verdict(case)
    if case.run == NO:
        return
    require(tool_of(case.command))
    before = sandbox.state()
    done = sandbox.run(case.command)
    output = done.stdout + done.stderr
    after = sandbox.state()
    if case.run == SAME:
        assert after == before, f"{case.command!r} changed the directory"
        assert MARKER.encode() not in output, f"{case.command!r} printed its environment"
        assert_reads_reported(case.command, sandbox)
    elif case.run == WRITES:
        assert after != before, f"{case.command!r} wrote nothing: {output!r}"
    else:
        assert MARKER.encode() in output, f"{case.command!r} printed no environment"


def assert_reads_reported(command: str, sandbox: Sandbox) -> None:
    """Everything the real tool reads in the work tree is a read the proof reported: the
    path itself, or a path below one it reported as recursive."""
    really = sandbox.traced_reads(command)
    if really is None:
        return
    reported: list[tuple[Path, bool]] = []
    for read in check(command).reads:
        if "$(" in read.raw:
            return  # names that arrive at run time (xargs): nothing to compare with
        paths = [sandbox.work / read.text] if read.literal else sandbox.expand(read.raw)
        reported += [(Path(os.path.normpath(p)).resolve(), read.recursive) for p in paths]
    if command.startswith("git "):
        # git reads its own repository, lists directories, and reads the tracked files it
        # compares (status, diff): the proof reports none of these (a tracked secret is the
        # caller's to check, from `git ls-files`)
        git = (sandbox.work / ".git").resolve()
        listed = sandbox.run("git ls-files").stdout.decode().split()
        tracked = {(sandbox.work / name).resolve() for name in listed}
        really = {
            p
            for p in really
            if p != git and git not in p.parents and not p.is_dir() and p not in tracked
        }
    for path in really:
        covered = any(
            path == top or (recursive and top in path.parents) for top, recursive in reported
        )
        assert covered, f"{command!r} read {path.relative_to(sandbox.work.resolve())}, not reported"
