from __future__ import annotations

from pathlib import Path

import pytest

from qshell.tools.base import ErrorType, ToolContext
from qshell.tools.edit import EditArgs, EditTool
from tests.tools.reading import read_first
from tests.tools.tree import snapshot

TOOL = EditTool()


def edit(ctx: ToolContext, path: str, old: str, new: str, replace_all: bool = False):
    return TOOL.run(
        EditArgs(path=path, old_string=old, new_string=new, replace_all=replace_all), ctx
    )


def test_edit_replaces_a_unique_string_and_returns_the_diff(root: Path, ctx: ToolContext) -> None:
    (root / "m.py").write_text("def f():\n    return 1\n")
    read_first(ctx, "m.py")
    result = edit(ctx, "m.py", "return 1", "return 2")
    assert result.error is None
    assert (root / "m.py").read_text() == "def f():\n    return 2\n"
    assert "-    return 1" in result.llm_content
    assert "+    return 2" in result.llm_content
    assert "--- a/m.py" in result.display
    assert "replaced 1 occurrence" in result.llm_content


def test_edit_refuses_an_ambiguous_match_and_gives_the_count(root: Path, ctx: ToolContext) -> None:
    (root / "m.py").write_text("x = 1\nx = 1\nx = 1\n")
    read_first(ctx, "m.py")
    result = edit(ctx, "m.py", "x = 1", "x = 2")
    assert result.error is not None and result.error.type is ErrorType.AMBIGUOUS_MATCH
    assert "3 times" in result.error.message
    assert (root / "m.py").read_text() == "x = 1\nx = 1\nx = 1\n"


def test_edit_replace_all_changes_every_occurrence(root: Path, ctx: ToolContext) -> None:
    (root / "m.py").write_text("x = 1\ny = 0\nx = 1\n")
    read_first(ctx, "m.py")
    result = edit(ctx, "m.py", "x = 1", "x = 2", replace_all=True)
    assert result.error is None
    assert (root / "m.py").read_text() == "x = 2\ny = 0\nx = 2\n"
    assert "replaced 2 occurrences" in result.llm_content


@pytest.mark.parametrize(
    ("content", "old", "new", "hint"),
    [
        ("def f():\n    return 1\n", "def f():\n  return 1", "x", "whitespace"),
        ("alpha\nbeta\n", "     2\tbeta", "gamma", "line-number"),
        ("a\nstart here\nb\n", "start here\nsomething else", "z", "line 2"),
    ],
    ids=["whitespace_hint", "read_file_line_prefixes", "points_at_the_first_matching_line"],
)
def test_edit_no_match_is_an_error_with_a_hint(
    root: Path, ctx: ToolContext, content: str, old: str, new: str, hint: str
) -> None:
    (root / "m.py").write_text(content)
    read_first(ctx, "m.py")
    result = edit(ctx, "m.py", old, new)
    assert result.error is not None and result.error.type is ErrorType.NO_MATCH
    assert hint in result.error.message


def test_edit_identical_strings_are_no_change(root: Path, ctx: ToolContext) -> None:
    (root / "m.py").write_text("a\n")
    result = edit(ctx, "m.py", "a", "a")
    assert result.error is not None and result.error.type is ErrorType.NO_CHANGE


def test_edit_with_empty_old_string_creates_a_new_file(root: Path, ctx: ToolContext) -> None:
    result = edit(ctx, "new/dir/file.txt", "", "hello\n")
    assert result.error is None
    assert (root / "new/dir/file.txt").read_text() == "hello\n"
    assert "Created" in result.llm_content
    assert "+hello" in result.llm_content


def test_edit_with_empty_old_string_fills_an_empty_file(root: Path, ctx: ToolContext) -> None:
    (root / "empty.txt").write_text("")
    read_first(ctx, "empty.txt")
    result = edit(ctx, "empty.txt", "", "now\n")
    assert result.error is None
    assert (root / "empty.txt").read_text() == "now\n"


def test_edit_refuses_empty_old_string_on_a_non_empty_file(root: Path, ctx: ToolContext) -> None:
    (root / "full.txt").write_text("content\n")
    read_first(ctx, "full.txt")
    result = edit(ctx, "full.txt", "", "other")
    assert result.error is not None and result.error.type is ErrorType.INVALID_ARGS
    assert (root / "full.txt").read_text() == "content\n"


def test_edit_missing_file_is_not_found(root: Path, ctx: ToolContext) -> None:
    result = edit(ctx, "ghost.py", "a", "b")
    assert result.error is not None and result.error.type is ErrorType.NOT_FOUND
    assert "empty old_string" in result.error.message


def test_edit_keeps_crlf_line_endings(root: Path, ctx: ToolContext) -> None:
    (root / "win.txt").write_bytes(b"one\r\ntwo\r\nthree\r\n")
    read_first(ctx, "win.txt")
    result = edit(ctx, "win.txt", "one\ntwo\n", "one\n2\nextra\n")
    assert result.error is None
    assert (root / "win.txt").read_bytes() == b"one\r\n2\r\nextra\r\nthree\r\n"
    assert "\r" not in result.display


def test_edit_keeps_a_utf8_byte_order_mark(root: Path, ctx: ToolContext) -> None:
    (root / "bom.txt").write_bytes(b"\xef\xbb\xbfcaf\xc3\xa9\n")
    read_first(ctx, "bom.txt")
    result = edit(ctx, "bom.txt", "café", "thé")
    assert result.error is None
    assert (root / "bom.txt").read_bytes() == "\ufeffthé\n".encode()


