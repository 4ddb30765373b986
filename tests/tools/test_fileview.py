"""The file tools go through `ctx.view`: a fake "shadow directory" FileView proves it.

ShadowView maps every path under the project root to a second directory for writes; reads
and stats prefer the shadow copy, and directory listings merge both trees. A write through
it must leave the real tree untouched, and every tool must then see the shadow content.
"""

from __future__ import annotations

import dataclasses
import os
import stat as stat_module
from pathlib import Path

import pytest

from qshell.tools import grep as grep_module
from qshell.tools.base import ErrorType, ToolContext
from qshell.tools.edit import EditArgs, EditTool
from qshell.tools.fileview import REAL_VIEW, Entry, FileView, RealView
from qshell.tools.glob import GlobArgs, GlobTool
from qshell.tools.grep import GrepArgs, GrepTool
from qshell.tools.ls import LsArgs, LsTool
from qshell.tools.read_file import ReadFileArgs, ReadFileTool
from qshell.tools.walk import list_dir, walk_files
from qshell.tools.write_file import WriteFileArgs, WriteFileTool
from tests.tools.reading import read_first
from tests.tools.tree import snapshot


class ShadowView:
    """A FileView whose writes under `root` land in `shadow`, shadow copies winning reads."""

    def __init__(self, root: Path, shadow: Path) -> None:
        self.root = root
        self.shadow = shadow
        self.writes: list[Path] = []

    def _copy(self, path: Path) -> Path | None:
        if path == self.root or path.is_relative_to(self.root):
            return self.shadow / path.relative_to(self.root)
        return None

    def _source(self, path: Path) -> Path:
        copy = self._copy(path)
        return copy if copy is not None and copy.exists() else path

    def read_bytes(self, path: Path) -> bytes:
        return self._source(path).read_bytes()

    def write_bytes(self, path: Path, data: bytes, *, mode: int | None = None) -> None:
        copy = self._copy(path)
        if copy is None:
            raise PermissionError(13, "outside the shadowed root", str(path))
        copy.parent.mkdir(parents=True, exist_ok=True)
        existed = copy.exists()
        copy.write_bytes(data)
        if mode is not None and not existed:
            os.chmod(copy, stat_module.S_IMODE(mode))
        self.writes.append(path)

    def stat(self, path: Path) -> os.stat_result:
        return self._source(path).stat()

    def exists(self, path: Path) -> bool:
        return self._source(path).exists()

    def is_dir(self, path: Path) -> bool:
        return self._source(path).is_dir()

    def is_file(self, path: Path) -> bool:
        return self._source(path).is_file()

    def scandir(self, path: Path) -> list[Entry]:
        merged: dict[str, Entry] = {}
        listed = False
        for directory in (path, self._copy(path)):
            if directory is None or not directory.is_dir():
                continue
            listed = True
            for entry in REAL_VIEW.scandir(directory):
                merged[entry.name] = dataclasses.replace(entry, path=path / entry.name)
        if not listed:
            if self.exists(path):
                raise NotADirectoryError(20, "Not a directory", str(path))
            raise FileNotFoundError(2, "No such file or directory", str(path))
        return list(merged.values())


@pytest.fixture
def view(root: Path, tmp_path: Path) -> ShadowView:
    shadow = tmp_path / "shadow"
    shadow.mkdir()
    return ShadowView(root, shadow)


@pytest.fixture
def vctx(ctx: ToolContext, view: ShadowView) -> ToolContext:
    return dataclasses.replace(ctx, view=view)


def test_the_shadow_view_satisfies_the_protocol(view: ShadowView) -> None:
    typed: FileView = view
    assert not isinstance(typed, RealView)


def test_a_context_uses_the_real_view_by_default(ctx: ToolContext) -> None:
    assert ctx.view is REAL_VIEW


