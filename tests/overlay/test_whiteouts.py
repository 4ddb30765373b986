"""Deletions as overlayfs records them: whiteouts and opaque directories in `upper/`,
seen through the view, checked by the plan and applied (and recovered) by the journal."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from qshell.overlay import ApplyConflict, Overlay, OverlayEscape, trees, unlinks
from qshell.overlay.journal import JOURNAL_NAME, recover_journal
from qshell.overlay.upper import OPAQUE_XATTR
from qshell.tools.paths import PathResolver
from tests.overlay.test_apply import CRASH_POINTS, crashed_apply
from tests.overlay.test_overlay import snapshot


def whiteout(path: Path) -> None:
    """A character device 0:0 at `path`, as overlayfs records a deletion."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.mknod(path, stat.S_IFCHR | 0o600, 0)
    except PermissionError:
        done = subprocess.run(["unshare", "-r", "mknod", str(path), "c", "0", "0"], check=False)
        if done.returncode != 0:
            pytest.skip("cannot make a whiteout (mknod c 0 0) here")


def opaque(path: Path) -> None:
    path.mkdir(parents=True)
    try:
        os.setxattr(path, OPAQUE_XATTR, b"y")
    except OSError as exc:
        pytest.skip(f"no user xattrs here: {exc}")


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    (root / "src" / "pkg").mkdir(parents=True)
    (root / "src" / "app.py").write_text("app\n")
    (root / "src" / "pkg" / "mod.py").write_text("mod\n")
    (root / "old.txt").write_text("old\n")
    (root / "keep.txt").write_text("keep\n")
    return root


@pytest.fixture
def overlay(project: Path, tmp_path: Path):
    with Overlay.create(project, PathResolver(project), base_dir=tmp_path / "base") as ov:
        yield ov


def layer_of(overlay: Overlay) -> Path:
    """A fresh upper layer for one command, beside the overlay's `upper/`."""
    layer = overlay.directory / "layer"
    shutil.rmtree(layer, ignore_errors=True)
    layer.mkdir()
    return layer


def command_deletes(overlay: Overlay) -> None:
    """What `rm old.txt; rm -rf src; mkdir src; echo new > src/app.py; echo n > new.txt`
    leaves in its upper layer on a kernel overlay, taken in."""
    layer = layer_of(overlay)
    whiteout(layer / "old.txt")
    opaque(layer / "src")
    (layer / "src" / "app.py").write_text("new app\n")
    (layer / "new.txt").write_text("n\n")
    overlay.absorb(layer)


AFTER = {
    "keep.txt": b"keep\n",
    "new.txt": b"n\n",
    "src": None,
    "src/app.py": b"new app\n",
}


def test_a_whiteout_and_a_replaced_directory_read_as_deleted_through_the_view(overlay, project):
    command_deletes(overlay)
    view = overlay.view
    assert not view.exists(project / "old.txt")
    with pytest.raises(FileNotFoundError):
        view.read_bytes(project / "old.txt")
    assert not view.exists(project / "src" / "pkg" / "mod.py")
    assert not view.is_dir(project / "src" / "pkg")
    assert view.read_bytes(project / "src" / "app.py") == b"new app\n"
    assert sorted(e.name for e in view.scandir(project)) == ["keep.txt", "new.txt", "src"]
    assert [e.name for e in view.scandir(project / "src")] == ["app.py"]
    assert overlay.removed == ["old.txt", "src"]


def test_deletions_change_nothing_real_until_apply_and_then_land_as_deletions(overlay, project):
    before = snapshot(project)
    command_deletes(overlay)
    assert snapshot(project) == before
    report = overlay.apply()
    assert snapshot(project) == AFTER
    assert set(report.removed) == {"old.txt", "src"}


def test_a_deleted_file_changed_since_is_a_conflict_and_nothing_applies(overlay, project):
    command_deletes(overlay)
    (project / "old.txt").write_text("edited by the user\n")
    before = snapshot(project)
    with pytest.raises(ApplyConflict, match=r"old\.txt changed"):
        overlay.apply()
    assert snapshot(project) == before


