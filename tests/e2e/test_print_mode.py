"""`qshell -p` end to end: real subprocess, real HTTP to the scripted server."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.e2e.helpers import provider_env, run_qshell
from tests.fakes.llm_server import Reply, ToolCallSpec, always, has_tool_result

PROTOCOLS = ["openai", "anthropic"]


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    root.mkdir()
    (root / "hello.txt").write_text("hello from the project\n")
    return root


def script_two_rounds(server, answer="The file says hello."):
    server.add_rule(has_tool_result("hello from the project"), Reply.text(answer))
    server.add_rule(
        always(), Reply.tool_calls([ToolCallSpec("read_file", {"path": "hello.txt"}, id="call_1")])
    )


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_print_mode_completes_a_two_round_turn(llm_server, project, protocol):
    script_two_rounds(llm_server)
    run = run_qshell(
        "-p", "what does hello.txt say?", cwd=project, env=provider_env(llm_server, protocol)
    )
    assert (run.code, run.stdout, run.stderr) == (0, "The file says hello.\n", "")
    requests = llm_server.requests_for(protocol)
    assert len(requests) == 2
    assert "what does hello.txt say?" in requests[0].last_user_text
    assert "read_file" in requests[0].tool_names
    assert any("hello from the project" in r.content for r in requests[1].last_tool_results)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_json_output_is_one_object_with_result_session_and_usage(llm_server, project, protocol):
    script_two_rounds(llm_server)
    run = run_qshell(
        "-p", "-o", "json", "read it", cwd=project, env=provider_env(llm_server, protocol)
    )
    record = run.json()
    assert run.code == 0 and record["result"] == "The file says hello."
    assert record["is_error"] is False and record["num_rounds"] == 2 and record["session_id"]
    assert set(record["usage"]) >= {"prompt_tokens", "completion_tokens", "cached_tokens"}
    assert record["usage"]["prompt_tokens"] > 0


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_stream_json_is_one_event_per_line_ending_with_result(llm_server, project, protocol):
    script_two_rounds(llm_server)
    run = run_qshell(
        "-p", "-o", "stream-json", "read it", cwd=project, env=provider_env(llm_server, protocol)
    )
    events = run.lines()
    types = [e["type"] for e in events]
    assert types[0] == "init" and types[-1] == "result" and run.code == 0
    assert {"tool_use", "tool_result", "message"} <= set(types)
    assert all("timestamp" in e for e in events)
    tool_use = next(e for e in events if e["type"] == "tool_use")
    assert tool_use["tool_name"] == "read_file" and tool_use["parameters"] == {"path": "hello.txt"}
    text = "".join(e["content"] for e in events if e["type"] == "message")
    assert text == "The file says hello."


def test_stream_json_tool_ids_stay_unique_when_the_server_repeats_call_0(llm_server, project):
    """Some servers number calls `call_0` in every response: each call of the run still
    gets its own `tool_id`, and each result pairs with its use."""
    (project / "notes.txt").write_text("remember\n")
    first = ToolCallSpec("read_file", {"path": "hello.txt"}, id="call_0")
    second = ToolCallSpec("read_file", {"path": "notes.txt"}, id="call_0")
    llm_server.add_rule(has_tool_result("remember"), Reply.text("Both read."))
    llm_server.add_rule(has_tool_result("hello"), Reply.tool_calls([second]))
    llm_server.add_rule(always(), Reply.tool_calls([first]))
    run = run_qshell(
        "-p", "-o", "stream-json", "read both", cwd=project, env=provider_env(llm_server, "openai")
    )
    assert run.code == 0, run.stderr
    events = run.lines()
    uses = [e["tool_id"] for e in events if e["type"] == "tool_use"]
    results = [(e["tool_id"], e["output"]) for e in events if e["type"] == "tool_result"]
    assert uses == ["call_0", "call_0#2"]
    assert [tool_id for tool_id, _ in results] == uses
    assert "hello" in results[0][1] and "remember" in results[1][1]


def test_stdin_and_the_prompt_are_joined_by_a_blank_line(llm_server, project):
    llm_server.add_rule(always(), Reply.text("ok"))
    run = run_qshell(
        "-p", "explain", cwd=project, env=provider_env(llm_server, "openai"), stdin="log line\n"
    )
    assert run.code == 0
    assert llm_server.requests[0].last_user_text == "log line\n\nexplain"


def test_piped_stdin_without_p_means_print_mode(llm_server, project):
    llm_server.add_rule(always(), Reply.text("piped answer"))
    run = run_qshell(cwd=project, env=provider_env(llm_server, "openai"), stdin="explain x\n")
    assert (run.code, run.stdout) == (0, "piped answer\n")
    assert llm_server.requests[0].last_user_text == "explain x"


def test_print_mode_denies_edits_unless_the_approval_mode_allows_them(llm_server, project):
    edit = ToolCallSpec(
        "edit", {"path": "hello.txt", "old_string": "hello", "new_string": "howdy"}, id="e1"
    )
    read = ToolCallSpec("read_file", {"path": "hello.txt"}, id="r1")
    llm_server.add_rule(has_tool_result("howdy"), Reply.text("done"))
    llm_server.add_rule(has_tool_result("hello from the project"), Reply.tool_calls([edit]))
    llm_server.add_rule(has_tool_result(), Reply.text("done"))
    llm_server.add_rule(always(), Reply.tool_calls([read]))  # read before the edit
    env = provider_env(llm_server, "openai")
    run = run_qshell("-p", "change it", cwd=project, env=env)
    assert run.code == 0 and (project / "hello.txt").read_text() == "hello from the project\n"
    denied = llm_server.requests[2].last_tool_results[0].content
    assert "not allowed" in denied and "--approval-mode" in denied
    run = run_qshell("-p", "--approval-mode", "auto-edit", "change it", cwd=project, env=env)
    assert run.code == 0 and (project / "hello.txt").read_text() == "howdy from the project\n"


def test_yolo_runs_shell_commands_in_print_mode(llm_server, project):
    shell = ToolCallSpec("shell", {"command": "echo made > made.txt && echo ok"}, id="s1")
    llm_server.add_rule(has_tool_result(), Reply.text("done"))
    llm_server.add_rule(always(), Reply.tool_calls([shell]))
    run = run_qshell("-p", "-y", "make it", cwd=project, env=provider_env(llm_server, "openai"))
    assert run.code == 0 and (project / "made.txt").read_text() == "made\n"


def test_continue_and_resume_send_the_earlier_history(llm_server, project):
    llm_server.add_rule(always(), Reply.text("noted"))
    env = provider_env(llm_server, "openai")
    first = run_qshell("-p", "-o", "json", "remember 7", cwd=project, env=env)
    session_id = first.json()["session_id"]
    second = run_qshell("-p", "-o", "json", "--continue", "what number?", cwd=project, env=env)
    assert second.json()["session_id"] == session_id
    texts = [m.get("content") for m in llm_server.requests[1].body["messages"]]
    assert texts[1:] == ["remember 7", "noted", "what number?"]
    third = run_qshell("-p", "--resume", session_id, "again?", cwd=project, env=env)
    assert third.code == 0
    assert (
        llm_server.requests[2].body["messages"][1:4] == llm_server.requests[1].body["messages"][1:4]
    )
    assert llm_server.requests[2].body["messages"][0] == llm_server.requests[0].body["messages"][0]


def test_reserved_subcommands_need_p_to_be_prompts(llm_server, project):
    llm_server.add_rule(always(), Reply.text("about stats"))
    env = provider_env(llm_server, "openai")
    run = run_qshell("-p", "stats", cwd=project, env=env)
    assert run.stdout == "about stats\n"
    stats = run_qshell("stats", "--json", cwd=project, env=env)
    assert stats.code == 0 and json.loads(stats.stdout)["sessions"] == 1
    plugins = run_qshell("plugins", cwd=project, env=env)
    assert plugins.code == 0 and "no plugins" in plugins.stdout


def test_agents_md_joins_a_system_prompt_that_stays_byte_identical(llm_server, project):
    (project / "AGENTS.md").write_text("Always answer in haiku.\n")
    (project / "QSHELL.md").write_text("ignored when AGENTS.md exists\n")
    script_two_rounds(llm_server)
    run = run_qshell("-p", "read it", cwd=project, env=provider_env(llm_server, "openai"))
    assert run.code == 0
    first, second = (r.body["messages"][0] for r in llm_server.requests)
    assert first == second and first["role"] == "system"
    assert "Always answer in haiku." in first["content"]
    assert "ignored when" not in first["content"]


def test_qshell_md_is_used_when_there_is_no_agents_md(llm_server, project):
    (project / "QSHELL.md").write_text("Use tabs.\n")
    llm_server.add_rule(always(), Reply.text("ok"))
    assert run_qshell("-p", "hi", cwd=project, env=provider_env(llm_server, "anthropic")).code == 0
    assert "Use tabs." in llm_server.requests[0].system_text


@pytest.mark.parametrize(("flags", "allowed"), [([], False), (["-y"], True)])
def test_reading_a_secret_file_is_denied_in_print_mode_unless_yolo(
    llm_server, project, flags, allowed
):
    (project / ".env").write_text("TOKEN=hunter2\n")
    read = ToolCallSpec("read_file", {"path": ".env"}, id="r1")
    llm_server.add_rule(has_tool_result(), Reply.text("done"))
    llm_server.add_rule(always(), Reply.tool_calls([read]))
    run = run_qshell("-p", *flags, "show .env", cwd=project, env=provider_env(llm_server, "openai"))
    assert run.code == 0
    result = llm_server.requests[1].last_tool_results[0].content
    assert "hunter2" not in result  # read in yolo, the value still never reaches the model
    if allowed:
        assert result == "     1\tTOKEN=[redacted: token #1]"
    else:
        assert "secret" in result and "-y" in result


def test_reading_outside_the_root_is_denied_in_print_mode(llm_server, project):
    (project.parent / "outside.txt").write_text("private notes\n")
    read = ToolCallSpec("read_file", {"path": "../outside.txt"}, id="r1")
    llm_server.add_rule(has_tool_result(), Reply.text("done"))
    llm_server.add_rule(always(), Reply.tool_calls([read]))
    run = run_qshell(
        "-p",
        "--approval-mode",
        "auto-edit",
        "peek",
        cwd=project,
        env=provider_env(llm_server, "openai"),
    )
    assert run.code == 0
    result = llm_server.requests[1].last_tool_results[0].content
    assert "private notes" not in result and "outside the project root" in result


def test_writing_outside_the_root_is_refused_even_in_yolo(llm_server, project):
    write = ToolCallSpec("write_file", {"path": "../escape.txt", "content": "x"}, id="w1")
    llm_server.add_rule(has_tool_result(), Reply.text("done"))
    llm_server.add_rule(always(), Reply.tool_calls([write]))
    run = run_qshell("-p", "-y", "escape", cwd=project, env=provider_env(llm_server, "openai"))
    assert run.code == 0 and not (project.parent / "escape.txt").exists()
    assert llm_server.requests[1].last_tool_results[0].content.startswith("Error")


@pytest.mark.parametrize(
    ("command", "runs"),
    [("cat hello.txt", True), ("rm hello.txt", False), ("cat ../outside.txt", False)],
)
def test_commands_proven_read_only_in_the_root_run_without_asking(
    llm_server, project, command, runs
):
    (project.parent / "outside.txt").write_text("outside\n")
    shell = ToolCallSpec("shell", {"command": command}, id="s1")
    llm_server.add_rule(has_tool_result(), Reply.text("done"))
    llm_server.add_rule(always(), Reply.tool_calls([shell]))
    run = run_qshell("-p", "look", cwd=project, env=provider_env(llm_server, "openai"))
    assert run.code == 0 and (project / "hello.txt").exists()
    result = llm_server.requests[1].last_tool_results[0].content
    assert ("exit code 0" in result or "hello from the project" in result) is runs
    assert ("not allowed" in result) is not runs


def test_print_mode_rolls_back_the_interrupted_apply_of_a_dead_process_first(
    llm_server, tmp_path, monkeypatch
):
    """A journal left by a qshell that died mid-apply is recovered by the next `-p` run too,
    before it reads anything."""
    import os

    from tests.overlay.test_apply import (
        crash,
        crash_at_the_second_rename,
        fresh,
        speculate,
    )
    from tests.overlay.test_overlay import DEAD_PID, snapshot

    temp = tmp_path / "tmp"
    temp.mkdir()
    base = temp / f"qshell-speculation-{os.getuid()}"
    root, overlay = fresh(tmp_path, "proj")
    overlay = type(overlay).create(root, overlay.resolver, base_dir=base)
    before = speculate(overlay, root)
    crash(overlay, monkeypatch, crash_at_the_second_rename)
    assert overlay.lease is not None
    overlay.lease.release()  # the process died: its lock went with it
    overlay.directory.parent.rename(base / str(DEAD_PID))
    assert snapshot(root) != before  # half applied
    llm_server.add_rule(always(), Reply.text("fine"))
    env = {**provider_env(llm_server, "openai"), "TMPDIR": str(temp)}
    run = run_qshell("-p", "hello", cwd=root, env=env)
    assert run.code == 0, run.stderr
    assert {k: v for k, v in snapshot(root).items() if ".qshell" not in k} == before
    assert not (base / str(DEAD_PID)).exists()


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_print_mode_attaches_the_files_its_prompt_mentions(llm_server, project, protocol):
    (project / "notes.txt").write_text("the meeting moved to Tuesday\n")
    llm_server.add_rule(always(), Reply.text("It says the meeting moved."))
    run = run_qshell(
        "-p", "explain @notes.txt", cwd=project, env=provider_env(llm_server, protocol)
    )
    assert (run.code, run.stdout) == (0, "It says the meeting moved.\n")
    [request] = llm_server.requests_for(protocol)
    sent = request.last_user_text
    assert sent.startswith("explain @notes.txt")
    assert '<file path="notes.txt">\nthe meeting moved to Tuesday\n</file>' in sent


def test_an_at_path_in_piped_data_attaches_nothing(llm_server, project, tmp_path):
    """Standard input may be anyone's text (an issue, a log): its `@/path` must not send
    that file, inside the project or out; only what the user typed attaches."""
    outside = tmp_path / "private_notes.txt"
    outside.write_text("PRIVATE: the bank pin\n")
    (project / "notes.txt").write_text("the meeting moved to Tuesday\n")
    llm_server.add_rule(always(), Reply.text("A summary."))
    piped = f"Issue text. See @{outside} and @notes.txt and @~/.bash_history\n"
    run = run_qshell(
        "-p",
        "summarise this issue",
        cwd=project,
        env=provider_env(llm_server, "openai"),
        stdin=piped,
    )
    assert (run.code, run.stdout) == (0, "A summary.\n")
    [request] = llm_server.requests_for("openai")
    sent = request.last_user_text
    assert sent == piped.rstrip("\n") + "\n\nsummarise this issue"
    assert "PRIVATE" not in sent and "<file" not in sent


def test_a_mention_that_cannot_be_attached_says_why_on_stderr(llm_server, project):
    (project / ".env").write_text("API_KEY=sk-live-1234567890abcdef\n")
    llm_server.add_rule(always(), Reply.text("ok"))
    run = run_qshell(
        "-p", "read @missing.txt and @.env", cwd=project, env=provider_env(llm_server, "openai")
    )
    assert run.code == 0
    lines = [line for line in run.stderr.splitlines() if line.startswith("qshell: ")]
    assert any("no file 'missing.txt'" in line for line in lines), run.stderr
    assert any(".env looks like a secret and was not attached" in line for line in lines)
    [request] = llm_server.requests_for("openai")
    assert "sk-live" not in request.last_user_text