def test_write_file_writes_through_the_view_and_every_tool_sees_it(
    make_tree, root: Path, view: ShadowView, vctx: ToolContext
) -> None:
    make_tree({"src/app.py": "print('old')\n"})
    read_first(vctx, "src/app.py")
    before = snapshot(root)

    updated = WriteFileTool().run(
        WriteFileArgs(path="src/app.py", content="print('fresh')\n"), vctx
    )
    created = WriteFileTool().run(WriteFileArgs(path="pkg/new.py", content="fresh = 1\n"), vctx)

    assert updated.error is None and "Updated src/app.py" in updated.llm_content
    assert created.error is None and "Created pkg/new.py" in created.llm_content
    assert snapshot(root) == before
    assert view.writes == [root / "src/app.py", root / "pkg/new.py"]
    assert (view.shadow / "src/app.py").read_text() == "print('fresh')\n"

    read = ReadFileTool().run(ReadFileArgs(path="src/app.py"), vctx)
    assert read.llm_content == "     1\tprint('fresh')"
    found = GlobTool().run(GlobArgs(pattern="**/*.py"), vctx)
    assert set(found.llm_content.splitlines()) == {"src/app.py", "pkg/new.py"}
    hits = GrepTool(use_rg=False).run(GrepArgs(pattern="fresh|old"), vctx)
    assert set(hits.llm_content.splitlines()) == {
        "pkg/new.py:1:fresh = 1",
        "src/app.py:1:print('fresh')",
    }
    listing = LsTool().run(LsArgs(), vctx)
    assert listing.llm_content.splitlines() == ["pkg/", "src/"]
    assert LsTool().run(LsArgs(path="pkg"), vctx).llm_content == "new.py"


def test_the_real_context_does_not_see_what_the_view_wrote(
    make_tree, root: Path, ctx: ToolContext, vctx: ToolContext
) -> None:
    make_tree({"a.txt": "real\n"})
    WriteFileTool().run(WriteFileArgs(path="b.txt", content="shadow\n"), vctx)
    assert LsTool().run(LsArgs(), ctx).llm_content == "a.txt"
    assert LsTool().run(LsArgs(), vctx).llm_content.splitlines() == ["a.txt", "b.txt"]
    assert ReadFileTool().run(ReadFileArgs(path="b.txt"), ctx).error is not None


def test_edit_reads_and_writes_through_the_view(
    make_tree, root: Path, view: ShadowView, vctx: ToolContext
) -> None:
    make_tree({"m.py": "alpha = 1\nbeta = 2\n"})
    read_first(vctx, "m.py")
    before = snapshot(root)
    tool = EditTool()

    first = tool.run(EditArgs(path="m.py", old_string="alpha = 1", new_string="alpha = 10"), vctx)
    preview = tool.preview(
        EditArgs(path="m.py", old_string="alpha = 10", new_string="alpha = 100"), vctx
    )
    second = tool.run(EditArgs(path="m.py", old_string="alpha = 10", new_string="gamma"), vctx)
    created = tool.run(EditArgs(path="new/x.py", old_string="", new_string="x = 1\n"), vctx)

    assert first.error is None and second.error is None and created.error is None
    assert "+alpha = 100" in preview
    assert snapshot(root) == before
    assert (view.shadow / "m.py").read_text() == "gamma\nbeta = 2\n"
    read = ReadFileTool().run(ReadFileArgs(path="new/x.py"), vctx)
    assert read.llm_content == "     1\tx = 1"


def test_write_file_diff_is_against_the_views_content(make_tree, vctx: ToolContext) -> None:
    make_tree({"f.txt": "one\n"})
    read_first(vctx, "f.txt")
    WriteFileTool().run(WriteFileArgs(path="f.txt", content="two\n"), vctx)
    result = WriteFileTool().run(WriteFileArgs(path="f.txt", content="three\n"), vctx)
    assert "-two\n+three" in result.llm_content


