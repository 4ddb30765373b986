"""Read before overwrite: write_file and edit change an existing file only after read_file
read it in this session, and only while it still holds what that read saw."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from qshell.tools.base import ErrorType, ToolContext, ToolResult
from qshell.tools.client_view import ClientView
from qshell.tools.edit import EditArgs, EditTool
from qshell.tools.fileview import REAL_VIEW
from qshell.tools.ledger import ReadLedger, Seen, Unread
from qshell.tools.read_file import MAX_LINE_CHARS, ReadFileArgs, ReadFileTool
from qshell.tools.write_file import WriteFileArgs, WriteFileTool
from tests.tools.reading import read_first
from tests.tools.test_fileview import ShadowView


def write(ctx: ToolContext, path: str, content: str) -> ToolResult:
    return WriteFileTool().run(WriteFileArgs(path=path, content=content), ctx)


def edit(ctx: ToolContext, path: str, old: str, new: str) -> ToolResult:
    return EditTool().run(EditArgs(path=path, old_string=old, new_string=new), ctx)


def error_type(result: ToolResult) -> ErrorType | None:
    return result.error.type if result.error is not None else None


def test_overwriting_a_file_never_read_fails_and_leaves_it_alone(root: Path, ctx: ToolContext):
    (root / "notes.txt").write_text("the user's notes\n")
    result = write(ctx, "notes.txt", "clobbered\n")
    assert error_type(result) is ErrorType.NOT_READ
    assert result.llm_content.startswith("Error: notes.txt already exists")
    assert "read_file" in result.llm_content
    assert (root / "notes.txt").read_text() == "the user's notes\n"


def test_editing_a_file_never_read_fails_and_leaves_it_alone(root: Path, ctx: ToolContext):
    (root / "m.py").write_text("x = 1\n")
    result = edit(ctx, "m.py", "x = 1", "x = 2")
    assert error_type(result) is ErrorType.NOT_READ
    assert (root / "m.py").read_text() == "x = 1\n"


def test_a_preview_says_why_the_write_would_fail(root: Path, ctx: ToolContext):
    (root / "notes.txt").write_text("keep\n")
    preview = WriteFileTool().preview(WriteFileArgs(path="notes.txt", content="x\n"), ctx)
    assert "has not been read in this session" in preview


def test_after_a_read_the_file_may_be_overwritten(root: Path, ctx: ToolContext):
    (root / "notes.txt").write_text("old\n")
    read_first(ctx, "notes.txt")
    result = write(ctx, "notes.txt", "new\n")
    assert result.error is None and (root / "notes.txt").read_text() == "new\n"


def test_one_page_of_a_long_file_counts_as_read(root: Path, ctx: ToolContext):
    (root / "long.txt").write_text("".join(f"line {n}\n" for n in range(5000)))
    page = ReadFileTool().run(ReadFileArgs(path="long.txt", limit=10), ctx)
    assert page.error is None and "offset=11" in page.llm_content
    assert write(ctx, "long.txt", "short\n").error is None


def test_a_read_with_truncated_lines_counts_and_still_sees_the_whole_file(root, ctx):
    wide = "head " + "a" * (3 * MAX_LINE_CHARS) + " tail\n"
    (root / "wide.txt").write_text(wide)
    page = ReadFileTool().run(ReadFileArgs(path="wide.txt"), ctx)
    assert "line truncated" in page.llm_content and "tail" not in page.llm_content
    assert edit(ctx, "wide.txt", "head", "HEAD").error is None
    # a change past the cut, which the read never showed, is still a change
    (root / "wide.txt").write_text(wide.replace("head", "HEAD").replace("tail", "TAIL"))
    assert error_type(write(ctx, "wide.txt", "x\n")) is ErrorType.CHANGED_SINCE_READ


def test_an_outside_change_since_the_read_fails_until_read_again(root: Path, ctx: ToolContext):
    (root / "notes.txt").write_text("version 1\n")
    read_first(ctx, "notes.txt")
    (root / "notes.txt").write_text("version 2\n")  # same size, maybe the same mtime tick
    result = write(ctx, "notes.txt", "the model's\n")
    assert error_type(result) is ErrorType.CHANGED_SINCE_READ
    assert "changed since it was last read" in result.llm_content
    assert (root / "notes.txt").read_text() == "version 2\n"
    assert error_type(edit(ctx, "notes.txt", "version", "v")) is ErrorType.CHANGED_SINCE_READ
    read_first(ctx, "notes.txt")
    assert write(ctx, "notes.txt", "the model's\n").error is None


def test_the_model_may_go_on_changing_what_it_wrote(root: Path, ctx: ToolContext):
    assert write(ctx, "new.py", "a = 1\n").error is None  # a new file needs no read
    assert edit(ctx, "new.py", "a = 1", "a = 2").error is None
    assert edit(ctx, "new.py", "a = 2", "a = 3").error is None
    assert write(ctx, "new.py", "b = 1\n").error is None
    assert (root / "new.py").read_text() == "b = 1\n"


def test_a_file_created_with_edit_needs_no_read(root: Path, ctx: ToolContext):
    assert edit(ctx, "fresh.txt", "", "hello\n").error is None
    assert (root / "fresh.txt").read_text() == "hello\n"


def test_a_touched_but_unchanged_file_is_not_stale(root: Path, ctx: ToolContext):
    (root / "notes.txt").write_text("same\n")
    read_first(ctx, "notes.txt")
    (root / "notes.txt").write_text("same\n")
    assert write(ctx, "notes.txt", "changed\n").error is None


def test_a_deleted_file_written_again_is_a_new_file(root: Path, ctx: ToolContext):
    (root / "gone.txt").write_text("x\n")
    read_first(ctx, "gone.txt")
    (root / "gone.txt").unlink()
    assert write(ctx, "gone.txt", "y\n").error is None


def test_a_fresh_session_context_has_read_nothing(root: Path, ctx: ToolContext):
    """A new or resumed session gets a new ToolContext, so a new ledger: what was read
    before must be read again."""
    (root / "notes.txt").write_text("old\n")
    read_first(ctx, "notes.txt")
    resumed = ToolContext(paths=ctx.paths)
    assert error_type(write(resumed, "notes.txt", "new\n")) is ErrorType.NOT_READ
    assert write(dataclasses.replace(ctx), "notes.txt", "new\n").error is None  # same session


def test_a_failed_read_counts_for_nothing(root: Path, ctx: ToolContext):
    (root / "short.txt").write_text("one line\n")
    past_end = ReadFileTool().run(ReadFileArgs(path="short.txt", offset=5), ctx)
    assert past_end.error is not None
    assert error_type(write(ctx, "short.txt", "x\n")) is ErrorType.NOT_READ


def test_a_note_through_another_view_stays_in_that_view(tmp_path: Path):
    """What is noted through a view that is not the disk (a speculation's overlay) counts
    there only, until `adopt`; what is noted on the disk counts in every view."""
    other, path = ShadowView(tmp_path, tmp_path / "shadow"), tmp_path / "f"
    ledger = ReadLedger()
    ledger.note(other, path, Seen.of(b"x"))
    assert ledger.problem(other, path, b"x") is None
    assert ledger.problem(REAL_VIEW, path, b"x") is Unread.NEVER_READ
    ledger.note(REAL_VIEW, tmp_path / "g", Seen.of(b"y"))
    assert ledger.problem(other, tmp_path / "g", b"y") is None
    assert ledger.problem(other, tmp_path / "g", b"z") is Unread.CHANGED
    ledger.adopt(other)
    assert ledger.problem(REAL_VIEW, path, b"x") is None


def test_an_editors_view_shares_the_disks_notes(root: Path, ctx: ToolContext):
    (root / "notes.txt").write_text("old\n")
    read_first(ctx, "notes.txt")
    editor = dataclasses.replace(ctx, view=ClientView())
    assert write(editor, "notes.txt", "new\n").error is None


@pytest.mark.parametrize("content", [b"", b"x\n"])
def test_an_empty_or_one_line_file_read_counts(root: Path, ctx: ToolContext, content: bytes):
    (root / "f.txt").write_bytes(content)
    read_first(ctx, "f.txt")
    assert write(ctx, "f.txt", "y\n").error is None
