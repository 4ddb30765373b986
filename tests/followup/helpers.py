"""Shared set-up of the speculation tests: a conversation ready to speculate."""

from __future__ import annotations

from pathlib import Path

import pytest

from qshell.llm.messages import Message
from tests.agent.test_conversation import Setup, consume, make_conversation


def answered_conversation(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Setup:
    """A conversation after one answered turn (so it has cache-safe parameters to fork),
    its temp dir (and so the overlay base) in tmp_path, and `a.txt` holding "one"."""
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    setup = make_conversation(tmp_path)
    (setup.root / "a.txt").write_text("one\n")
    setup.script(Message.assistant("hello"))
    consume(setup.conversation.turn("hi"))
    assert setup.conversation.session.cache_safe is not None
    return setup
