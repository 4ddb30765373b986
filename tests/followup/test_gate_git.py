"""Speculative git commands: what they read is fingerprinted (a user's later edit is a
conflict), and they never rewrite or lock the real `.git/index` before accept."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from qshell.cancel import CancelToken
from qshell.config import ApprovalMode
from qshell.followup.acceptance import accept
from qshell.followup.speculation import Speculation
from qshell.followup.states import SpeculationOutcome, Status
from qshell.llm.base import StreamDone
from qshell.llm.messages import Message, Usage
from qshell.overlay import Overlay
from qshell.permissions.runner import MainToolRunner
from tests.agent.scripted import call
from tests.agent.test_conversation import consume, make_conversation


def git(root: Path, *args: str) -> None:
    env = {
        "HOME": str(root.parent / "gh"),
        "PATH": os.environ.get("PATH", ""),
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@x",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@x",
    }
    subprocess.run(["git", *args], cwd=root, env=env, check=True, capture_output=True)


@pytest.fixture
def setup(tmp_path, monkeypatch):
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    setup = make_conversation(tmp_path)
    (setup.root / "a.txt").write_text("one\n")
    (setup.root / "b.txt").write_text("unchanged\n")
    git(setup.root, "init", "-q")
    git(setup.root, "add", "a.txt", "b.txt")
    git(setup.root, "commit", "-qm", "first")
    (setup.root / "a.txt").write_text("one\ntwo\n")
    setup.script(Message.assistant("hello"))
    consume(setup.conversation.turn("hi"))
    setup.conversation.set_approval_mode(ApprovalMode.AUTO_EDIT)
    return setup


def shell(command: str, id_: str) -> Message:
    return Message.assistant("", [call("shell", json.dumps({"command": command}), id_)])


def test_a_user_edit_after_a_speculative_git_diff_makes_accept_a_conflict(setup):
    """`git diff` read a.txt without naming it; the user edits a.txt before the speculation
    writes it (its copy then starts from the user's version): accept must still refuse."""
    write = Message.assistant(
        "",
        [call("write_file", json.dumps({"path": "a.txt", "content": "one\ntwo\nthree\n"}), "w1")],
    )

    def user_edits_then_the_model_writes(request, cancel):
        (setup.root / "a.txt").write_text("one\ntwo\nthe user's line\n")
        yield StreamDone(write, Usage(prompt_tokens=1, completion_tokens=1), "tool_use")

    setup.script(
        shell("git diff", "g1"), user_edits_then_the_model_writes, Message.assistant("added")
    )
    session = setup.conversation.session
    overlay = Overlay.create(session.project_root, session.tool_context.paths)
    spec = Speculation(session, "add a line", overlay)
    spec.run()
    assert spec.status is Status.COMPLETED, spec.status
    setup.script(Message.assistant("ran it live"))
    runner = MainToolRunner(ApprovalMode.AUTO_EDIT, interactive=False)
    acceptance = accept(spec, session, runner, CancelToken())
    consume(acceptance.events)
    assert acceptance.outcome is SpeculationOutcome.CONFLICT
    assert (setup.root / "a.txt").read_text() == "one\ntwo\nthe user's line\n"


def test_a_speculative_git_diff_leaves_the_real_index_alone(setup):
    index = setup.root / ".git" / "index"
    later = (setup.root / "b.txt").stat().st_mtime_ns + 5_000_000_000
    os.utime(setup.root / "b.txt", ns=(later, later))  # same content, new stat: git refreshes
    before = (index.read_bytes(), index.stat().st_mtime_ns)
    setup.script(shell("git diff", "g1"), Message.assistant("there is a change"))
    session = setup.conversation.session
    overlay = Overlay.create(session.project_root, session.tool_context.paths)
    spec = Speculation(session, "what changed?", overlay)
    spec.run()
    assert spec.status is Status.COMPLETED, spec.status
    result = next(
        e for e in spec.events if getattr(e, "name", "") == "shell" and hasattr(e, "result")
    )
    assert "+two" in result.result.llm_content
    assert (index.read_bytes(), index.stat().st_mtime_ns) == before
    assert not (setup.root / ".git" / "index.lock").exists()
    overlay.discard()
