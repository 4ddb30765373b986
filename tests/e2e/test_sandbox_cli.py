"""The sandbox from the command line: `qshell -p` runs a proven command inside it (the
result is the same), `sandbox.enabled: on` on a machine without bubblewrap lets no command
run without asking and says why, and `qshell doctor` reports the mode."""

from __future__ import annotations

from pathlib import Path

import pytest

from qshell.sandbox import probe
from tests.e2e.helpers import provider_env, run_qshell
from tests.fakes.llm_server import Reply, ToolCallSpec, always, has_tool_result

FOUND = probe(None)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    root.mkdir()
    (root / "hello.txt").write_text("hello from the project\n")
    return root


@pytest.fixture
def no_bwrap_path(tmp_path: Path) -> str:
    """A PATH with the usual tools but no bwrap."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("bash", "cat", "git", "sh", "ls", "prlimit", "unshare"):
        for where in ("/usr/bin", "/bin"):
            if (Path(where) / tool).exists():
                (bin_dir / tool).symlink_to(Path(where) / tool)
                break
    return str(bin_dir)


def script_cat(server) -> None:
    shell = ToolCallSpec("shell", {"command": "cat hello.txt"}, id="s1")
    server.add_rule(has_tool_result(), Reply.text("done"))
    server.add_rule(always(), Reply.tool_calls([shell]))


@pytest.mark.skipif(not FOUND.jail, reason=f"no sandbox here: {FOUND.reason}")
def test_a_proven_command_runs_in_the_sandbox_and_reads_the_project(llm_server, project):
    script_cat(llm_server)
    env = {**provider_env(llm_server, "openai"), "QSHELL_SANDBOX__ENABLED": "on"}
    run = run_qshell("-p", "look", cwd=project, env=env)
    assert run.code == 0, run.stderr
    assert "hello from the project" in llm_server.requests[1].last_tool_results[0].content


def test_sandbox_on_without_bubblewrap_runs_nothing_without_asking(
    llm_server, project, no_bwrap_path
):
    script_cat(llm_server)
    env = {
        **provider_env(llm_server, "openai"),
        "QSHELL_SANDBOX__ENABLED": "on",
        "PATH": no_bwrap_path,
    }
    run = run_qshell("-p", "look", cwd=project, env=env)
    result = llm_server.requests[1].last_tool_results[0].content
    assert run.code == 0 and "not allowed" in result
    assert "sandbox.enabled: on" in result and "bwrap is not installed" in result


def test_doctor_reports_the_sandbox_mode_and_the_setup(project, no_bwrap_path):
    run = run_qshell("doctor", cwd=project, env={"QSHELL_SANDBOX__ENABLED": "off"})
    assert run.code == 0, run.stderr
    assert f"project: {project}" in run.stdout
    assert "sandbox: off (sandbox.enabled: off)" in run.stdout
    assert "speculation overlays:" in run.stdout and "provider:" in run.stdout
    missing = run_qshell("doctor", cwd=project, env={"PATH": no_bwrap_path})
    assert "sandbox: off: bwrap is not installed" in missing.stdout
