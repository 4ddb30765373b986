"""What a speculated command the proof cannot read reaches of the user's secrets, through
the full REPL (pexpect, scripted server). A virtual environment and a Node install on PATH
carry a token in `pip.conf`, `.pypirc`, `credentials.toml` and `etc/npmrc`; the suggested
prompt's `cat … | tee /dev/stderr`, its names computed at run time, meets the masks the
jail binds over them, and that failure makes the call a boundary: on accept it is asked
live, and no request the server receives holds a planted value. Nor does such a command
reach a key of the user's session keyring (the jail's seccomp filter refuses the keyring
calls), nor start more processes than `sandbox.maxProcesses`, as root too (`ulimit -u`
alone does not bind root). Skipped where no overlay sandbox works."""

from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path

import pytest

from qshell.sandbox import probe
from tests.e2e.accepting import asked_live, finished, quit_repl, speculating
from tests.sandbox.test_closed import FORKS, NUMBERS, READ_KEY, SECRET
from tests.sandbox.test_masked_names import toolchains
from tests.secret_files import leaked

FOUND = probe()
pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(not FOUND.overlay, reason=FOUND.reason or "no overlay sandbox"),
]


def test_a_speculated_command_reading_a_toolchain_credential_stops_there(
    llm_server, tmp_path: Path, isolated_home: Path
):
    project = tmp_path / "proj"
    project.mkdir()
    (project / "hello.txt").write_text("hello world\n")
    entries, planted = toolchains(isolated_home)
    path = ":".join([*map(str, entries), os.environ["PATH"]])
    # each name computed, so no word of the command names the file: the jail's mask is met
    names = " ".join(f"$(printf %s {shlex.quote(p[:-2])} {shlex.quote(p[-2:])})" for p in planted)
    command = f"venv-tool; node-tool; cat {names} | tee /dev/stderr; echo read-them"
    asked_live(llm_server, project, (), command, "read-them", "n", env={"PATH": path})
    assert all(leaked(r.raw.decode("utf-8", "replace"), planted) == [] for r in llm_server.requests)


# joins a fresh session keyring holding a key as qshell starts (then forgets the secret):
# the user's own session, whose keys a jailed command must not reach
KEYRING_SHIM = """
import ctypes, os
secret = os.environ.pop("QSHELL_TEST_KEY", None)
if secret is not None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.syscall({keyctl}, 1, None) >= 0:  # KEYCTL_JOIN_SESSION_KEYRING, anonymous
        libc.syscall({add_key}, b"user", b"qshell-test", secret.encode(), len(secret), -3)
"""


@pytest.mark.skipif(os.uname().machine not in NUMBERS, reason="keyctl numbers unknown here")
def test_a_speculated_command_reaches_no_key_of_the_users_session(
    llm_server, tmp_path: Path, isolated_home: Path
):
    numbers = NUMBERS[os.uname().machine]
    shim = tmp_path / "shim"
    shim.mkdir()
    (shim / "sitecustomize.py").write_text(KEYRING_SHIM.format(**numbers))
    project = tmp_path / "proj"
    project.mkdir()
    (project / "hello.txt").write_text("hello world\n")
    python_path = os.pathsep.join(filter(None, [str(shim), os.environ.get("PYTHONPATH")]))
    env = {"PYTHONPATH": python_path, "QSHELL_TEST_KEY": SECRET}
    command = f"python3 -c '{READ_KEY.format(**numbers)}'; echo read-it"
    child, answer, _ = speculating(llm_server, project, command, "read-it", "--yolo", env=env)
    finished(llm_server, child, answer)
    quit_repl(child)
    results = [str(m["content"]) for r in llm_server.requests for m in r.body["messages"]]
    result = next(c for c in results if "read-it" in c)
    assert "search -1 38" in result, result  # ENOSYS: the jail has no keyring calls
    assert not any(SECRET in r.raw.decode("utf-8", "replace") for r in llm_server.requests)


@pytest.mark.skipif(os.geteuid() != 0, reason="the rlimit binds every other user")
def test_a_speculated_command_starts_no_more_processes_than_the_cap_as_root(
    llm_server, tmp_path: Path
):
    project = tmp_path / "proj"
    project.mkdir()
    (project / "hello.txt").write_text("hello world\n")
    # the interpreter itself: a shim that forks (pyenv's) would meet the cap first
    command = f'ulimit -u 5; {shlex.quote(sys.executable)} -c "{FORKS}"; echo forked-them'
    env = {"QSHELL_SANDBOX__MAX_PROCESSES": "8"}
    child, answer, _ = speculating(llm_server, project, command, "forked-them", "--yolo", env=env)
    finished(llm_server, child, answer)
    quit_repl(child)
    results = [str(m["content"]) for r in llm_server.requests for m in r.body["messages"]]
    result = next(c for c in results if "forked-them" in c)
    children = int(result.split("children ")[1].split()[0])
    assert 0 < children < 8, result