def test_edit_refuses_binary_files(root: Path, ctx: ToolContext) -> None:
    (root / "blob").write_bytes(b"ab\x00cd")
    result = edit(ctx, "blob", "ab", "xy")
    assert result.error is not None and result.error.type is ErrorType.BINARY_FILE
    assert (root / "blob").read_bytes() == b"ab\x00cd"


def test_edit_refuses_a_directory(root: Path, ctx: ToolContext) -> None:
    (root / "d").mkdir()
    result = edit(ctx, "d", "a", "b")
    assert result.error is not None and result.error.type is ErrorType.IS_DIRECTORY


def test_edit_refuses_a_path_outside_the_root(tmp_path: Path, ctx: ToolContext) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("keep\n")
    result = edit(ctx, str(outside), "keep", "changed")
    assert result.error is not None and result.error.type is ErrorType.OUTSIDE_ROOT
    assert outside.read_text() == "keep\n"


def test_edit_refuses_dot_dot_escapes(tmp_path: Path, ctx: ToolContext) -> None:
    (tmp_path / "up.txt").write_text("keep\n")
    result = edit(ctx, "../up.txt", "keep", "changed")
    assert result.error is not None and result.error.type is ErrorType.OUTSIDE_ROOT
    assert (tmp_path / "up.txt").read_text() == "keep\n"


def test_edit_refuses_a_symlink_that_points_outside_the_root(
    root: Path, tmp_path: Path, ctx: ToolContext
) -> None:
    target = tmp_path / "target.txt"
    target.write_text("keep\n")
    (root / "link.txt").symlink_to(target)
    result = edit(ctx, "link.txt", "keep", "changed")
    assert result.error is not None and result.error.type is ErrorType.OUTSIDE_ROOT
    assert target.read_text() == "keep\n"


def test_edit_reports_permission_denied(
    root: Path, ctx: ToolContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    (root / "m.py").write_text("a\n")
    read_first(ctx, "m.py")

    def deny(self: Path, data: bytes) -> int:
        raise PermissionError(13, "Permission denied", str(self))

    monkeypatch.setattr(Path, "write_bytes", deny)
    result = edit(ctx, "m.py", "a", "b")
    assert result.error is not None and result.error.type is ErrorType.PERMISSION_DENIED


def test_edit_accesses_is_a_write(root: Path, ctx: ToolContext) -> None:
    (access,) = TOOL.accesses(EditArgs(path="m.py", old_string="a", new_string="b"), ctx)
    assert access.path == root / "m.py"
    assert access.write is True


@pytest.mark.parametrize(
    ("files", "args"),
    [
        (
            {"m.py": "def f():\n    return 1\n"},
            EditArgs(path="m.py", old_string="1", new_string="2"),
        ),
        (
            {"m.py": "x = 1\ny = 0\nx = 1\n"},
            EditArgs(path="m.py", old_string="x = 1", new_string="x = 2", replace_all=True),
        ),
        ({"w.txt": "a\r\nb\r\n"}, EditArgs(path="w.txt", old_string="a\nb", new_string="c\nd")),
        ({}, EditArgs(path="new/dir/f.txt", old_string="", new_string="hello\n")),
        ({"empty.txt": ""}, EditArgs(path="empty.txt", old_string="", new_string="filled\n")),
    ],
    ids=["unique", "replace_all", "crlf", "new_file", "empty_file"],
)
def test_edit_preview_is_the_diff_run_then_reports_and_writes_nothing(
    root: Path, ctx: ToolContext, files: dict[str, str], args: EditArgs
) -> None:
    for rel, content in files.items():
        (root / rel).write_bytes(content.encode())
    read_first(ctx, *files)
    before = snapshot(root)
    preview = TOOL.preview(args, ctx)
    assert snapshot(root) == before
    assert preview.startswith(("--- a/", "--- /dev/null"))
    result = TOOL.run(args, ctx)
    assert result.error is None
    assert preview == result.display


@pytest.mark.parametrize(
    ("content", "args", "expected"),
    [
        ("a\n", EditArgs(path="m.py", old_string="zzz", new_string="y"), "was not found"),
        ("x\nx\n", EditArgs(path="m.py", old_string="x", new_string="y"), "occurs 2 times"),
        ("a\n", EditArgs(path="m.py", old_string="a", new_string="a"), "identical"),
        ("a\n", EditArgs(path="gone.py", old_string="a", new_string="b"), "does not exist"),
        ("a\n", EditArgs(path="../out.py", old_string="", new_string="b"), "outside the project"),
    ],
    ids=["no_match", "ambiguous", "no_change", "missing", "outside_root"],
)
def test_edit_preview_of_a_failing_call_is_one_line_naming_the_problem(
    root: Path, ctx: ToolContext, content: str, args: EditArgs, expected: str
) -> None:
    (root / "m.py").write_text(content)
    read_first(ctx, "m.py")
    before = snapshot(root)
    preview = TOOL.preview(args, ctx)
    assert expected in preview
    assert "\n" not in preview
    assert snapshot(root) == before
    assert not (root.parent / "out.py").exists()
    result = TOOL.run(args, ctx)
    assert result.error is not None and " ".join(result.error.message.split()) == preview
