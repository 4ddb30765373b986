"""Secrets judged by content, through `qshell -p` against the scripted server: the model reads
a config holding a token and is sent a marker instead; it rewrites the config through
write_file and then through edit, markers and all, and the token is intact on disk; no
request, transcript or telemetry file holds the token, and stderr says what was redacted."""

from __future__ import annotations

from pathlib import Path

import pytest

from qshell.redaction import marker
from tests.e2e.helpers import provider_env, result_of, run_qshell
from tests.fakes.llm_server import Reply, ToolCallSpec, always, has_tool_result
from tests.redaction.fakes import github_token

TOKEN = github_token()
MARK = marker("github-token", 1)
CONFIG = f"[auth]\ntoken = {TOKEN}\nname = demo\n"
READ = ToolCallSpec("read_file", {"path": "config.ini"}, id="r1")
WRITE = ToolCallSpec(
    "write_file",
    {"path": "config.ini", "content": f"[auth]\ntoken = {MARK}\nname = renamed\n"},
    id="w1",
)
EDIT = ToolCallSpec(
    "edit",
    {
        "path": "config.ini",
        "old_string": f"token = {MARK}\n",
        "new_string": f"token = {MARK}\nregion = eu\n",
    },
    id="e1",
)
COPY = ToolCallSpec("write_file", {"path": "copy.ini", "content": f"token = {MARK}\n"}, id="c1")


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    root.mkdir()
    (root / "config.ini").write_text(CONFIG)
    return root


def files_holding(directory: Path, needle: str) -> list[str]:
    """Every file under `directory` whose bytes hold `needle`."""
    return [
        str(path)
        for path in directory.rglob("*")
        if path.is_file() and needle.encode() in path.read_bytes()
    ]


@pytest.mark.parametrize("protocol", ["openai", "anthropic"])
def test_the_model_sees_a_marker_and_its_rewrites_keep_the_token_on_disk(
    llm_server, project, isolated_home, protocol
):
    llm_server.add_rule(result_of("e1"), Reply.text("done"))
    llm_server.add_rule(result_of("w1"), Reply.tool_calls([EDIT]))
    llm_server.add_rule(has_tool_result(f"token = {MARK}"), Reply.tool_calls([WRITE]))
    llm_server.add_rule(always(), Reply.tool_calls([READ]))
    run = run_qshell("-p", "-y", "rename it", cwd=project, env=provider_env(llm_server, protocol))
    assert (run.code, run.stdout) == (0, "done\n"), run.stderr
    assert (project / "config.ini").read_text() == (
        f"[auth]\ntoken = {TOKEN}\nregion = eu\nname = renamed\n"
    )
    assert [r.matched_rule is not None for r in llm_server.requests] == [True] * 4
    assert not [r.index for r in llm_server.requests if TOKEN.encode() in r.raw]
    assert "redacted 1 secret (github-token) from read_file's result" in run.stderr
    assert files_holding(isolated_home, TOKEN) == []  # transcript, telemetry, decision log
    assert files_holding(isolated_home, MARK)  # the transcript holds what the model saw


def test_a_marker_written_into_another_file_is_a_tool_error_and_nothing_is_written(
    llm_server, project
):
    llm_server.add_rule(result_of("c1"), Reply.text("could not"))
    llm_server.add_rule(has_tool_result(f"token = {MARK}"), Reply.tool_calls([COPY]))
    llm_server.add_rule(always(), Reply.tool_calls([READ]))
    run = run_qshell("-p", "-y", "copy it", cwd=project, env=provider_env(llm_server, "openai"))
    assert (run.code, run.stdout) == (0, "could not\n"), run.stderr
    told = llm_server.requests[-1].last_tool_results[0].content
    assert told.startswith(f"Error: {MARK} stands for a secret qshell hid from you")
    assert not (project / "copy.ini").exists()
    assert (project / "config.ini").read_text() == CONFIG


def test_shell_output_and_grep_are_redacted_as_read_file_is(llm_server, project):
    shell = ToolCallSpec("shell", {"command": "cat config.ini"}, id="s1")
    grep = ToolCallSpec("grep", {"pattern": "token"}, id="g1")
    llm_server.add_rule(has_tool_result(), Reply.text("seen"))
    llm_server.add_rule(always(), Reply.tool_calls([shell, grep]))
    run = run_qshell("-p", "-y", "show it", cwd=project, env=provider_env(llm_server, "openai"))
    assert run.code == 0, run.stderr
    results = llm_server.requests[-1].last_tool_results
    assert [MARK in r.content for r in results] == [True, True]
    assert not [r.index for r in llm_server.requests if TOKEN.encode() in r.raw]
    assert "from shell's result" in run.stderr and "from grep's result" in run.stderr


def test_a_shell_command_holding_a_marker_does_not_run(llm_server, project):
    echo = ToolCallSpec("shell", {"command": f"echo 'token = {MARK}' > config.ini"}, id="x1")
    llm_server.add_rule(result_of("x1"), Reply.text("refused"))
    llm_server.add_rule(has_tool_result(f"token = {MARK}"), Reply.tool_calls([echo]))
    llm_server.add_rule(always(), Reply.tool_calls([READ]))
    run = run_qshell("-p", "-y", "reset it", cwd=project, env=provider_env(llm_server, "openai"))
    assert (run.code, run.stdout) == (0, "refused\n"), run.stderr
    told = llm_server.requests[-1].last_tool_results[0].content
    assert "a shell command cannot use it or write it back" in told
    assert (project / "config.ini").read_text() == CONFIG
