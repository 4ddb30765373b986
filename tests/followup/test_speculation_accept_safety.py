"""End to end through a Speculation and `accept`: no accept ever loses a user's edit.

A user edit between a speculative read and write, a file made read-only meanwhile, and a
temp dir inside the project each leave the user's files as they were, and the prompt runs
normally; a symlink loop is a tool error, not a crashed speculation."""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from qshell.agent.events import Notice, ToolFinished, TurnFinished
from qshell.cancel import CancelToken
from qshell.config import ApprovalMode
from qshell.followup.acceptance import accept
from qshell.followup.gate import BoundaryType
from qshell.followup.speculation import Speculation
from qshell.followup.states import SpeculationOutcome, Status
from qshell.llm.base import StreamDone, StreamEvent
from qshell.llm.messages import ChatRequest, Message, StopReason, Usage
from qshell.overlay import Overlay, base_dir, sweep_stale
from qshell.permissions.runner import MainToolRunner
from qshell.tools.base import ErrorType
from tests.agent.scripted import call
from tests.followup.helpers import answered_conversation
from tests.overlay.test_overlay import snapshot


def read_call(path: str = "a.txt", id_: str = "r1") -> Message:
    return Message.assistant("", [call("read_file", json.dumps({"path": path}), id_)])


def write_call(path: str, content: str, id_: str = "w1") -> Message:
    args = json.dumps({"path": path, "content": content})
    return Message.assistant("", [call("write_file", args, id_)])


def shell_call(command: str, id_: str = "s1") -> Message:
    return Message.assistant("", [call("shell", json.dumps({"command": command}), id_)])


def after(action: Callable[[], None], message: Message):
    """A model round that first lets `action` happen (the user, meanwhile), then answers."""

    def step(request: ChatRequest, cancel: CancelToken) -> Iterator[StreamEvent]:
        action()
        stop: StopReason = "tool_use" if message.tool_calls else "end_turn"
        yield StreamDone(message, Usage(prompt_tokens=10, completion_tokens=2), stop)

    return step


@pytest.fixture
def setup(tmp_path, monkeypatch):
    setup = answered_conversation(tmp_path, monkeypatch)
    setup.conversation.set_approval_mode(ApprovalMode.AUTO_EDIT)
    return setup


def speculate(setup, *steps) -> Speculation:
    setup.script(*steps)
    session = setup.conversation.session
    overlay = Overlay.create(session.project_root, session.tool_context.paths)
    spec = Speculation(session, "update a.txt", overlay)
    spec.run()
    return spec


def run_accept(setup, spec, *, outcome: SpeculationOutcome) -> list:
    runner = MainToolRunner(ApprovalMode.AUTO_EDIT, interactive=False)
    acceptance = accept(spec, setup.conversation.session, runner, CancelToken())
    assert acceptance.outcome is outcome, acceptance.detail
    return list(acceptance.events)


def user_edit(setup) -> Callable[[], None]:
    return lambda: (setup.root / "a.txt").write_text("the user's edit\n")


def test_a_user_edit_between_a_speculative_read_and_write_makes_accept_a_conflict(setup):
    spec = speculate(
        setup,
        read_call(),
        after(user_edit(setup), write_call("a.txt", "one\ntwo\n")),
        Message.assistant("appended two"),
    )
    assert spec.status is Status.COMPLETED
    setup.script(Message.assistant("ran normally"))
    events = run_accept(setup, spec, outcome=SpeculationOutcome.CONFLICT)
    assert any(isinstance(e, Notice) and "speculation read it" in e.text for e in events)
    assert (setup.root / "a.txt").read_text() == "the user's edit\n"
    assert isinstance(events[-1], TurnFinished) and events[-1].text == "ran normally"


