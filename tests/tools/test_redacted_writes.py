"""write_file and edit never put a redaction marker where the file held the secret: the
model writes back what it was shown, markers included, and the secret stays on disk."""

from __future__ import annotations

from pathlib import Path

import pytest

from qshell.redaction import marker
from qshell.tools.base import ErrorType, ToolContext
from qshell.tools.edit import EditArgs, EditTool
from qshell.tools.read_file import ReadFileArgs, ReadFileTool
from qshell.tools.write_file import WriteFileArgs, WriteFileTool
from tests.redaction.fakes import github_token, pem_block
from tests.tools.reading import read_first

TOKEN = github_token()
MARK = marker("github-token", 1)
CONFIG = f"[auth]\ntoken = {TOKEN}\nname = demo\n"


@pytest.fixture
def shown(root: Path, ctx: ToolContext) -> str:
    """config.ini holds a token; the model read it and was shown the page redacted."""
    (root / "config.ini").write_text(CONFIG)
    page = ReadFileTool().run(ReadFileArgs(path="config.ini"), ctx).llm_content
    seen = ctx.secrets.redact(page).text
    assert TOKEN not in seen and MARK in seen
    return seen


def write(ctx: ToolContext, path: str, content: str):
    return WriteFileTool().run(WriteFileArgs(path=path, content=content), ctx)


def edit(ctx: ToolContext, path: str, old: str, new: str):
    return EditTool().run(EditArgs(path=path, old_string=old, new_string=new), ctx)


def test_write_file_puts_the_secret_back_where_the_model_wrote_its_marker(root, ctx, shown):
    result = write(ctx, "config.ini", f"[auth]\ntoken = {MARK}\nname = renamed\n")
    assert result.error is None
    assert (root / "config.ini").read_text() == CONFIG.replace("demo", "renamed")


def test_an_edit_whose_old_text_holds_a_marker_matches_the_real_bytes(root, ctx, shown):
    result = edit(ctx, "config.ini", f"token = {MARK}\n", f"token = {MARK}\nregion = eu\n")
    assert result.error is None
    expected = CONFIG.replace(f"{TOKEN}\n", f"{TOKEN}\nregion = eu\n")
    assert (root / "config.ini").read_text() == expected


def test_an_edit_may_move_the_marker_within_the_file_that_holds_it(root, ctx, shown):
    result = edit(
        ctx, "config.ini", f"token = {MARK}\nname = demo\n", f"name = demo\nkey = {MARK}\n"
    )
    assert result.error is None
    assert (root / "config.ini").read_text() == f"[auth]\nname = demo\nkey = {TOKEN}\n"


def test_a_marker_carried_into_a_new_file_is_refused_and_nothing_is_written(root, ctx, shown):
    args = WriteFileArgs(path="copy.ini", content=f"token = {MARK}\n")
    unready = WriteFileTool().unready(args, ctx)  # no permission question is worth asking
    assert unready is not None and unready.error is not None
    assert unready.error.type is ErrorType.REDACTION_MARKER
    result = write(ctx, "copy.ini", f"token = {MARK}\n")
    assert result.error is not None and result.error.type is ErrorType.REDACTION_MARKER
    assert "copy.ini does not hold it" in result.error.message
    assert not (root / "copy.ini").exists()
    created = edit(ctx, "other.ini", "", f"token = {MARK}\n")
    assert created.error is not None and created.error.type is ErrorType.REDACTION_MARKER
    assert not (root / "other.ini").exists()


def test_a_marker_carried_into_another_existing_file_is_refused(root, ctx, shown):
    (root / "notes.txt").write_text("notes\n")
    read_first(ctx, "notes.txt")
    result = edit(ctx, "notes.txt", "notes\n", f"notes {MARK}\n")
    assert result.error is not None and result.error.type is ErrorType.REDACTION_MARKER
    assert (root / "notes.txt").read_text() == "notes\n"


@pytest.mark.parametrize("tool", ["write_file", "edit"])
def test_a_marker_the_model_invents_is_refused_and_the_file_is_unchanged(root, ctx, shown, tool):
    invented = marker("github-token", 5)
    if tool == "write_file":
        result = write(ctx, "config.ini", f"[auth]\ntoken = {invented}\nname = demo\n")
    else:
        result = edit(ctx, "config.ini", f"token = {MARK}", f"token = {invented}")
    assert result.error is not None and result.error.type is ErrorType.REDACTION_MARKER
    assert "stands for no secret qshell redacted in this session" in result.error.message
    assert (root / "config.ini").read_text() == CONFIG


def test_a_private_key_shown_on_numbered_lines_is_written_back_whole(root, ctx):
    key = pem_block()
    (root / "id_test").write_text(f"# deploy key\n{key}\n")
    page = ReadFileTool().run(ReadFileArgs(path="id_test"), ctx).llm_content
    seen = ctx.secrets.redact(page).text
    assert seen == f"     1\t# deploy key\n     2\t{marker('private-key', 1)}"
    result = write(ctx, "id_test", f"# deploy key (rotated 2024)\n{marker('private-key', 1)}\n")
    assert result.error is None
    assert (root / "id_test").read_text() == f"# deploy key (rotated 2024)\n{key}\n"
