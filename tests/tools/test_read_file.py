from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from qshell.tools.base import ErrorType, ToolContext
from qshell.tools.read_file import (
    DEFAULT_LIMIT_LINES,
    MAX_LINE_CHARS,
    READ_BUDGET_CHARS,
    ReadFileArgs,
    ReadFileTool,
)

TOOL = ReadFileTool()


def read(ctx: ToolContext, path: str, **kwargs: int):
    return TOOL.run(ReadFileArgs(path=path, **kwargs), ctx)


def test_read_file_numbers_lines_like_cat_n(root: Path, ctx: ToolContext) -> None:
    (root / "a.txt").write_text("alpha\nbeta\n")
    result = read(ctx, "a.txt")
    assert result.error is None
    assert result.llm_content == "     1\talpha\n     2\tbeta"
    assert "2 lines" in result.display


def test_read_file_pages_with_offset_and_limit(root: Path, ctx: ToolContext) -> None:
    (root / "many.txt").write_text("".join(f"line {n}\n" for n in range(1, 11)))
    result = read(ctx, "many.txt", offset=4, limit=3)
    lines = result.llm_content.splitlines()
    assert lines[:3] == ["     4\tline 4", "     5\tline 5", "     6\tline 6"]
    assert "lines 4-6 of 10" in result.llm_content
    assert "offset=7" in result.llm_content


def test_read_file_default_limit_leaves_a_paging_note(root: Path, ctx: ToolContext) -> None:
    total = DEFAULT_LIMIT_LINES + 5
    (root / "long.txt").write_text("x\n" * total)
    result = read(ctx, "long.txt")
    assert f"{DEFAULT_LIMIT_LINES:>6}\tx" in result.llm_content
    assert f"{DEFAULT_LIMIT_LINES + 1:>6}\tx" not in result.llm_content
    assert f"of {total}" in result.llm_content
    assert f"offset={DEFAULT_LIMIT_LINES + 1}" in result.llm_content


def test_read_file_last_page_has_no_paging_note(root: Path, ctx: ToolContext) -> None:
    (root / "a.txt").write_text("1\n2\n3")
    result = read(ctx, "a.txt", offset=2)
    assert result.llm_content == "     2\t2\n     3\t3"


def test_read_file_truncates_very_long_lines(root: Path, ctx: ToolContext) -> None:
    (root / "wide.txt").write_text("y" * (MAX_LINE_CHARS * 5) + "\nshort\n")
    result = read(ctx, "wide.txt")
    first, second = result.llm_content.splitlines()
    assert "line truncated" in first
    assert len(first) < MAX_LINE_CHARS + 100
    assert second == "     2\tshort"


def test_read_file_strips_a_utf8_bom_and_crlf(root: Path, ctx: ToolContext) -> None:
    (root / "bom.txt").write_bytes(b"\xef\xbb\xbfhello\r\nworld\r\n")
    assert read(ctx, "bom.txt").llm_content == "     1\thello\n     2\tworld"


def test_read_file_reports_an_empty_file_without_error(root: Path, ctx: ToolContext) -> None:
    (root / "empty.txt").write_text("")
    result = read(ctx, "empty.txt")
    assert result.error is None
    assert "empty" in result.llm_content


def test_read_file_offset_past_the_end_is_invalid(root: Path, ctx: ToolContext) -> None:
    (root / "a.txt").write_text("one\n")
    result = read(ctx, "a.txt", offset=5)
    assert result.error is not None
    assert result.error.type is ErrorType.INVALID_ARGS
    assert "1 lines" in result.error.message


def test_read_file_refuses_binary_files(root: Path, ctx: ToolContext) -> None:
    (root / "blob.bin").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00")
    result = read(ctx, "blob.bin")
    assert result.error is not None and result.error.type is ErrorType.BINARY_FILE


def test_read_file_treats_undecodable_bytes_as_binary(root: Path, ctx: ToolContext) -> None:
    (root / "latin.txt").write_bytes(b"caf\xe9 \xff\xfe au lait\n")
    result = read(ctx, "latin.txt")
    assert result.error is not None and result.error.type is ErrorType.BINARY_FILE


def test_read_file_refuses_a_directory(root: Path, ctx: ToolContext) -> None:
    (root / "src").mkdir()
    result = read(ctx, "src")
    assert result.error is not None and result.error.type is ErrorType.IS_DIRECTORY


def test_read_file_missing_file_suggests_similar_names(root: Path, ctx: ToolContext) -> None:
    (root / "config.yaml").write_text("a: 1\n")
    result = read(ctx, "config.yml")
    assert result.error is not None and result.error.type is ErrorType.NOT_FOUND
    assert "config.yaml" in result.error.message


def test_read_file_refuses_special_files(root: Path, ctx: ToolContext) -> None:
    os.mkfifo(root / "pipe")
    result = read(ctx, "pipe")
    assert result.error is not None and result.error.type is ErrorType.INVALID_ARGS


def test_read_file_reports_permission_denied(
    root: Path, ctx: ToolContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    (root / "locked.txt").write_text("no\n")
    real_open = Path.open

    def deny(self: Path, *args: Any, **kwargs: Any):
        if self.name == "locked.txt":
            raise PermissionError(13, "Permission denied", str(self))
        return real_open(self, *args, **kwargs)

    monkeypatch.setattr(Path, "open", deny)
    result = read(ctx, "locked.txt")
    assert result.error is not None and result.error.type is ErrorType.PERMISSION_DENIED


def test_read_file_stops_a_page_at_the_character_budget(root: Path, ctx: ToolContext) -> None:
    line = "z" * 1000
    lines = READ_BUDGET_CHARS // 1000 * 2
    (root / "dense.txt").write_text(f"{line}\n" * lines)
    result = read(ctx, "dense.txt")
    assert len(result.llm_content) < READ_BUDGET_CHARS + 2000
    assert f"of {lines}" in result.llm_content
    assert "offset=" in result.llm_content


def test_read_file_reads_outside_the_root(tmp_path: Path, ctx: ToolContext) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("elsewhere\n")
    result = read(ctx, str(outside))
    assert result.error is None
    assert "elsewhere" in result.llm_content


def test_read_file_accesses_name_the_resolved_path(root: Path, ctx: ToolContext) -> None:
    (accesses,) = TOOL.accesses(ReadFileArgs(path="sub/../a.txt"), ctx)
    assert accesses.path == root / "a.txt"
    assert accesses.write is False
