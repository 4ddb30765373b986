"""The interactive REPL on the embedded model: it says which model it uses, answers, and
leaves no server process behind after Ctrl-C and exit."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.e2e.pty import spawn_qshell
from tests.local.procs import alive, children_of
from tests.waiting import wait_until

pytestmark = pytest.mark.e2e


def test_the_repl_runs_on_the_local_model_and_stops_its_server_on_exit(tmp_path, local_model_cache):
    project = tmp_path / "project"
    project.mkdir()
    child = spawn_qshell(None, project)
    child.expect("offline model")
    child.expect("local model ready")
    child.wait_prompt()
    servers = children_of(child.child.pid)
    assert len(servers) == 1, servers
    server = servers[0]
    assert "qshell.llm.local_child" in Path(f"/proc/{server}/cmdline").read_text()
    child.submit("Say hello.")
    child.expect(r"tokens: [1-9][\d,]* in \(cached", timeout_s=120)  # the stream's usage
    child.wait_prompt(timeout_s=120)
    child.send("\x03")  # Ctrl-C on an empty prompt: the server is not in the terminal's group
    time.sleep(0.3)
    assert alive(server)
    child.send("\x04")  # Ctrl-D exits
    assert child.finish() == 0
    assert wait_until(lambda: not alive(server), 15), "the model server outlived qshell"
