from __future__ import annotations

import os
from pathlib import Path

import pytest

from qshell.tools import glob as glob_module
from qshell.tools.base import ErrorType, ToolContext
from qshell.tools.glob import GlobArgs, GlobTool

TOOL = GlobTool()


def find(ctx: ToolContext, pattern: str, path: str | None = None):
    return TOOL.run(GlobArgs(pattern=pattern, path=path), ctx)


def listed(result) -> list[str]:
    return [line for line in result.llm_content.splitlines() if line and not line.startswith("[")]


def test_glob_respects_gitignore_and_skips_git_and_secrets(
    ignored_tree: Path, ctx: ToolContext
) -> None:
    result = find(ctx, "**/*")
    assert result.error is None
    names = set(listed(result))
    assert {"src/main.py", "src/nested/deep.py", "keep.log", ".hidden.py"} <= names
    for hidden in ("build/out.py", "src/generated.py", "app.log", ".git/config"):
        assert hidden not in names
    assert ".env" not in names
    assert "certs/server.pem" not in names


def test_glob_pattern_without_slash_matches_at_any_depth(
    ignored_tree: Path, ctx: ToolContext
) -> None:
    assert set(listed(find(ctx, "*.py"))) == {"src/main.py", "src/nested/deep.py", ".hidden.py"}


def test_glob_pattern_with_slash_is_anchored(ignored_tree: Path, ctx: ToolContext) -> None:
    assert listed(find(ctx, "src/*.py")) == ["src/main.py"]


def test_glob_supports_brace_alternatives(make_tree, ctx: ToolContext) -> None:
    make_tree({"a.ts": "", "b.tsx": "", "c.js": ""})
    assert set(listed(find(ctx, "*.{ts,tsx}"))) == {"a.ts", "b.tsx"}


def test_glob_sorts_newest_first(make_tree, ctx: ToolContext) -> None:
    root = make_tree({"old.txt": "", "mid.txt": "", "new.txt": ""})
    for offset, name in enumerate(["old.txt", "mid.txt", "new.txt"]):
        stamp = 1_600_000_000 + offset * 1000
        os.utime(root / name, (stamp, stamp))
    assert listed(find(ctx, "*.txt")) == ["new.txt", "mid.txt", "old.txt"]


def test_glob_under_a_subdirectory_shows_root_relative_paths(
    ignored_tree: Path, ctx: ToolContext
) -> None:
    assert set(listed(find(ctx, "**/*.py", path="src"))) == {"src/main.py", "src/nested/deep.py"}


def test_glob_caps_the_number_of_results(
    make_tree, ctx: ToolContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(glob_module, "MAX_GLOB_RESULTS", 3)
    make_tree({f"f{n}.txt": "" for n in range(7)})
    result = find(ctx, "*.txt")
    assert len(listed(result)) == 3
    assert "3 most recently modified of 7" in result.llm_content


def test_glob_without_matches_is_not_an_error(make_tree, ctx: ToolContext) -> None:
    make_tree({"a.txt": ""})
    result = find(ctx, "*.rs")
    assert result.error is None
    assert "No files match" in result.llm_content


def test_glob_rejects_an_empty_pattern(ctx: ToolContext) -> None:
    result = find(ctx, "  ")
    assert result.error is not None and result.error.type is ErrorType.INVALID_ARGS


def test_glob_rejects_an_unparseable_pattern(ctx: ToolContext) -> None:
    result = find(ctx, "\\")
    assert result.error is not None and result.error.type is ErrorType.INVALID_ARGS


def test_glob_missing_directory_is_not_found(ctx: ToolContext) -> None:
    result = find(ctx, "*", path="nowhere")
    assert result.error is not None and result.error.type is ErrorType.NOT_FOUND


def test_glob_on_a_file_is_not_a_directory(make_tree, ctx: ToolContext) -> None:
    make_tree({"a.txt": ""})
    result = find(ctx, "*", path="a.txt")
    assert result.error is not None and result.error.type is ErrorType.NOT_A_DIRECTORY


def test_glob_stops_when_cancelled(make_tree, cancelled_ctx: ToolContext) -> None:
    make_tree({"a.txt": ""})
    result = find(cancelled_ctx, "*")
    assert result.error is not None and result.error.type is ErrorType.CANCELLED


def test_glob_accesses_the_search_directory(root: Path, ctx: ToolContext) -> None:
    (access,) = TOOL.accesses(GlobArgs(pattern="*", path="src"), ctx)
    assert access.path == root / "src"
    assert access.write is False
