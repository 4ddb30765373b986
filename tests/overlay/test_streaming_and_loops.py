"""A speculative read_file streams (a huge file never lands in memory whole), and a symlink
loop is a tool error, never a RuntimeError that ends the turn."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import pytest

from qshell.agent.events import ToolFinished, TurnFinished
from qshell.llm.messages import Message
from qshell.overlay import Overlay, OverlayEscape
from qshell.tools.base import ErrorType, ToolContext
from qshell.tools.fileview import REAL_VIEW, open_stream
from qshell.tools.paths import PathResolver
from qshell.tools.read_file import ReadFileArgs, ReadFileTool
from tests.agent.scripted import call
from tests.agent.test_conversation import consume, make_conversation

LINES = 163_840  # 16 MiB of 100-byte lines


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    (root / "a.txt").write_text("one\n")
    (root / "loop-a").symlink_to("loop-b")
    (root / "loop-b").symlink_to("loop-a")
    return root


@pytest.fixture
def overlay(project: Path, tmp_path: Path):
    with Overlay.create(project, PathResolver(project), base_dir=tmp_path / "base") as ov:
        yield ov


def big_file(path: Path) -> Path:
    line = b"y" * 99 + b"\n"
    with open(path, "wb") as out:
        for _ in range(LINES // 1024):
            out.write(line * 1024)
    return path


def test_a_speculative_read_file_streams_a_large_file(overlay, project):
    big = big_file(project / "big.txt")
    ctx = ToolContext(paths=PathResolver(project), view=overlay.view)
    tracemalloc.start()
    try:
        result = ReadFileTool().run(ReadFileArgs(path="big.txt", limit=10), ctx)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert result.error is None and f"of {LINES}" in result.llm_content
    assert peak < big.stat().st_size // 4


def test_a_written_file_streams_from_its_copy(overlay, project):
    overlay.view.write_bytes(project / "a.txt", b"two\n")
    with overlay.view.open_read(project / "a.txt") as stream:
        assert stream.read() == b"two\n"
    with open_stream(REAL_VIEW, project / "a.txt") as stream:
        assert stream.read() == b"one\n"


def test_the_resolver_never_raises_on_a_symlink_loop(project):
    paths = PathResolver(project)
    assert paths.resolve("loop-a/x/../y") == project / "loop-a" / "x" / "y"
    climbing = paths.resolve("loop-a/../../z")  # Python folds `..` where the kernel says ELOOP
    assert not paths.is_inside_root(climbing) and paths.read_concern(climbing)  # asked, not free


@pytest.mark.parametrize("path", ["loop-a", "loop-a/x.txt"])
def test_read_file_through_a_symlink_loop_is_a_tool_error(project, overlay, path):
    for view in (REAL_VIEW, overlay.view):
        ctx = ToolContext(paths=PathResolver(project), view=view)
        result = ReadFileTool().run(ReadFileArgs(path=path), ctx)
        assert result.error is not None and result.error.type is ErrorType.IO


def test_a_write_through_a_symlink_loop_is_an_escape(overlay, project):
    with pytest.raises((OverlayEscape, OSError)):
        overlay.view.write_bytes(project / "loop-a" / "x.txt", b"x")
    assert not overlay.has_writes


def test_a_symlink_loop_is_a_tool_error_in_a_normal_turn(tmp_path):
    setup = make_conversation(tmp_path)
    (setup.root / "loop-a").symlink_to("loop-b")
    (setup.root / "loop-b").symlink_to("loop-a")
    read = call("read_file", '{"path": "loop-a/x.txt"}', "r1")
    setup.script(Message.assistant("", [read]), Message.assistant("it loops"))
    events = consume(setup.conversation.turn("read it"))
    finished = [e for e in events if isinstance(e, ToolFinished)]
    assert finished[0].result.error is not None
    assert isinstance(events[-1], TurnFinished) and events[-1].text == "it loops"
