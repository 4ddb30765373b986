"""Checkpoints for /undo: per-turn originals, a stack of turns, and never losing a user edit."""

from __future__ import annotations

import stat
import threading
from pathlib import Path

from qshell.agent.checkpoints import Checkpoints, UndoReport
from qshell.config import ApprovalMode
from qshell.permissions.runner import MainToolRunner
from qshell.tools.base import ToolContext
from qshell.tools.edit import EditArgs, EditTool
from qshell.tools.paths import PathResolver
from tests.tools.reading import read_first


def write_in_turn(cp: Checkpoints, path: Path, text: str) -> None:
    cp.save(path)
    path.write_text(text)


def test_undo_restores_the_last_turn_first_and_then_the_one_before(tmp_path):
    f = tmp_path / "a.txt"
    f.write_text("v0")
    cp = Checkpoints(tmp_path)
    cp.begin_turn()
    write_in_turn(cp, f, "v1")
    cp.end_turn()
    cp.begin_turn()
    write_in_turn(cp, f, "v2")
    write_in_turn(cp, f, "v3")  # a second save in the same turn keeps the first original
    cp.end_turn()
    assert cp.can_undo
    assert cp.undo_last() == UndoReport(restored=["a.txt"])
    assert f.read_text() == "v1"
    assert cp.undo_last() == UndoReport(restored=["a.txt"])
    assert f.read_text() == "v0"
    assert not cp.can_undo and cp.undo_last().empty


def test_a_file_the_turn_created_is_deleted_and_its_new_directory_left_alone(tmp_path):
    new = tmp_path / "pkg" / "new.py"
    cp = Checkpoints(tmp_path)
    cp.begin_turn()
    cp.save(new)
    new.parent.mkdir()
    new.write_text("x = 1\n")
    cp.end_turn()
    report = cp.undo_last()
    assert report.deleted == ["pkg/new.py"] and report.restored == []
    assert not new.exists() and new.parent.is_dir()


def test_a_file_changed_since_the_turn_is_skipped_with_the_reason(tmp_path):
    f, g = tmp_path / "f.txt", tmp_path / "g.txt"
    f.write_text("old f")
    g.write_text("old g")
    cp = Checkpoints(tmp_path)
    cp.begin_turn()
    write_in_turn(cp, f, "agent f")
    write_in_turn(cp, g, "agent g")
    cp.end_turn()
    f.write_text("the user's own edit")
    report = cp.undo_last()
    assert report.restored == ["g.txt"] and report.deleted == []
    assert [name for name, _ in report.skipped] == ["f.txt"]
    assert "changed since" in report.skipped[0][1]
    assert f.read_text() == "the user's own edit" and g.read_text() == "old g"


def test_a_created_file_the_user_edited_afterwards_is_not_deleted(tmp_path):
    f = tmp_path / "made.txt"
    cp = Checkpoints(tmp_path)
    cp.begin_turn()
    write_in_turn(cp, f, "agent")
    cp.end_turn()
    f.write_text("user")
    report = cp.undo_last()
    assert report.deleted == [] and report.skipped[0][0] == "made.txt"
    assert f.read_text() == "user"


def test_a_file_the_turn_deleted_comes_back_with_its_mode(tmp_path):
    f = tmp_path / "run.sh"
    f.write_text("#!/bin/sh\n")
    f.chmod(0o751)
    cp = Checkpoints(tmp_path)
    cp.begin_turn()
    cp.save(f)
    f.unlink()
    cp.end_turn()
    assert cp.undo_last().restored == ["run.sh"]
    assert f.read_text() == "#!/bin/sh\n"
    assert stat.S_IMODE(f.stat().st_mode) == 0o751


def test_restoring_a_rewritten_file_keeps_its_original_mode(tmp_path):
    f = tmp_path / "secret-ish.cfg"
    f.write_bytes(b"\x00\x01binary ok")
    f.chmod(0o600)
    cp = Checkpoints(tmp_path)
    cp.begin_turn()
    cp.save(f)
    f.write_bytes(b"changed")
    f.chmod(0o644)
    cp.end_turn()
    cp.undo_last()
    assert f.read_bytes() == b"\x00\x01binary ok"
    assert stat.S_IMODE(f.stat().st_mode) == 0o600
    assert [p.name for p in tmp_path.iterdir()] == ["secret-ish.cfg"]  # no temp file left


def test_turns_without_saves_or_without_changes_leave_no_undo_entry(tmp_path):
    f = tmp_path / "same.txt"
    f.write_text("same")
    cp = Checkpoints(tmp_path)
    cp.begin_turn()
    cp.end_turn()
    cp.begin_turn()
    cp.save(f)  # an edit that failed and wrote nothing
    cp.end_turn()
    assert not cp.can_undo


def test_saves_from_many_threads_record_each_file_once(tmp_path):
    paths = [tmp_path / f"f{i}.txt" for i in range(20)]
    for p in paths:
        p.write_text("before")
    cp = Checkpoints(tmp_path)
    cp.begin_turn()

    def work(p: Path) -> None:
        cp.save(p)
        p.write_text("after")
        cp.save(p)

    threads = [threading.Thread(target=work, args=(p,)) for p in paths]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    cp.end_turn()
    report = cp.undo_last()
    assert sorted(report.restored) == sorted(p.name for p in paths)
    assert all(p.read_text() == "before" for p in paths)


def test_the_main_runner_checkpoints_a_real_edit_so_undo_reverts_it(tmp_path):
    f = tmp_path / "code.py"
    f.write_text("x = 1\n")
    ctx = ToolContext(paths=PathResolver(tmp_path, home=tmp_path / "home"))
    cp = Checkpoints(tmp_path)
    runner = MainToolRunner(ApprovalMode.YOLO, interactive=False, checkpoints=cp)
    tool = EditTool()
    cp.begin_turn()
    read_first(ctx, "code.py")
    edit = EditArgs(path="code.py", old_string="x = 1", new_string="x = 2")
    assert runner.execute(tool, edit, ctx).error is None
    create = EditArgs(path="new/made.py", old_string="", new_string="y = 0\n")
    assert runner.execute(tool, create, ctx).error is None
    cp.end_turn()
    assert f.read_text() == "x = 2\n"
    report = cp.undo_last()
    assert report == UndoReport(restored=["code.py"], deleted=["new/made.py"])
    assert f.read_text() == "x = 1\n" and not (tmp_path / "new" / "made.py").exists()


def test_the_runner_mode_can_be_changed_after_it_was_built(tmp_path):
    runner = MainToolRunner(ApprovalMode.DEFAULT, interactive=True)
    runner.mode = ApprovalMode.PLAN
    ctx = ToolContext(paths=PathResolver(tmp_path, home=tmp_path / "home"))
    edit = EditArgs(path="a.txt", old_string="", new_string="x")
    assert runner.decide(EditTool(), edit, ctx).verdict == "deny"
