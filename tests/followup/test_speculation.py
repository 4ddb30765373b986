"""Speculation on a fork behind the gate: completion, boundaries, accept, conflicts, abort."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from qshell.agent.events import (
    Notice,
    PermissionAnswer,
    PermissionReply,
    PermissionRequested,
    SecretsRedacted,
    SpeculationAccepted,
    TextDelta,
    ToolFinished,
    TurnFinished,
)
from qshell.agent.session import check_history
from qshell.cancel import CancelToken
from qshell.config import ApprovalMode
from qshell.followup.acceptance import accept
from qshell.followup.gate import BoundaryType
from qshell.followup.speculation import Speculation
from qshell.followup.states import SpeculationOutcome, Status
from qshell.llm.messages import Message
from qshell.overlay import Overlay
from qshell.permissions.runner import MainToolRunner
from qshell.redaction import marker
from qshell.tools.read_file import ReadFileTool
from tests.agent.scripted import call
from tests.agent.test_conversation import consume, make_conversation
from tests.redaction.fakes import github_token


def edit_call(id_: str = "e1") -> Message:
    args = json.dumps({"path": "a.txt", "old_string": "one", "new_string": "two"})
    return Message.assistant("", [call("edit", args, id_)])


def read_call(id_: str = "r1") -> Message:
    return Message.assistant("", [call("read_file", json.dumps({"path": "a.txt"}), id_)])


@pytest.fixture
def setup(tmp_path, monkeypatch):
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    setup = make_conversation(tmp_path)
    (setup.root / "a.txt").write_text("one\n")
    setup.script(read_call("r0"), Message.assistant("read it"))
    consume(setup.conversation.turn("look at a.txt"))
    return setup


def speculate(setup, prompt: str, *steps: Message) -> Speculation:
    setup.script(*steps)
    session = setup.conversation.session
    overlay = Overlay.create(session.project_root, session.tool_context.paths)
    spec = Speculation(session, prompt, overlay)
    spec.run()
    return spec


def run_accept(setup, spec, mode=ApprovalMode.YOLO, *, outcome: SpeculationOutcome):
    """Accept `spec`; its typed outcome must be `outcome`; returns the turn's events."""
    runner = MainToolRunner(mode, interactive=False)
    acceptance = accept(spec, setup.conversation.session, runner, CancelToken())
    assert acceptance.outcome is outcome, acceptance.detail
    return list(acceptance.events)


def test_a_completed_speculation_in_auto_edit_is_accepted_without_a_new_request(setup):
    setup.conversation.set_approval_mode(ApprovalMode.AUTO_EDIT)
    spec = speculate(setup, "change it", edit_call(), Message.assistant("changed"))
    assert spec.status is Status.COMPLETED
    assert (setup.root / "a.txt").read_text() == "one\n"  # untouched until accept
    requests = len(setup.provider.requests)
    events = run_accept(setup, spec, outcome=SpeculationOutcome.ACCEPTED)
    assert len(setup.provider.requests) == requests
    assert (setup.root / "a.txt").read_text() == "two\n"
    accepted = next(e for e in events if isinstance(e, SpeculationAccepted))
    assert accepted.completed and accepted.files == ("a.txt",) and accepted.saved_s >= 0
    assert isinstance(events[-1], TurnFinished) and events[-1].text == "changed"
    history = setup.conversation.session.history
    assert [m.text for m in history[-4:] if m.role == "user" and m.text] == ["change it"]
    assert check_history(history) == []
    assert setup.conversation.session.cache_safe is spec.fork.cache_safe


def test_an_edit_in_default_mode_is_a_boundary_and_accept_continues_live(setup):
    spec = speculate(setup, "change it", read_call("r1"), edit_call())
    assert spec.status is Status.BOUNDARY and spec.boundary is not None
    assert spec.boundary.type is BoundaryType.EDIT
    setup.script(Message.assistant("done live"))
    events = run_accept(setup, spec, outcome=SpeculationOutcome.ACCEPTED)
    runs = [e for e in events if isinstance(e, ToolFinished)]
    assert [e.call_id for e in runs] == ["r1", "e1"]  # r1 replayed, e1 run once, live
    assert (setup.root / "a.txt").read_text() == "two\n"
    assert isinstance(events[-1], TurnFinished) and events[-1].text == "done live"
    assert check_history(setup.conversation.session.history) == []


