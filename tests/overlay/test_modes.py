"""Modes at apply: a mode changed since the copy is a conflict, and apply never writes what the
user could not — judged from the mode bits, so the tests mean the same when run as root; a
tool's write keeps the mode a command gave the copy."""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path
from types import SimpleNamespace

import pytest

from qshell.overlay import ApplyConflict, Overlay, plan
from qshell.overlay.records import DIR_READ_ONLY, MODE_CHANGED, READ_ONLY
from qshell.tools.paths import PathResolver
from tests.overlay.test_whiteouts import layer_of


@pytest.fixture
def project(tmp_path: Path):
    root = tmp_path / "project"
    (root / "docs").mkdir(parents=True)
    (root / "a.txt").write_text("one\n")
    (root / "docs" / "d.md").write_text("d\n")
    yield root
    for path in (root, root / "docs", root / "a.txt", root / "docs" / "d.md"):
        if path.exists():
            os.chmod(path, 0o755 if path.is_dir() else 0o644)  # so tmp_path can be removed


@pytest.fixture
def overlay(project: Path, tmp_path: Path):
    with Overlay.create(project, PathResolver(project), base_dir=tmp_path / "base") as ov:
        yield ov


def test_a_file_made_read_only_after_the_copy_is_not_overwritten(overlay, project):
    overlay.view.write_bytes(project / "a.txt", b"two\n")
    os.chmod(project / "a.txt", 0o444)
    with pytest.raises(ApplyConflict) as caught:
        overlay.apply()
    assert [(c.path, c.reason) for c in caught.value.conflicts] == [("a.txt", MODE_CHANGED)]
    assert (project / "a.txt").read_text() == "one\n"
    assert stat.S_IMODE((project / "a.txt").stat().st_mode) == 0o444


def test_a_read_only_file_is_refused_at_the_speculative_write(overlay, project):
    os.chmod(project / "a.txt", 0o444)
    with pytest.raises(PermissionError):
        overlay.view.write_bytes(project / "a.txt", b"two\n")
    assert not overlay.has_writes


def test_a_directory_made_read_only_stops_the_apply(overlay, project):
    overlay.view.write_bytes(project / "docs" / "d.md", b"d2\n")
    overlay.view.write_bytes(project / "docs" / "new.md", b"new\n")
    os.chmod(project / "docs", 0o555)
    with pytest.raises(ApplyConflict) as caught:
        overlay.apply()
    assert {(c.path, c.reason) for c in caught.value.conflicts} == {
        ("docs/d.md", DIR_READ_ONLY),
        ("docs/new.md", DIR_READ_ONLY),
    }
    assert sorted(p.name for p in (project / "docs").iterdir()) == ["d.md"]


def test_a_new_directory_under_a_read_only_one_is_refused(overlay, project):
    overlay.view.write_bytes(project / "docs" / "sub" / "x.md", b"x\n")
    os.chmod(project / "docs", 0o555)
    with pytest.raises(ApplyConflict, match=DIR_READ_ONLY):
        overlay.apply()
    assert not (project / "docs" / "sub").exists()


def test_a_conflict_for_modes_applies_nothing_else(overlay, project):
    overlay.view.write_bytes(project / "a.txt", b"two\n")
    overlay.view.write_bytes(project / "docs" / "d.md", b"d2\n")
    os.chmod(project / "docs" / "d.md", 0o400)
    with pytest.raises(ApplyConflict):
        overlay.apply()
    assert (project / "a.txt").read_text() == "one\n"


def info(mode: int, uid: int, gid: int) -> os.stat_result:
    return SimpleNamespace(st_mode=mode, st_uid=uid, st_gid=gid)  # type: ignore[return-value]


@pytest.mark.parametrize(
    ("mode", "owner", "expected"),
    [
        (stat.S_IFREG | 0o644, True, True),
        (stat.S_IFREG | 0o444, True, False),
        (stat.S_IFREG | 0o464, False, True),  # group-writable, we are in the group
        (stat.S_IFREG | 0o644, False, False),
    ],
)
def test_write_permission_follows_the_users_class_of_mode_bits(monkeypatch, mode, owner, expected):
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    monkeypatch.setattr(os, "getegid", lambda: 100)
    monkeypatch.setattr(os, "getgroups", lambda: [100])
    uid = 1000 if owner else 2000
    assert plan.may_write(info(mode, uid, 100)) is expected


def test_a_directory_needs_write_and_search_permission(monkeypatch):
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    assert plan.may_write(info(stat.S_IFDIR | 0o755, 1000, 1), directory=True)
    assert not plan.may_write(info(stat.S_IFDIR | 0o655, 1000, 1), directory=True)
    assert not plan.may_write(info(stat.S_IFDIR | 0o555, 1000, 1), directory=True)


def test_root_respects_a_file_nobody_may_write(monkeypatch):
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    assert not plan.may_write(info(stat.S_IFREG | 0o444, 1000, 1000))
    assert plan.may_write(info(stat.S_IFREG | 0o644, 1000, 1000))


def test_a_file_whose_owner_changed_so_we_may_not_write_it_is_refused(
    overlay, project, monkeypatch
):
    overlay.view.write_bytes(project / "a.txt", b"two\n")
    owner = (project / "a.txt").stat().st_uid
    monkeypatch.setattr(os, "geteuid", lambda: owner + 4242)  # as if chown'd to another user
    monkeypatch.setattr(os, "getgroups", lambda: [])
    monkeypatch.setattr(os, "getegid", lambda: 4242)
    os.chmod(project, 0o777)  # the directory stays writable for "other": only the file is not
    with pytest.raises(ApplyConflict) as caught:
        overlay.apply()
    assert [(c.path, c.reason) for c in caught.value.conflicts] == [("a.txt", READ_ONLY)]
    assert (project / "a.txt").read_text() == "one\n"


def test_a_tool_write_after_a_commands_chmod_keeps_the_copys_mode(overlay, project):
    """`chmod +x` (a command: the file copied up with the new mode), then write_file: a real
    write keeps the file's mode, and so does the overlay's, to the apply."""
    layer = layer_of(overlay)
    shutil.copy2(project / "a.txt", layer / "a.txt")
    os.chmod(layer / "a.txt", 0o755)  # what the kernel overlay leaves after `chmod +x a.txt`
    overlay.absorb(layer)
    overlay.view.write_bytes(project / "a.txt", b"two\n")
    assert stat.S_IMODE(overlay.view.stat(project / "a.txt").st_mode) == 0o755
    overlay.apply()
    assert (project / "a.txt").read_text() == "two\n"
    assert stat.S_IMODE((project / "a.txt").stat().st_mode) == 0o755
