"""Read before overwrite through `qshell -p` (and plain line mode for @mentions) and the
scripted server: an existing file is overwritten only after the model read it in this
session, or saw it attached with `@path`, and while it is unchanged since."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.helpers import provider_env, run_qshell
from tests.e2e.pty import spawn_qshell
from tests.fakes.llm_server import Reply, Rule, ToolCallSpec, always, has_tool_result

READ = ToolCallSpec("read_file", {"path": "hello.txt"}, id="r1")
WRITE = ToolCallSpec("write_file", {"path": "hello.txt", "content": "the model's\n"}, id="w1")
ORIGINAL = "hello from the project\n"


@pytest.fixture
def project(tmp_path: Path, isolated_home: Path) -> Path:
    root = tmp_path / "proj"
    root.mkdir()
    (root / "hello.txt").write_text(ORIGINAL)
    return root


def write_result(server) -> str:
    """What the model was told of its write_file call."""
    for request in server.requests:
        for result in request.last_tool_results:
            if result.tool_call_id == "w1":
                return result.content
    raise AssertionError("the write's result never reached the model")


def test_overwriting_an_unread_file_is_a_tool_error_and_the_file_is_unchanged(llm_server, project):
    llm_server.add_rule(has_tool_result(), Reply.text("done"))
    llm_server.add_rule(always(), Reply.tool_calls([WRITE]))
    run = run_qshell("-p", "-y", "rewrite it", cwd=project, env=provider_env(llm_server, "openai"))
    assert run.code == 0, run.stderr
    assert write_result(llm_server).startswith(
        "Error: hello.txt already exists and has not been read in this session"
    )
    assert (project / "hello.txt").read_text() == ORIGINAL


def test_after_a_read_the_same_write_goes_through(llm_server, project):
    llm_server.add_rule(has_tool_result("Updated hello.txt"), Reply.text("done"))
    llm_server.add_rule(has_tool_result("hello from the project"), Reply.tool_calls([WRITE]))
    llm_server.add_rule(always(), Reply.tool_calls([READ]))
    run = run_qshell("-p", "-y", "rewrite it", cwd=project, env=provider_env(llm_server, "openai"))
    assert (run.code, run.stdout) == (0, "done\n"), run.stderr
    assert not write_result(llm_server).startswith("Error")
    assert (project / "hello.txt").read_text() == "the model's\n"


def test_a_change_on_disk_between_the_read_and_the_write_fails_the_write(llm_server, project):
    llm_server.add_rule(has_tool_result("changed since"), Reply.text("it changed; reading again"))
    after_read = llm_server.add_rule(
        Rule(has_tool_result("hello from the project"), Reply.tool_calls([WRITE]))
    )
    hold = llm_server.hold(after_read)  # the round after the read waits for the user's edit
    llm_server.add_rule(always(), Reply.tool_calls([READ]))
    env = {**os.environ, "QSHELL_MAX_RETRIES": "0", **provider_env(llm_server, "openai")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "qshell", "-p", "-y", "rewrite it"],
        cwd=project,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        hold.wait_arrived(30)
        (project / "hello.txt").write_text("hello from the USER!!!\n")  # the same size
        hold.release()
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert (proc.returncode, out) == (0, "it changed; reading again\n"), err
    assert write_result(llm_server).startswith(
        "Error: hello.txt has changed since it was last read"
    )
    assert (project / "hello.txt").read_text() == "hello from the USER!!!\n"


def test_a_resumed_session_reads_the_file_again_before_overwriting_it(llm_server, project):
    llm_server.add_rule(has_tool_result("hello from the project"), Reply.text("read it"))
    llm_server.add_rule(always(), Reply.tool_calls([READ]))
    first = run_qshell(
        "-p", "-o", "json", "read it", cwd=project, env=provider_env(llm_server, "openai")
    )
    assert first.code == 0, first.stderr
    llm_server.clear_rules()
    llm_server.add_rule(has_tool_result(), Reply.text("done"))
    llm_server.add_rule(always(), Reply.tool_calls([WRITE]))
    session = first.json()["session_id"]
    again = run_qshell(
        "-p", "-y", "--resume", session, "now rewrite it", cwd=project,
        env=provider_env(llm_server, "openai"),
    )  # fmt: skip
    assert again.code == 0, again.stderr
    assert "has not been read in this session" in write_result(llm_server)
    assert (project / "hello.txt").read_text() == ORIGINAL


def test_a_file_attached_with_an_at_mention_counts_as_read(llm_server, project):
    """The model saw `@hello.txt` whole in the prompt: it may overwrite it without a read
    (plain line mode, where @mentions are attached); a file it was not shown still needs
    one."""
    (project / "other.txt").write_text("other\n")
    other = ToolCallSpec("write_file", {"path": "other.txt", "content": "x\n"}, id="w2")
    llm_server.add_rule(has_tool_result(), Reply.text("done"))
    llm_server.add_rule(always(), Reply.tool_calls([WRITE, other]))
    child = spawn_qshell(llm_server, project, "--approval-mode", "auto-edit", term="dumb")
    child.expect(r"\n> ")
    child.send("rewrite @hello.txt\r")
    child.expect("done")
    child.expect(r"\n> ")
    child.send("\x04")
    assert child.finish() == 0
    assert not write_result(llm_server).startswith("Error")
    assert (project / "hello.txt").read_text() == "the model's\n"
    assert (project / "other.txt").read_text() == "other\n"  # never shown: still refused
