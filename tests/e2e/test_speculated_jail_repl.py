"""What a speculated command the proof cannot read sees of the user's toolchains, through
the full REPL (pexpect, scripted server): a virtual environment and a Node install on
PATH carry a token in `pip.conf`, `.pypirc`, `credentials.toml` and `etc/npmrc`; the
suggested prompt's `cat … | tee /dev/stderr` runs in the speculation's jail, where the
jail binds those toolchains back with their credential files masked, so no request the
server receives — the speculation's rounds included — holds a planted value, while the
toolchains' own programs still run there. The jail is the fence tested here: each read is
refused, so the content scanner behind it has nothing to redact. Nor does such a command
reach a key of the user's session keyring (the jail's seccomp filter refuses the keyring
calls). Skipped where no overlay sandbox works."""

from __future__ import annotations

import os
import shlex
from pathlib import Path

import pytest

from qshell.sandbox import probe
from tests.e2e.accepting import finished, quit_repl, speculating
from tests.sandbox.test_closed import NUMBERS, READ_KEY, SECRET
from tests.sandbox.test_masked_names import toolchains
from tests.secret_files import leaked

FOUND = probe()
pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(not FOUND.overlay, reason=FOUND.reason or "no overlay sandbox"),
]


def test_a_speculated_command_reads_no_toolchain_credential(
    llm_server, tmp_path: Path, isolated_home: Path
):
    project = tmp_path / "proj"
    project.mkdir()
    (project / "hello.txt").write_text("hello world\n")
    entries, planted = toolchains(isolated_home)
    path = ":".join([*map(str, entries), os.environ["PATH"]])
    command = f"venv-tool; node-tool; cat {shlex.join(planted)} | tee /dev/stderr; echo read-them"
    child, answer, _ = speculating(
        llm_server, project, command, "read-them", "--yolo", env={"PATH": path}
    )
    finished(llm_server, child, answer)
    quit_repl(child)
    seen = [r.raw.decode("utf-8", "replace") for r in llm_server.requests]
    results = [m["content"] for r in llm_server.requests for m in r.body["messages"]]
    result = next(str(c) for c in results if "read-them" in str(c))
    assert "venv tool ran" in result and "node tool ran" in result  # the toolchains are there
    assert "No such file" not in result, result  # and so are the files, masked:
    assert result.count("Permission denied") == len(planted), result  # read by none,
    assert "[redacted" not in result  # so the scanner, the second fence, had nothing to do
    assert all(leaked(body, planted) == [] for body in seen)


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