def test_a_continued_turn_counts_the_speculated_rounds_as_the_toolbar_does(setup):
    """The turn's token line covers the speculated rounds it adopted as well as the live
    ones, so it adds up to what the session totals (the toolbar) gained."""
    session = setup.conversation.session
    spec = speculate(setup, "change it", read_call("r1"), edit_call())
    setup.script(Message.assistant("done live"))
    before = session.stats.usage
    events = run_accept(setup, spec, outcome=SpeculationOutcome.ACCEPTED)
    finished = events[-1]
    assert isinstance(finished, TurnFinished)
    assert finished.rounds == spec.fork.stats.rounds + 1 == 3
    gained = session.stats.usage
    assert finished.usage.prompt_tokens == gained.prompt_tokens - before.prompt_tokens == 30
    assert finished.usage.completion_tokens == gained.completion_tokens - before.completion_tokens
    assert finished.usage.cached_tokens == (gained.cached_tokens or 0) - (before.cached_tokens or 0)


def test_a_file_changed_since_it_was_copied_is_a_conflict_and_the_prompt_runs_normally(setup):
    setup.conversation.set_approval_mode(ApprovalMode.AUTO_EDIT)
    spec = speculate(setup, "change it", edit_call(), Message.assistant("changed"))
    (setup.root / "a.txt").write_text("the user's own edit\n")
    setup.script(Message.assistant("ran normally"))
    events = run_accept(setup, spec, outcome=SpeculationOutcome.CONFLICT)
    assert any(isinstance(e, Notice) and "not used" in e.text for e in events)
    assert (setup.root / "a.txt").read_text() == "the user's own edit\n"
    assert isinstance(events[-1], TurnFinished) and events[-1].text == "ran normally"


def test_abort_discards_the_overlay_and_leaves_the_tree(setup):
    setup.conversation.set_approval_mode(ApprovalMode.AUTO_EDIT)
    spec = speculate(setup, "change it", edit_call(), Message.assistant("changed"))
    directory = spec.overlay.directory
    spec.abort()
    assert not Path(directory).exists()
    assert (setup.root / "a.txt").read_text() == "one\n"


def test_a_shell_command_that_writes_is_a_bash_boundary_in_plan_mode(setup):
    # in the other modes it runs on a kernel overlay where the machine allows one
    # (tests/followup/test_overlay_run.py, test_consent.py)
    setup.conversation.set_approval_mode(ApprovalMode.PLAN)
    shell = Message.assistant("", [call("shell", json.dumps({"command": "rm a.txt"}), "s1")])
    spec = speculate(setup, "clean up", shell)
    assert spec.status is Status.BOUNDARY and spec.boundary is not None
    assert spec.boundary.type is BoundaryType.BASH
    assert (setup.root / "a.txt").exists()


def test_a_read_only_shell_command_runs_speculatively(setup):
    shell = Message.assistant("", [call("shell", json.dumps({"command": "cat a.txt"}), "s1")])
    spec = speculate(setup, "show it", shell, Message.assistant("shown"))
    assert spec.status is Status.COMPLETED
    finished = [e for e in spec.events if isinstance(e, ToolFinished)]
    assert "one" in finished[0].result.llm_content


def test_web_fetch_and_reads_outside_the_root_are_boundaries(setup):
    fetch = Message.assistant(
        "", [call("web_fetch", json.dumps({"url": "http://127.0.0.1:9/"}), "w")]
    )
    spec = speculate(setup, "fetch", fetch)
    assert spec.boundary is not None and spec.boundary.type is BoundaryType.DENIED_TOOL
    outside = Message.assistant("", [call("read_file", json.dumps({"path": "../x"}), "o")])
    spec = speculate(setup, "peek", outside)
    assert spec.boundary is not None and spec.boundary.type is BoundaryType.READ_SCOPE


