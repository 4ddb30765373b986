from __future__ import annotations

from pathlib import Path

import pytest

from qshell.tools import ls as ls_module
from qshell.tools.base import ErrorType, ToolContext
from qshell.tools.ls import LsArgs, LsTool

TOOL = LsTool()


def ls(ctx: ToolContext, path: str | None = None):
    return TOOL.run(LsArgs(path=path), ctx)


def test_ls_lists_sorted_entries_with_dirs_marked(ignored_tree: Path, ctx: ToolContext) -> None:
    result = ls(ctx)
    assert result.error is None
    assert result.llm_content.splitlines() == [
        ".env",
        ".gitignore",
        ".hidden.py",
        "certs/",
        "image.bin",
        "keep.log",
        "src/",
    ]


def test_ls_respects_gitignore_in_subdirectories(ignored_tree: Path, ctx: ToolContext) -> None:
    (ignored_tree / "src" / "trace.log").write_text("x")
    assert ls(ctx, "src").llm_content.splitlines() == [".gitignore", "main.py", "nested/"]


def test_ls_marks_a_symlinked_directory_as_a_directory(root: Path, ctx: ToolContext) -> None:
    (root / "real").mkdir()
    (root / "alias").symlink_to(root / "real")
    assert ls(ctx).llm_content.splitlines() == ["alias/", "real/"]


def test_ls_caps_long_listings(
    make_tree, ctx: ToolContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ls_module, "MAX_LS_ENTRIES", 4)
    make_tree({f"f{n:02}.txt": "" for n in range(10)})
    result = ls(ctx)
    assert result.llm_content.splitlines()[:4] == ["f00.txt", "f01.txt", "f02.txt", "f03.txt"]
    assert "first 4 of 10 entries" in result.llm_content


def test_ls_of_an_empty_directory_is_not_an_error(root: Path, ctx: ToolContext) -> None:
    (root / "void").mkdir()
    result = ls(ctx, "void")
    assert result.error is None
    assert "empty" in result.llm_content


def test_ls_missing_directory_is_not_found(ctx: ToolContext) -> None:
    result = ls(ctx, "missing")
    assert result.error is not None and result.error.type is ErrorType.NOT_FOUND


def test_ls_of_a_file_is_not_a_directory(make_tree, ctx: ToolContext) -> None:
    make_tree({"a.txt": ""})
    result = ls(ctx, "a.txt")
    assert result.error is not None and result.error.type is ErrorType.NOT_A_DIRECTORY


def test_ls_reports_permission_denied(
    root: Path, ctx: ToolContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    def deny(path: object) -> object:
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr("qshell.tools.walk.os.scandir", deny)
    result = ls(ctx)
    assert result.error is not None and result.error.type is ErrorType.PERMISSION_DENIED


def test_ls_lists_outside_the_root(tmp_path: Path, ctx: ToolContext) -> None:
    outside = tmp_path / "other"
    outside.mkdir()
    (outside / "x.txt").write_text("")
    assert ls(ctx, str(outside)).llm_content == "x.txt"


def test_ls_accesses_the_directory(root: Path, ctx: ToolContext) -> None:
    (access,) = TOOL.accesses(LsArgs(), ctx)
    assert access.path == root
    assert access.write is False