def test_a_user_edit_after_a_speculative_shell_read_makes_accept_a_conflict(setup):
    spec = speculate(
        setup,
        shell_call("cat a.txt"),
        after(user_edit(setup), write_call("b.txt", "one\ntwo\n")),
        Message.assistant("copied it"),
    )
    assert spec.status is Status.COMPLETED
    setup.script(Message.assistant("ran normally"))
    run_accept(setup, spec, outcome=SpeculationOutcome.CONFLICT)
    assert (setup.root / "a.txt").read_text() == "the user's edit\n"
    assert not (setup.root / "b.txt").exists()


def test_a_user_edit_to_a_file_a_recursive_grep_read_makes_accept_a_conflict(setup):
    (setup.root / "src").mkdir()
    (setup.root / "src" / "m.py").write_text("KEY = 1\n")
    spec = speculate(
        setup,
        shell_call("grep -rn KEY src"),
        after(
            lambda: (setup.root / "src" / "m.py").write_text("KEY = 2  # user\n"),
            write_call("notes.md", "KEY is 1\n"),
        ),
        Message.assistant("noted"),
    )
    assert spec.status is Status.COMPLETED
    setup.script(Message.assistant("ran normally"))
    run_accept(setup, spec, outcome=SpeculationOutcome.CONFLICT)
    assert not (setup.root / "notes.md").exists()


def test_a_file_made_read_only_meanwhile_is_not_overwritten_by_accept(setup):
    a = setup.root / "a.txt"
    spec = speculate(
        setup,
        read_call("a.txt"),
        write_call("a.txt", "two\n"),
        after(lambda: os.chmod(a, 0o444), Message.assistant("rewrote it")),
    )
    assert spec.status is Status.COMPLETED
    setup.script(Message.assistant("ran normally"))
    try:
        run_accept(setup, spec, outcome=SpeculationOutcome.CONFLICT)
        assert a.read_text() == "one\n"
        assert stat.S_IMODE(a.stat().st_mode) == 0o444
    finally:
        os.chmod(a, 0o644)


def test_a_read_only_file_is_never_written_by_the_speculation(setup):
    a = setup.root / "a.txt"
    os.chmod(a, 0o444)
    try:
        spec = speculate(
            setup, read_call("a.txt"), write_call("a.txt", "two\n"), Message.assistant("tried")
        )
        read, written = [e for e in spec.events if isinstance(e, ToolFinished)]
        assert read.result.error is None
        assert written.result.error is not None
        assert written.result.error.type is ErrorType.PERMISSION_DENIED
        assert not spec.overlay.has_writes
        run_accept(setup, spec, outcome=SpeculationOutcome.ACCEPTED)
        assert a.read_text() == "one\n"
    finally:
        os.chmod(a, 0o644)


def test_with_the_temp_dir_inside_the_project_nothing_outside_is_deleted(
    setup, tmp_path, monkeypatch
):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "precious.txt").write_text("keep\n")
    inner = setup.root / "tmp"
    inner.mkdir()
    monkeypatch.setattr("tempfile.tempdir", str(inner))
    base = base_dir.default_base_dir()
    planted = base / "1073741831" / "overlay-x" / "journal.json"
    spec = speculate(setup, write_call(str(planted.relative_to(setup.root)), "{}"))
    assert spec.status is Status.BOUNDARY and spec.boundary is not None
    assert spec.boundary.type is BoundaryType.EDIT
    assert not spec.overlay.directory.resolve().is_relative_to(setup.root)
    spec.overlay.discard()
    for root in (setup.root, outside, None):
        sweep_stale(root=root)
    assert snapshot(outside) == {"precious.txt": b"keep\n"}
    assert not planted.exists()


def test_a_symlink_loop_is_a_tool_error_in_a_speculation(setup):
    (setup.root / "loop-a").symlink_to("loop-b")
    (setup.root / "loop-b").symlink_to("loop-a")
    spec = speculate(setup, read_call("loop-a"), Message.assistant("it loops"))
    assert spec.status in (Status.COMPLETED, Status.BOUNDARY)
    assert isinstance(spec.events[-1], TurnFinished) or spec.boundary is not None
    assert Path(setup.root / "a.txt").read_text() == "one\n"