def test_read_file_suggests_names_that_exist_only_in_the_view(vctx: ToolContext) -> None:
    WriteFileTool().run(WriteFileArgs(path="config.yaml", content="a: 1\n"), vctx)
    result = ReadFileTool().run(ReadFileArgs(path="config.yml"), vctx)
    assert result.error is not None and result.error.type is ErrorType.NOT_FOUND
    assert "config.yaml" in result.error.message


def test_a_gitignore_written_through_the_view_applies(
    make_tree, root: Path, vctx: ToolContext
) -> None:
    make_tree({"keep.py": "needle\n", "drop.py": "needle\n", "sub/deep.py": "needle\n"})
    WriteFileTool().run(WriteFileArgs(path=".gitignore", content="drop.py\nsub/\n"), vctx)

    assert not (root / ".gitignore").exists()
    assert LsTool().run(LsArgs(), vctx).llm_content.splitlines() == [".gitignore", "keep.py"]
    assert GlobTool().run(GlobArgs(pattern="*.py"), vctx).llm_content == "keep.py"
    hits = GrepTool(use_rg=False).run(GrepArgs(pattern="needle"), vctx)
    assert hits.llm_content == "keep.py:1:needle"
    assert {p.name for p in walk_files(root, root, view=vctx.view)} == {".gitignore", "keep.py"}
    assert list_dir(root, root) == [("drop.py", False), ("keep.py", False), ("sub", True)]


def test_glob_and_ls_on_a_directory_only_in_the_view(vctx: ToolContext) -> None:
    WriteFileTool().run(WriteFileArgs(path="fresh/a.md", content="# a\n"), vctx)
    assert GlobTool().run(GlobArgs(pattern="*.md", path="fresh"), vctx).llm_content == "fresh/a.md"
    assert LsTool().run(LsArgs(path="fresh"), vctx).llm_content == "a.md"


@pytest.mark.parametrize("use_rg", [None, True, False])
def test_grep_searches_in_python_when_the_view_is_not_the_real_disk(
    make_tree, vctx: ToolContext, monkeypatch: pytest.MonkeyPatch, use_rg: bool | None
) -> None:
    def no_rg() -> str | None:
        pytest.fail("ripgrep must not be looked up for a view other than the real disk")

    make_tree({"a.txt": "old needle\n"})
    read_first(vctx, "a.txt")
    WriteFileTool().run(WriteFileArgs(path="a.txt", content="new needle\n"), vctx)
    WriteFileTool().run(WriteFileArgs(path="b.txt", content="needle too\n"), vctx)
    monkeypatch.setattr(grep_module, "find_rg", no_rg)

    result = GrepTool(use_rg=use_rg).run(GrepArgs(pattern="needle"), vctx)
    assert result.error is None
    assert result.llm_content.splitlines() == ["a.txt:1:new needle", "b.txt:1:needle too"]
    single = GrepTool(use_rg=use_rg).run(GrepArgs(pattern="needle", path="b.txt"), vctx)
    assert single.llm_content == "b.txt:1:needle too"


def test_grep_still_uses_rg_on_the_real_view(
    make_tree, ctx: ToolContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    looked_up: list[bool] = []

    def missing_rg() -> str | None:
        looked_up.append(True)
        return None

    make_tree({"a.txt": "x\n"})
    monkeypatch.setattr(grep_module, "find_rg", missing_rg)
    result = GrepTool(use_rg=True).run(GrepArgs(pattern="x"), ctx)
    assert looked_up == [True]
    assert result.error is not None and result.error.type is ErrorType.IO


def test_walking_a_view_does_not_follow_directory_symlinks(
    make_tree, root: Path, tmp_path: Path, vctx: ToolContext
) -> None:
    make_tree({"a.py": ""})
    (tmp_path / "far").mkdir()
    (tmp_path / "far" / "b.py").write_text("")
    (root / "link").symlink_to(tmp_path / "far")
    assert GlobTool().run(GlobArgs(pattern="*.py"), vctx).llm_content == "a.py"
    assert LsTool().run(LsArgs(), vctx).llm_content.splitlines() == ["a.py", "link/"]
