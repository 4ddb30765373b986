"""`qshell --acp` over raw JSON-RPC lines: the wire shapes a client without the SDK sees.

The client advertises no file system, so the tools read and write the disk; it answers
the permission question with allow-always, cancels a second prompt with the
`session/cancel` notification, and a new process replays the session on `session/load`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.acp.raw import RawAgent
from tests.acp.sdk import needs_sdk
from tests.e2e.helpers import provider_env, run_qshell
from tests.fakes.llm_server import (
    Reply,
    ToolCallSpec,
    always,
    has_tool_result,
    last_user_text_contains,
)

pytestmark = needs_sdk  # each test gets past initialize to a session

READ = ToolCallSpec("read_file", {"path": "hello.txt"}, id="r1")
EDIT = ToolCallSpec(
    "edit", {"path": "hello.txt", "old_string": "hello", "new_string": "howdy"}, id="e1"
)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    root.mkdir()
    (root / "hello.txt").write_text("hello world\n")
    return root.resolve()


def allow_always(method: str, params: dict[str, Any]) -> dict[str, Any]:
    assert method == "session/request_permission"
    kinds = [o["kind"] for o in params["options"]]
    assert kinds == ["allow_once", "allow_always", "reject_once", "reject_always"]
    chosen = params["options"][kinds.index("allow_always")]["optionId"]
    return {"outcome": {"outcome": "selected", "optionId": chosen}}


def test_raw_json_rpc_lines_run_a_permitted_edit_a_cancel_and_a_load(llm_server, project, tmp_path):
    llm_server.add_rule(has_tool_result("howdy"), Reply.text("Said howdy."))
    llm_server.add_rule(has_tool_result("hello world"), Reply.tool_calls([EDIT]))
    llm_server.add_rule(last_user_text_contains("greet"), Reply.tool_calls([READ]))
    slow = llm_server.add_rule(last_user_text_contains("second"), Reply.text("long " * 100))
    hold = llm_server.hold(slow, after_first_chunk=True)
    llm_server.add_rule(always(), Reply.text("fine"))
    stderr = tmp_path / "agent.err"
    agent = RawAgent(llm_server, project, stderr)
    init = agent.call("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
    assert init["protocolVersion"] == 1 and init["authMethods"] == []
    assert init["agentCapabilities"]["loadSession"] is True
    sid = agent.call("session/new", {"cwd": str(project), "mcpServers": []})["sessionId"]
    text = [{"type": "text", "text": "greet the world"}]
    done = agent.call("session/prompt", {"sessionId": sid, "prompt": text}, allow_always)
    assert done == {"stopReason": "end_turn"}
    assert (project / "hello.txt").read_text() == "howdy world\n"  # no client fs: the disk
    read, start = agent.updates("tool_call")  # the edit's file is read first
    assert (read["toolCallId"], read["kind"]) == ("r1", "read")
    assert (start["toolCallId"], start["kind"], start["status"]) == ("e1", "edit", "pending")
    assert start["locations"] == [{"path": str(project / "hello.txt")}]
    finished = agent.updates("tool_call_update")[-1]
    assert finished["status"] == "completed"
    assert finished["content"] == [
        {
            "type": "diff",
            "path": str(project / "hello.txt"),
            "oldText": "hello world\n",
            "newText": "howdy world\n",
        }
    ]
    assert "".join(u["content"]["text"] for u in agent.updates("agent_message_chunk")) == (
        "Said howdy."
    )

    second = agent.start(
        "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "second"}]}
    )
    hold.wait_arrived(20)
    agent.send({"method": "session/cancel", "params": {"sessionId": sid}})
    assert agent.response(second)["result"] == {"stopReason": "cancelled"}
    hold.release()
    assert agent.close() == 0

    again = RawAgent(llm_server, project, stderr)
    newer = again.call("initialize", {"protocolVersion": 2, "clientCapabilities": {}})
    assert newer["protocolVersion"] == 1  # the version qshell speaks, for the client to judge
    loaded = again.call("session/load", {"cwd": str(project), "sessionId": sid, "mcpServers": []})
    assert loaded["modes"]["currentModeId"] == "default"
    users = [u["content"]["text"] for u in again.updates("user_message_chunk")]
    assert users == ["greet the world", "second"]
    assert [u["toolCallId"] for u in again.updates("tool_call")] == ["r1", "e1"]
    assert again.close() == 0
    assert "Traceback" not in stderr.read_text()


def test_session_load_replays_a_session_started_with_print_mode(llm_server, project, tmp_path):
    llm_server.add_rule(always(), Reply.text("noted: 7"))
    first = run_qshell(
        "-p", "-o", "json", "remember 7", cwd=project, env=provider_env(llm_server, "openai")
    )
    sid = first.json()["session_id"]
    agent = RawAgent(llm_server, project, tmp_path / "agent.err")
    agent.call("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
    agent.call("session/load", {"cwd": str(project), "sessionId": sid, "mcpServers": []})
    assert [u["content"]["text"] for u in agent.updates("user_message_chunk")] == ["remember 7"]
    assert [u["content"]["text"] for u in agent.updates("agent_message_chunk")] == ["noted: 7"]
    unknown = agent.response(
        agent.start("session/load", {"cwd": str(project), "sessionId": "nope", "mcpServers": []})
    )
    assert "no session 'nope'" in unknown["error"]["message"]
    assert agent.close() == 0


def test_a_cancel_ends_the_prompt_even_when_the_editor_leaves_its_question_open(
    llm_server, project, tmp_path
):
    """The protocol asks the client to answer an open permission question with
    `cancelled` when it cancels; one that does not must not hang the prompt, and its late
    answer changes nothing."""
    write = ToolCallSpec("write_file", {"path": "new.txt", "content": "x\n"}, id="w1")
    llm_server.add_rule(has_tool_result(), Reply.text("noted"))
    llm_server.add_rule(last_user_text_contains("write"), Reply.tool_calls([write]))
    llm_server.add_rule(always(), Reply.text("still here"))
    stderr = tmp_path / "agent.err"
    agent = RawAgent(llm_server, project, stderr)
    agent.call("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
    sid = agent.call("session/new", {"cwd": str(project), "mcpServers": []})["sessionId"]
    prompt = agent.start("session/prompt", {"sessionId": sid, "prompt": [text("write it")]})
    question = agent.request("session/request_permission")
    agent.send({"method": "session/cancel", "params": {"sessionId": sid}})
    assert agent.response(prompt)["result"] == {"stopReason": "cancelled"}
    agent.send(
        {
            "id": question["id"],
            "result": allow_always("session/request_permission", question["params"]),
        }
    )
    after = agent.call("session/prompt", {"sessionId": sid, "prompt": [text("and now?")]})
    assert after == {"stopReason": "end_turn"}
    assert not (project / "new.txt").exists()
    lives = [u["status"] for u in agent.notifications_of("w1")]
    assert lives == ["pending", "failed"]  # it never ran
    assert agent.close() == 0
    assert "Traceback" not in stderr.read_text()


def text(words: str) -> dict[str, str]:
    return {"type": "text", "text": words}


def test_a_malformed_permission_answer_is_a_refusal_not_a_failed_prompt(
    llm_server, project, tmp_path
):
    write = ToolCallSpec("write_file", {"path": "new.txt", "content": "x\n"}, id="w1")
    llm_server.add_rule(has_tool_result("denied"), Reply.text("not written"))
    llm_server.add_rule(always(), Reply.tool_calls([write]))
    stderr = tmp_path / "agent.err"
    agent = RawAgent(llm_server, project, stderr)
    agent.call("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
    sid = agent.call("session/new", {"cwd": str(project), "mcpServers": []})["sessionId"]
    done = agent.call(
        "session/prompt", {"sessionId": sid, "prompt": [text("write it")]}, lambda *_: {}
    )
    assert done == {"stopReason": "end_turn"}
    assert not (project / "new.txt").exists()
    assert agent.close() == 0
    assert "the permission question failed" in stderr.read_text()


def test_loading_a_session_whose_prompt_runs_is_refused_and_the_prompt_goes_on(
    llm_server, project, tmp_path
):
    slow = llm_server.add_rule(always(), Reply.text("a long answer " * 50))
    hold = llm_server.hold(slow, after_first_chunk=True)
    stderr = tmp_path / "agent.err"
    agent = RawAgent(llm_server, project, stderr)
    agent.call("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
    sid = agent.call("session/new", {"cwd": str(project), "mcpServers": []})["sessionId"]
    prompt = agent.start("session/prompt", {"sessionId": sid, "prompt": [text("talk")]})
    hold.wait_arrived(20)
    params = {"cwd": str(project), "sessionId": sid, "mcpServers": []}
    refused = agent.response(agent.start("session/load", params))
    assert "has a prompt running" in refused["error"]["message"]
    hold.release()
    assert agent.response(prompt)["result"] == {"stopReason": "end_turn"}
    told = "".join(u["content"]["text"] for u in agent.updates("agent_message_chunk"))
    assert told == "a long answer " * 50
    assert agent.close() == 0


def test_an_embedded_file_is_context_its_at_words_attach_nothing(llm_server, project, tmp_path):
    """Only what the user typed has its @mentions attached: an embedded resource's text (a
    file the editor sends along) is passed as it is, so a file that says `@../x` cannot
    pull another file, outside the project or not, into the prompt."""
    (tmp_path / "private.txt").write_text("my private words\n")
    llm_server.add_rule(always(), Reply.text("summed up"))
    agent = RawAgent(llm_server, project, tmp_path / "agent.err")
    agent.call("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
    sid = agent.call("session/new", {"cwd": str(project), "mcpServers": []})["sessionId"]
    notes = {"uri": f"file://{project}/notes.md", "text": "see @../private.txt and @hello.txt"}
    prompt = [text("sum up"), {"type": "resource", "resource": notes}]
    done = agent.call("session/prompt", {"sessionId": sid, "prompt": prompt})
    assert done == {"stopReason": "end_turn"}
    sent = llm_server.requests[-1].last_user_text
    assert "see @../private.txt and @hello.txt" in sent
    assert "my private words" not in sent and "hello world" not in sent
    assert agent.close() == 0


def test_a_linked_file_is_named_by_its_path_with_the_uri_escapes_undone(
    llm_server, project, tmp_path
):
    (project / "my notes é.txt").write_text("n\n")
    llm_server.add_rule(always(), Reply.text("ok"))
    agent = RawAgent(llm_server, project, tmp_path / "agent.err")
    agent.call("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
    sid = agent.call("session/new", {"cwd": str(project), "mcpServers": []})["sessionId"]
    uri = f"file://{project}/my%20notes%20%C3%A9.txt"
    link = {"type": "resource_link", "uri": uri, "name": "my notes é.txt"}
    done = agent.call("session/prompt", {"sessionId": sid, "prompt": [text("look at"), link]})
    assert done == {"stopReason": "end_turn"}
    assert f"(file: {project}/my notes é.txt)" in llm_server.requests[-1].last_user_text
    assert agent.close() == 0


def test_a_cancel_ends_the_prompt_while_the_editor_has_not_answered_a_read(
    llm_server, project, tmp_path
):
    read = ToolCallSpec("read_file", {"path": "hello.txt"}, id="r1")
    llm_server.add_rule(has_tool_result(), Reply.text("read"))
    llm_server.add_rule(last_user_text_contains("read"), Reply.tool_calls([read]))
    llm_server.add_rule(always(), Reply.text("still here"))
    stderr = tmp_path / "agent.err"
    agent = RawAgent(llm_server, project, stderr)
    files = {"fs": {"readTextFile": True, "writeTextFile": True}}
    agent.call("initialize", {"protocolVersion": 1, "clientCapabilities": files})
    sid = agent.call("session/new", {"cwd": str(project), "mcpServers": []})["sessionId"]
    prompt = agent.start("session/prompt", {"sessionId": sid, "prompt": [text("read it")]})
    asked = agent.request("fs/read_text_file")
    agent.send({"method": "session/cancel", "params": {"sessionId": sid}})
    assert agent.response(prompt)["result"] == {"stopReason": "cancelled"}
    agent.send({"id": asked["id"], "result": {"content": "too late"}})
    after = agent.call("session/prompt", {"sessionId": sid, "prompt": [text("and now?")]})
    assert after == {"stopReason": "end_turn"}
    assert agent.close() == 0
    assert "Traceback" not in stderr.read_text()
