"""What a speculated command the proof cannot read sees of the user's toolchains, through
the full REPL (pexpect, scripted server): a virtual environment and a Node install on
PATH carry a token in `pip.conf`, `.pypirc`, `credentials.toml` and `etc/npmrc`; the
suggested prompt's `cat … | tee /dev/stderr` runs in the speculation's jail, where the
jail binds those toolchains back with their credential files masked, so no request the
server receives — the speculation's rounds included — holds a planted value, while the
toolchains' own programs still run there. The jail is the fence tested here: each read is
refused, so the content scanner behind it has nothing to redact. Skipped where no overlay
sandbox works."""

from __future__ import annotations

import os
import shlex
from pathlib import Path

import pytest

from qshell.sandbox import probe
from tests.e2e.accepting import finished, quit_repl, speculating
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
