"""Read before overwrite in speculation: a read inside the overlay counts for that
speculation only, a write over a file it never read is a tool error there too, and what
an accepted speculation read becomes the session's."""

from __future__ import annotations

import pytest

from qshell.agent.events import ToolFinished
from qshell.config import ApprovalMode
from qshell.followup.states import SpeculationOutcome, Status
from qshell.llm.messages import Message
from qshell.tools.base import ErrorType
from qshell.tools.write_file import WriteFileArgs, WriteFileTool
from tests.agent.test_conversation import consume
from tests.followup.helpers import answered_conversation
from tests.followup.test_speculation_accept_safety import (
    after,
    read_call,
    run_accept,
    speculate,
    write_call,
)


@pytest.fixture
def setup(tmp_path, monkeypatch):
    setup = answered_conversation(tmp_path, monkeypatch)
    setup.conversation.set_approval_mode(ApprovalMode.AUTO_EDIT)
    return setup


def finished(spec) -> list[ToolFinished]:
    return [e for e in spec.events if isinstance(e, ToolFinished)]


def real_write(setup, content: str):
    """The main session's write_file of a.txt, as a turn after the speculation runs it."""
    ctx = setup.conversation.session.tool_context
    return WriteFileTool().run(WriteFileArgs(path="a.txt", content=content), ctx)


def test_a_speculative_write_over_an_unread_file_is_a_tool_error(setup):
    spec = speculate(setup, write_call("a.txt", "two\n"), Message.assistant("tried"))
    (written,) = finished(spec)
    assert written.result.error is not None
    assert written.result.error.type is ErrorType.NOT_READ
    assert spec.status is Status.COMPLETED and not spec.overlay.has_writes
    spec.overlay.discard()


def test_a_read_in_the_overlay_counts_there_and_never_in_the_real_session(setup):
    spec = speculate(
        setup, read_call("a.txt"), write_call("a.txt", "two\n"), Message.assistant("done")
    )
    read, written = finished(spec)
    assert read.result.error is None and written.result.error is None
    assert spec.overlay.view.read_bytes(setup.root / "a.txt") == b"two\n"
    spec.overlay.discard()  # not accepted: the real session has read nothing
    refused = real_write(setup, "three\n")
    assert refused.error is not None and refused.error.type is ErrorType.NOT_READ
    assert (setup.root / "a.txt").read_text() == "one\n"


def session_reads_a(setup) -> None:
    setup.script(read_call("a.txt"), Message.assistant("it says one"))
    consume(setup.conversation.turn("what is in a.txt?"))


def test_a_file_the_session_read_may_be_written_by_its_speculation(setup):
    session_reads_a(setup)
    spec = speculate(setup, write_call("a.txt", "two\n"), Message.assistant("done"))
    (written,) = finished(spec)
    assert written.result.error is None
    spec.overlay.discard()


def test_a_speculation_may_not_write_a_file_the_user_changed_since_the_session_read_it(setup):
    session_reads_a(setup)
    spec = speculate(
        setup,
        after(
            lambda: (setup.root / "a.txt").write_text("the user's edit\n"),
            write_call("a.txt", "two\n"),
        ),
        Message.assistant("done"),
    )
    (written,) = finished(spec)
    assert written.result.error is not None
    assert written.result.error.type is ErrorType.CHANGED_SINCE_READ
    assert not spec.overlay.has_writes
    spec.overlay.discard()


def test_an_accepted_speculation_makes_its_reads_the_sessions(setup):
    spec = speculate(
        setup, read_call("a.txt"), write_call("a.txt", "two\n"), Message.assistant("done")
    )
    assert spec.status is Status.COMPLETED
    run_accept(setup, spec, outcome=SpeculationOutcome.ACCEPTED)
    assert (setup.root / "a.txt").read_text() == "two\n"
    assert real_write(setup, "three\n").error is None  # it knows what the file holds
    assert (setup.root / "a.txt").read_text() == "three\n"