def test_a_file_added_to_a_deleted_directory_since_is_a_conflict(overlay, project):
    command_deletes(overlay)
    (project / "src" / "pkg" / "added.py").write_text("user's\n")
    with pytest.raises(ApplyConflict, match="src changed"):
        overlay.apply()
    assert (project / "src" / "pkg" / "added.py").exists()


def test_a_deleted_file_already_gone_is_a_conflict(overlay, project):
    command_deletes(overlay)
    (project / "old.txt").unlink()
    with pytest.raises(ApplyConflict, match=r"old\.txt was deleted"):
        overlay.apply()


def test_a_change_between_check_and_move_puts_the_entry_back(overlay, project, monkeypatch):
    command_deletes(overlay)
    real = trees.digest_at

    def edited_first(parent, name, **kwargs):
        if name.startswith(".qshell-backup-"):
            return "something else"
        return real(parent, name, **kwargs)

    monkeypatch.setattr(unlinks, "digest_at", edited_first)
    before = snapshot(project)
    with pytest.raises(ApplyConflict):
        overlay.apply()
    assert snapshot(project) == before


def test_a_symlink_made_by_a_command_is_refused_and_nothing_taken_in(overlay):
    layer = layer_of(overlay)
    (layer / "new.txt").write_text("n\n")
    (layer / "link").symlink_to("/etc/passwd")
    with pytest.raises(OverlayEscape, match="symlink"):
        overlay.absorb(layer)
    assert not overlay.has_writes and overlay.check_conflicts() == []


def test_a_second_command_layers_over_the_first(overlay, project):
    command_deletes(overlay)
    layer = layer_of(overlay)
    whiteout(layer / "src" / "app.py")
    (layer / "old.txt").write_text("back\n")
    overlay.absorb(layer)
    assert overlay.view.read_bytes(project / "old.txt") == b"back\n"
    assert not overlay.view.exists(project / "src" / "app.py")
    overlay.apply()
    assert snapshot(project) == {
        "keep.txt": b"keep\n",
        "new.txt": b"n\n",
        "old.txt": b"back\n",
        "src": None,
    }


def test_unwanted_files_are_dropped_from_the_layer(overlay, project):
    layer = layer_of(overlay)
    (layer / "__pycache__").mkdir()
    (layer / "__pycache__" / "x.pyc").write_bytes(b"\0")
    (layer / "new.txt").write_text("n\n")
    # a directory the command made is a change of its own (an empty one may be protected)
    assert sorted(overlay.changes_in(layer)) == ["__pycache__/", "__pycache__/x.pyc", "new.txt"]
    overlay.absorb(layer, {"__pycache__/", "__pycache__/x.pyc"})
    assert not (overlay.upper / "__pycache__").exists()
    overlay.apply()
    assert not (project / "__pycache__").exists()
    assert (project / "new.txt").read_text() == "n\n"


def test_a_tool_write_below_a_deleted_directory_makes_it_a_replacement(overlay, project):
    layer = layer_of(overlay)
    whiteout(layer / "src")
    overlay.absorb(layer)
    overlay.view.write_bytes(project / "src" / "only.py", b"only\n")
    assert [e.name for e in overlay.view.scandir(project / "src")] == ["only.py"]
    overlay.apply()
    assert sorted(p.name for p in (project / "src").iterdir()) == ["only.py"]


@pytest.mark.parametrize("crash_at", range(0, CRASH_POINTS, 3))
def test_a_crash_at_any_step_of_a_deleting_apply_recovers(tmp_path, monkeypatch, crash_at):
    root = tmp_path / f"p{crash_at}"
    (root / "src" / "pkg").mkdir(parents=True)
    (root / "src" / "app.py").write_text("app\n")
    (root / "src" / "pkg" / "mod.py").write_text("mod\n")
    (root / "old.txt").write_text("old\n")
    (root / "keep.txt").write_text("keep\n")
    overlay = Overlay.create(root, PathResolver(root), base_dir=tmp_path / "base")
    before = snapshot(root)
    command_deletes(overlay)
    crashed_apply(overlay, monkeypatch, crash_at)
    recovery = recover_journal(overlay.directory / JOURNAL_NAME)
    after = snapshot(root)
    assert after in (before, AFTER)
    if recovery is not None and recovery.direction == "rolled back":
        assert after == before
    assert not any(".qshell-" in rel for rel in after)
    overlay.discard()
