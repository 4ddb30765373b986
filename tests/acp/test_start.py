"""Starting `qshell --acp` wrong: one clear line on stderr and a documented exit code."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.acp.raw import RawAgent
from tests.acp.sdk import needs_sdk
from tests.e2e.helpers import run_qshell

HIDE_SDK = """\
import sys
# The test wants a machine without the `acp` extra: make the SDK unfindable.
sys.modules["acp"] = None
"""


def test_without_the_acp_extra_it_names_the_install_command_and_exits_52(tmp_path: Path):
    shim = tmp_path / "hide-acp"
    shim.mkdir()
    (shim / "sitecustomize.py").write_text(HIDE_SDK)
    path = os.pathsep.join(filter(None, [str(shim), os.environ.get("PYTHONPATH")]))
    run = run_qshell("--acp", cwd=tmp_path, env={"PYTHONPATH": path})
    assert (run.code, run.stdout) == (52, "")
    checkout = Path(__file__).resolve().parents[2]
    assert run.stderr.count("\n") == 1
    assert run.stderr.endswith(f"is not installed: pip install -e '{checkout}[acp]'\n")


def test_acp_with_stdout_on_a_file_says_an_editor_starts_it_and_exits_42(tmp_path: Path):
    out = tmp_path / "out.json"
    with out.open("wb") as handle:
        proc = subprocess.run(
            [sys.executable, "-m", "qshell", "--acp"],
            cwd=tmp_path,
            stdin=subprocess.PIPE,
            stdout=handle,
            stderr=subprocess.PIPE,
            timeout=60,
        )
    stderr = proc.stderr.decode()
    assert proc.returncode == 42 and out.read_bytes() == b""
    assert stderr.count("\n") == 1 and "stdout is not a pipe" in stderr


@needs_sdk
def test_a_session_in_a_directory_that_does_not_exist_is_one_clear_error(llm_server, tmp_path):
    agent = RawAgent(llm_server, tmp_path, tmp_path / "agent.err")
    agent.call("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
    missing = tmp_path / "gone"
    reply = agent.response(agent.start("session/new", {"cwd": str(missing), "mcpServers": []}))
    assert reply["error"]["message"] == f"cwd '{missing}' is not a directory"
    assert not any(Path(os.environ["QSHELL_HOME"]).rglob("*.jsonl"))  # no transcript made
    assert agent.close() == 0


NOISY_PLUGIN = """\
import os
print("a plugin's print")
os.system("echo a child of a plugin")
"""


@needs_sdk
def test_what_a_plugin_or_its_children_print_goes_to_stderr_not_the_json_stream(
    llm_server, tmp_path
):
    plugin = tmp_path / "noisy.py"
    plugin.write_text(NOISY_PLUGIN)
    stderr = tmp_path / "agent.err"
    agent = RawAgent(llm_server, tmp_path, stderr, "--plugin", str(plugin))
    init = agent.call("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
    assert init["protocolVersion"] == 1
    assert agent.close() == 0
    assert agent.lines and all(line.startswith('{"jsonrpc"') for line in agent.lines)
    assert "a plugin's print" in stderr.read_text()
    assert "a child of a plugin" in stderr.read_text()
