from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from qshell.tools import grep as grep_module
from qshell.tools.base import ErrorType, ToolContext
from qshell.tools.grep import GrepArgs, GrepTool, find_rg

RG_MISSING = find_rg() is None


@pytest.fixture(params=["python", "rg"])
def tool(request: pytest.FixtureRequest) -> GrepTool:
    if request.param == "rg" and RG_MISSING:
        pytest.skip("ripgrep (rg) is not installed")
    return GrepTool(use_rg=request.param == "rg")


def grep(tool: GrepTool, ctx: ToolContext, pattern: str, **kwargs: str):
    return tool.run(GrepArgs(pattern=pattern, **kwargs), ctx)


def files_of(result) -> set[str]:
    return {line.split(":", 1)[0] for line in result.llm_content.splitlines() if ":" in line}


def test_grep_prints_relpath_line_and_text(make_tree, tool: GrepTool, ctx: ToolContext) -> None:
    make_tree({"pkg/a.py": "x = 1\ny = 'needle'\n"})
    result = grep(tool, ctx, r"need\w+")
    assert result.error is None
    assert result.llm_content == "pkg/a.py:2:y = 'needle'"
    assert "1 matches in 1 files" in result.display


def test_grep_respects_gitignore_at_root_and_in_subdirs(
    ignored_tree: Path, tool: GrepTool, ctx: ToolContext
) -> None:
    found = files_of(grep(tool, ctx, "needle"))
    assert {"src/main.py", "src/nested/deep.py", "keep.log"} <= found
    assert not found & {"build/out.py", "src/generated.py", "app.log"}


def test_grep_searches_dotfiles_but_not_the_git_dir(
    ignored_tree: Path, tool: GrepTool, ctx: ToolContext
) -> None:
    found = files_of(grep(tool, ctx, "needle"))
    assert ".hidden.py" in found
    assert ".git/config" not in found


def test_grep_skips_secret_files(ignored_tree: Path, tool: GrepTool, ctx: ToolContext) -> None:
    result = grep(tool, ctx, "needle")
    assert ".env" not in files_of(result)
    assert "certs/server.pem" not in files_of(result)
    assert "TOKEN" not in result.llm_content


def test_grep_secret_exclusion_beats_the_callers_glob(
    ignored_tree: Path, tool: GrepTool, ctx: ToolContext
) -> None:
    result = grep(tool, ctx, "needle", glob="*.pem")
    assert "certs/server.pem" not in files_of(result)


def test_grep_skips_binary_files(ignored_tree: Path, tool: GrepTool, ctx: ToolContext) -> None:
    assert "image.bin" not in files_of(grep(tool, ctx, "needle"))


def test_grep_filters_by_glob(ignored_tree: Path, tool: GrepTool, ctx: ToolContext) -> None:
    assert files_of(grep(tool, ctx, "needle", glob="*.log")) == {"keep.log"}


def test_grep_limits_the_search_to_a_subdirectory(
    ignored_tree: Path, tool: GrepTool, ctx: ToolContext
) -> None:
    assert files_of(grep(tool, ctx, "needle", path="src")) == {"src/main.py", "src/nested/deep.py"}


def test_grep_searches_a_single_file(ignored_tree: Path, tool: GrepTool, ctx: ToolContext) -> None:
    result = grep(tool, ctx, "needle", path="src/main.py")
    assert result.llm_content == "src/main.py:1:print('needle')"


def test_grep_without_matches_is_not_an_error(
    ignored_tree: Path, tool: GrepTool, ctx: ToolContext
) -> None:
    result = grep(tool, ctx, "haystack")
    assert result.error is None
    assert "No matches" in result.llm_content


def test_grep_caps_the_number_of_matches(
    make_tree, tool: GrepTool, ctx: ToolContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(grep_module, "MAX_MATCHES", 5)
    make_tree({"many.txt": "hit\n" * 50})
    result = grep(tool, ctx, "hit")
    assert len([line for line in result.llm_content.splitlines() if ":hit" in line]) == 5
    assert "there are more" in result.llm_content
    assert "5+ matches" in result.display


def test_grep_caps_output_characters(make_tree, tool: GrepTool, ctx: ToolContext) -> None:
    make_tree({"wide.txt": ("w" * 300 + "\n") * 40})
    small = dataclasses.replace(ctx, max_output_chars=1000)
    result = grep(tool, small, "w+")
    assert len(result.llm_content) < 1300
    assert "there are more" in result.llm_content


def test_grep_rejects_an_invalid_regex(make_tree, tool: GrepTool, ctx: ToolContext) -> None:
    make_tree({"a.txt": "x"})
    result = grep(tool, ctx, "(unclosed")
    assert result.error is not None and result.error.type is ErrorType.INVALID_ARGS


def test_grep_rejects_an_invalid_glob(make_tree, tool: GrepTool, ctx: ToolContext) -> None:
    make_tree({"a.txt": "x"})
    result = grep(tool, ctx, "x", glob="\\")
    assert result.error is not None and result.error.type is ErrorType.INVALID_ARGS


def test_grep_missing_path_is_not_found(tool: GrepTool, ctx: ToolContext) -> None:
    result = grep(tool, ctx, "x", path="nope")
    assert result.error is not None and result.error.type is ErrorType.NOT_FOUND


def test_grep_when_cancelled_returns_cancelled(
    make_tree, tool: GrepTool, cancelled_ctx: ToolContext
) -> None:
    make_tree({"a.txt": "x\n"})
    result = grep(tool, cancelled_ctx, "x")
    assert result.error is not None and result.error.type is ErrorType.CANCELLED


@pytest.mark.skipif(RG_MISSING, reason="ripgrep (rg) is not installed")
def test_grep_falls_back_to_python_for_regex_rg_cannot_parse(make_tree, ctx: ToolContext) -> None:
    make_tree({"a.txt": "ab\ncb\n"})
    result = grep(GrepTool(use_rg=True), ctx, r"(?<=a)b")
    assert result.error is None
    assert result.llm_content == "a.txt:1:ab"


def test_grep_forcing_rg_without_rg_installed_is_an_error(
    make_tree, ctx: ToolContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(grep_module, "find_rg", lambda: None)
    make_tree({"a.txt": "x\n"})
    result = grep(GrepTool(use_rg=True), ctx, "x")
    assert result.error is not None and result.error.type is ErrorType.IO


def test_grep_default_backend_works_whichever_is_installed(make_tree, ctx: ToolContext) -> None:
    make_tree({"a.txt": "x\n"})
    assert GrepTool().run(GrepArgs(pattern="x"), ctx).llm_content == "a.txt:1:x"


def test_grep_searches_outside_the_root_with_absolute_paths(
    tmp_path: Path, tool: GrepTool, ctx: ToolContext
) -> None:
    other = tmp_path / "other"
    other.mkdir()
    (other / "o.txt").write_text("needle\n")
    result = grep(tool, ctx, "needle", path=str(other))
    assert result.llm_content == f"{other / 'o.txt'}:1:needle"


def test_grep_accesses_the_search_path(root: Path, ctx: ToolContext) -> None:
    (access,) = GrepTool().accesses(GrepArgs(pattern="x"), ctx)
    assert access.path == root
    assert access.write is False