def test_a_boundary_later_in_a_batch_keeps_the_whole_batch_and_asks_for_the_boundary_call(
    setup,
):
    read = call("read_file", json.dumps({"path": "a.txt"}), "r1")
    # it needs the network: a boundary in every mode, whatever the sandbox can do
    command = "curl -s http://127.0.0.1:9/ -o a.txt"
    shell = call("shell", json.dumps({"command": command}), "s1")
    spec = speculate(setup, "clean up", Message.assistant("", [read, shell]))
    assert spec.status is Status.BOUNDARY and spec.boundary is not None
    assert spec.boundary.type is BoundaryType.BASH
    setup.script(Message.assistant("left it"))
    runner = MainToolRunner(ApprovalMode.DEFAULT, interactive=True)
    acceptance = accept(spec, setup.conversation.session, runner, CancelToken())
    assert acceptance.outcome is SpeculationOutcome.ACCEPTED
    events = consume(acceptance.events, PermissionReply(PermissionAnswer.DENY, "no"))
    asked = [e.name for e in events if isinstance(e, PermissionRequested)]
    assert asked == ["shell"]
    history = setup.conversation.session.history
    batch = next(m for m in reversed(history) if m.role == "assistant" and m.tool_calls)
    assert [c.id for c in batch.tool_calls] == ["r1", "s1"]
    assert check_history(history) == [] and (setup.root / "a.txt").exists()


def test_a_speculation_whose_batch_skips_the_round_replays_the_tool_answer(setup, monkeypatch):
    """A speculated turn that ended on a `skip_llm_round` batch (D1) is complete: accept
    replays the tool output as the answer, and the next turn extends that history."""
    real_run = ReadFileTool.run

    def skipping(self, args, ctx):
        return replace(real_run(self, args, ctx), skip_llm_round=True)

    monkeypatch.setattr(ReadFileTool, "run", skipping)
    spec = speculate(setup, "show a.txt", read_call("r1"))
    assert spec.status is Status.COMPLETED
    requests = len(setup.provider.requests)
    events = run_accept(setup, spec, outcome=SpeculationOutcome.ACCEPTED)
    assert len(setup.provider.requests) == requests  # nothing asked again on accept
    texts = [e.text for e in events if isinstance(e, TextDelta)]
    end = events[-1]
    assert isinstance(end, TurnFinished) and end.skipped_round and "one" in end.text
    assert texts == [end.text]
    session = setup.conversation.session
    assert session.history[-1].tool_results and check_history(session.history) == []

    setup.script(Message.assistant("next"))
    end = consume(setup.conversation.turn("and then?"))[-1]
    assert isinstance(end, TurnFinished) and end.text == "next"
    roles = [m.role for m in setup.provider.requests[-1].messages[-3:]]
    assert roles == ["assistant", "user", "user"]  # results, then the new prompt


def test_a_speculation_is_sent_markers_and_its_write_back_keeps_the_secret(setup):
    token = github_token()
    (setup.root / "config.ini").write_text(f"token = {token}\nname = demo\n")
    setup.conversation.set_approval_mode(ApprovalMode.AUTO_EDIT)
    mark = marker("github-token", 1)
    read = Message.assistant("", [call("read_file", json.dumps({"path": "config.ini"}), "r1")])
    content = json.dumps({"path": "config.ini", "content": f"token = {mark}\nname = renamed\n"})
    write = Message.assistant("", [call("write_file", content, "w1")])
    spec = speculate(setup, "rename it", read, write, Message.assistant("renamed"))
    assert spec.status is Status.COMPLETED
    assert any(isinstance(e, SecretsRedacted) for e in spec.events)
    assert not [r for r in setup.provider.requests if token in r.model_dump_json()]
    run_accept(setup, spec, outcome=SpeculationOutcome.ACCEPTED)
    assert (setup.root / "config.ini").read_text() == f"token = {token}\nname = renamed\n"
