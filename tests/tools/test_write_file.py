from __future__ import annotations

from pathlib import Path

import pytest

from qshell.tools.base import ErrorType, ToolContext
from qshell.tools.write_file import WriteFileArgs, WriteFileTool
from tests.tools.reading import read_first
from tests.tools.tree import snapshot

TOOL = WriteFileTool()


def write(ctx: ToolContext, path: str, content: str):
    return TOOL.run(WriteFileArgs(path=path, content=content), ctx)


def test_write_file_creates_a_file_and_its_parent_dirs(root: Path, ctx: ToolContext) -> None:
    result = write(ctx, "pkg/sub/new.py", "print('hi')\n")
    assert result.error is None
    assert (root / "pkg/sub/new.py").read_text() == "print('hi')\n"
    assert "Created pkg/sub/new.py (1 lines)" in result.llm_content
    assert "+print('hi')" in result.llm_content
    assert "+print('hi')" in result.display


def test_write_file_overwrite_reports_a_unified_diff(root: Path, ctx: ToolContext) -> None:
    (root / "a.txt").write_text("one\ntwo\nthree\n")
    read_first(ctx, "a.txt")
    result = write(ctx, "a.txt", "one\n2\nthree\n")
    assert result.error is None
    assert (root / "a.txt").read_text() == "one\n2\nthree\n"
    assert "--- a/a.txt" in result.display
    assert "+++ b/a.txt" in result.display
    assert "-two" in result.llm_content and "+2" in result.llm_content
    assert "+1 -1" in result.llm_content


def test_write_file_writes_content_byte_for_byte(root: Path, ctx: ToolContext) -> None:
    write(ctx, "crlf.txt", "a\r\nb\r\nünï\r\n")
    assert (root / "crlf.txt").read_bytes() == "a\r\nb\r\nünï\r\n".encode()


def test_write_file_with_identical_content_says_unchanged(root: Path, ctx: ToolContext) -> None:
    (root / "same.txt").write_text("x\n")
    read_first(ctx, "same.txt")
    result = write(ctx, "same.txt", "x\n")
    assert result.error is None
    assert "unchanged" in result.llm_content


def test_write_file_refuses_a_path_outside_the_root(tmp_path: Path, ctx: ToolContext) -> None:
    target = tmp_path / "outside.txt"
    result = write(ctx, str(target), "nope")
    assert result.error is not None and result.error.type is ErrorType.OUTSIDE_ROOT
    assert not target.exists()


def test_write_file_refuses_dot_dot_escapes(tmp_path: Path, ctx: ToolContext) -> None:
    result = write(ctx, "../escaped.txt", "nope")
    assert result.error is not None and result.error.type is ErrorType.OUTSIDE_ROOT
    assert not (tmp_path / "escaped.txt").exists()


def test_write_file_refuses_a_symlink_that_points_outside_the_root(
    root: Path, tmp_path: Path, ctx: ToolContext
) -> None:
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (root / "link").symlink_to(outside)
    result = write(ctx, "link/file.txt", "nope")
    assert result.error is not None and result.error.type is ErrorType.OUTSIDE_ROOT
    assert not (outside / "file.txt").exists()


def test_write_file_refuses_a_directory(root: Path, ctx: ToolContext) -> None:
    (root / "dir").mkdir()
    result = write(ctx, "dir", "x")
    assert result.error is not None and result.error.type is ErrorType.IS_DIRECTORY


def test_write_file_reports_a_parent_that_is_a_file(root: Path, ctx: ToolContext) -> None:
    (root / "plain").write_text("x")
    result = write(ctx, "plain/child.txt", "x")
    assert result.error is not None
    assert result.error.type in {ErrorType.NOT_A_DIRECTORY, ErrorType.IO}


def test_write_file_reports_permission_denied(
    root: Path, ctx: ToolContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    def deny(self: Path, data: bytes) -> int:
        raise PermissionError(13, "Permission denied", str(self))

    monkeypatch.setattr(Path, "write_bytes", deny)
    result = write(ctx, "a.txt", "x")
    assert result.error is not None and result.error.type is ErrorType.PERMISSION_DENIED


def test_write_file_accesses_is_a_write_of_the_resolved_path(root: Path, ctx: ToolContext) -> None:
    (access,) = TOOL.accesses(WriteFileArgs(path="x/../y.txt", content=""), ctx)
    assert access.path == root / "y.txt"
    assert access.write is True


@pytest.mark.parametrize(
    ("existing", "args"),
    [
        (None, WriteFileArgs(path="pkg/sub/new.py", content="print('hi')\n")),
        ("one\ntwo\nthree\n", WriteFileArgs(path="pkg/sub/new.py", content="one\n2\nthree\n")),
        ("same\n", WriteFileArgs(path="pkg/sub/new.py", content="same\n")),
        (None, WriteFileArgs(path="pkg/sub/new.py", content="")),
    ],
    ids=["create", "overwrite", "unchanged", "create_empty"],
)
def test_write_file_preview_is_what_run_then_reports_and_writes_nothing(
    root: Path, ctx: ToolContext, existing: str | None, args: WriteFileArgs
) -> None:
    if existing is not None:
        (root / "pkg/sub").mkdir(parents=True)
        (root / "pkg/sub/new.py").write_text(existing)
        read_first(ctx, "pkg/sub/new.py")
    before = snapshot(root)
    preview = TOOL.preview(args, ctx)
    assert snapshot(root) == before
    result = TOOL.run(args, ctx)
    assert result.error is None
    assert preview == result.display


def test_write_file_preview_of_a_new_file_is_a_diff_from_dev_null(
    root: Path, ctx: ToolContext
) -> None:
    preview = TOOL.preview(WriteFileArgs(path="n.txt", content="a\nb\n"), ctx)
    assert preview == "--- /dev/null\n+++ b/n.txt\n@@ -0,0 +1,2 @@\n+a\n+b\n"


@pytest.mark.parametrize(
    ("path", "expected"),
    [("../escaped.txt", "outside the project root"), ("adir", "adir is a directory")],
)
def test_write_file_preview_of_a_failing_call_is_one_line_naming_the_problem(
    root: Path, tmp_path: Path, ctx: ToolContext, path: str, expected: str
) -> None:
    (root / "adir").mkdir()
    preview = TOOL.preview(WriteFileArgs(path=path, content="x"), ctx)
    assert expected in preview and "\n" not in preview
    assert not (tmp_path / "escaped.txt").exists()
    result = TOOL.run(WriteFileArgs(path=path, content="x"), ctx)
    assert result.error is not None and result.error.message == preview
