"""Apply gives each file and directory exactly the xattrs and ACLs of its upper copy — the
real one's, copied up with it, with what the speculation set or removed since — as a live
run leaves them, and keeps a change the user made meanwhile; a crash at any point of such
an apply recovers to all-old or all-new, attrs included.

A tool's write is compared with RealView's (the live write_file) in a second copy of the
project. A command's layer is made by hand as overlayfs makes one (an entry copied up with
its mode and attrs, then changed), then taken in (`Overlay.absorb`); the kernel's own copy-up
is checked against live bash in tests/followup/test_accept_attrs.py. Skipped where the
filesystem refuses user xattrs or ACLs.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from qshell.overlay import ApplyConflict, Overlay, dirmodes, metadata
from qshell.overlay.journal import JOURNAL_NAME, recover_journal
from qshell.overlay.records import ATTRS_CHANGED
from qshell.tools.fileview import REAL_VIEW
from qshell.tools.paths import PathResolver
from tests.followup.differential import ACL_USER, Snapshot, snapshot
from tests.overlay.test_apply import CRASH_POINTS, crashed_apply, no_litter
from tests.overlay.test_whiteouts import layer_of

ACL = "system.posix_acl_access"
DEFAULT_ACL = "system.posix_acl_default"
ENTRY = f"u:{ACL_USER}:r-x"


def _setfacl(path: Path, *args: str) -> None:
    subprocess.run(["setfacl", *args, str(path)], check=True, capture_output=True)


def make_project(root: Path) -> Path:
    """`notes.txt` with the user's xattr and an ACL, `plain.txt` with neither, `d/` with an
    xattr, an ACL and a default ACL (`d/old.txt`, made before it, inherited none), and a
    default ACL on the project directory itself."""
    (root / "d").mkdir(parents=True)
    (root / "notes.txt").write_text("notes v1\n")
    (root / "plain.txt").write_text("plain v1\n")
    (root / "d" / "old.txt").write_text("old v1\n")
    os.setxattr(root / "notes.txt", "user.origin", b"mine")
    os.setxattr(root / "d", "user.tag", b"d")
    _setfacl(root / "notes.txt", "-m", ENTRY)
    _setfacl(root / "d", "-m", ENTRY, "-m", f"d:{ENTRY}")
    _setfacl(root, "-d", "-m", ENTRY)
    return root


@pytest.fixture
def project(tmp_path: Path) -> Path:
    if shutil.which("setfacl") is None:
        pytest.skip("no setfacl here")
    root = tmp_path / "project"
    root.mkdir()
    try:
        os.setxattr(root, "user.probe", b"1")
        os.removexattr(root, "user.probe")
        return make_project(root)
    except (OSError, subprocess.CalledProcessError) as exc:
        pytest.skip(f"this filesystem refuses user xattrs or ACLs: {exc}")


@pytest.fixture
def overlay(project: Path, tmp_path: Path):
    with Overlay.create(project, PathResolver(project), base_dir=tmp_path / "base") as ov:
        yield ov


def attrs(path: Path) -> dict[str, bytes]:
    return metadata.attrs_at(None, path, directory=path.is_dir()) or {}


def copy_up(real: Path, layer: Path, rel: str) -> Path:
    """`rel` copied into `layer` as overlayfs copies it up: content, mode, xattrs, ACLs (its
    parents as plain directories, copied up likewise)."""
    parts = rel.split("/")
    for depth in range(1, len(parts)):
        parent = "/".join(parts[:depth])
        if not (layer / parent).exists():
            copy_up(real, layer, parent)
    source, target = real / rel, layer / rel
    if source.is_dir():
        target.mkdir()
    else:
        shutil.copyfile(source, target)
    metadata.write_attrs(str(target), attrs(source), directory=source.is_dir())
    os.chmod(target, stat.S_IMODE(os.lstat(source).st_mode))
    return target


# --- a tool's writes ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "rel", ["notes.txt", "plain.txt", "d/old.txt", "d/new.txt", "top.txt", "n/sub/f.txt"]
)
def test_a_tool_write_leaves_the_attrs_a_live_write_leaves(overlay, project, tmp_path, rel):
    """An existing file keeps its own (none inherited: a live write is in place), a new one
    inherits its directory's default ACL — the project directory's at the top — and so do
    the directories made for it."""
    live = make_project(tmp_path / "live")
    REAL_VIEW.write_bytes(live / rel, b"written\n")
    overlay.view.write_bytes(project / rel, b"written\n")
    overlay.apply()
    assert snapshot(project) == snapshot(live)


def test_a_tool_write_after_a_command_removed_an_xattr_keeps_it_removed(overlay, project):
    layer = layer_of(overlay)
    copied = copy_up(project, layer, "notes.txt")
    os.removexattr(copied, "user.origin")  # `setfattr -x user.origin notes.txt`
    overlay.absorb(layer)
    overlay.view.write_bytes(project / "notes.txt", b"notes v2\n")
    overlay.apply()
    assert (project / "notes.txt").read_text() == "notes v2\n"
    assert "user.origin" not in attrs(project / "notes.txt")
    assert ACL in attrs(project / "notes.txt")


# --- the user's changes meanwhile -----------------------------------------------------------------


def test_the_users_setfattr_on_a_file_written_since_is_a_conflict(overlay, project):
    overlay.view.write_bytes(project / "notes.txt", b"notes v2\n")
    os.setxattr(project / "notes.txt", "user.origin", b"theirs")
    with pytest.raises(ApplyConflict) as caught:
        overlay.apply()
    assert [(c.path, c.reason) for c in caught.value.conflicts] == [("notes.txt", ATTRS_CHANGED)]
    assert (project / "notes.txt").read_text() == "notes v1\n"
    assert attrs(project / "notes.txt")["user.origin"] == b"theirs"


def test_the_users_setfattr_on_a_directory_a_tool_wrote_in_is_kept(overlay, project):
    """The tool's write copied `d` up unchanged: the apply changes nothing of `d` itself."""
    overlay.view.write_bytes(project / "d" / "new.txt", b"new\n")
    os.setxattr(project / "d", "user.tag", b"theirs")
    _setfacl(project / "d", "-k")
    overlay.apply()
    assert (project / "d" / "new.txt").read_text() == "new\n"
    assert attrs(project / "d")["user.tag"] == b"theirs"
    assert DEFAULT_ACL not in attrs(project / "d")


def retag(overlay: Overlay, project: Path) -> dict[str, bytes]:
    """What `setfattr -x user.tag d; setfattr -n user.new -v 1 d; setfacl -k d` leaves in a
    command's layer, taken in; the attrs `d` then has there."""
    layer = layer_of(overlay)
    copied = copy_up(project, layer, "d")
    os.removexattr(copied, "user.tag")
    os.setxattr(copied, "user.new", b"1")
    _setfacl(copied, "-k")
    wanted = attrs(copied)
    overlay.absorb(layer)
    return wanted


def test_a_directory_a_command_retagged_gets_exactly_its_attrs(overlay, project):
    wanted = retag(overlay, project)
    [change] = overlay.mode_changes()
    assert change.rel == "d" and change.attrs is not None and change.mode == change.before
    overlay.apply()
    assert attrs(project / "d") == wanted
    assert set(wanted) == {"user.new", ACL}


def test_the_users_setfattr_on_a_directory_a_command_retagged_is_a_conflict(overlay, project):
    retag(overlay, project)
    os.setxattr(project / "d", "user.tag", b"theirs")
    with pytest.raises(ApplyConflict) as caught:
        overlay.apply()
    assert [(c.path, c.reason) for c in caught.value.conflicts] == [("d", ATTRS_CHANGED)]
    assert attrs(project / "d")["user.tag"] == b"theirs"
    assert DEFAULT_ACL in attrs(project / "d")


def test_an_acl_a_command_set_lands_with_the_mode_it_gave(overlay, project):
    """`setfacl -m u:…:rwx d` widens the mask, and so the directory's group bits."""
    layer = layer_of(overlay)
    copied = copy_up(project, layer, "d")
    _setfacl(copied, "-m", f"u:{ACL_USER}:rwx")
    wanted, mode = attrs(copied), stat.S_IMODE(os.lstat(copied).st_mode)
    overlay.absorb(layer)
    overlay.apply()
    assert attrs(project / "d") == {**wanted, "user.tag": b"d"} == attrs(copied)
    assert stat.S_IMODE(os.lstat(project / "d").st_mode) == mode


# --- hard links and crashes -----------------------------------------------------------------------


def test_an_in_place_edit_gets_exactly_the_copys_attrs(overlay, project, tmp_path):
    """A file the user hard-linked after the command removed its xattr is written in place:
    the removal lands on the inode, which every name shares."""
    layer = layer_of(overlay)
    copied = copy_up(project, layer, "notes.txt")
    copied.write_text("notes v2\n")
    os.removexattr(copied, "user.origin")
    overlay.absorb(layer)
    outside = tmp_path / "outside.txt"
    os.link(project / "notes.txt", outside)
    overlay.apply()
    assert outside.read_text() == "notes v2\n"
    assert "user.origin" not in attrs(outside) and ACL in attrs(outside)
    assert no_litter(project)


def attrs_run(tmp_path: Path, name: str) -> tuple[Overlay, Snapshot, Callable[[], Snapshot]]:
    """An overlay whose apply edits `notes.txt` (its xattr removed), makes `d/new.txt` and
    retags `d` — with the tree before it, and a way to see the tree after it."""
    root = make_project(tmp_path / name)
    overlay = Overlay.create(root, PathResolver(root), base_dir=tmp_path / f"base-{name}")
    before = snapshot(root)
    retag(overlay, root)
    layer = layer_of(overlay)
    copied = copy_up(root, layer, "notes.txt")
    copied.write_text("notes v2\n")
    os.removexattr(copied, "user.origin")
    overlay.absorb(layer)
    overlay.view.write_bytes(root / "d" / "new.txt", b"new\n")
    return overlay, before, lambda: snapshot(root)


def test_the_crash_points_below_cover_a_whole_apply_of_attrs(tmp_path, monkeypatch):
    overlay, before, now = attrs_run(tmp_path, "count")
    total = crashed_apply(overlay, monkeypatch, None, also=(dirmodes, metadata))
    assert total < CRASH_POINTS
    after = now()
    assert after["d"][3] != before["d"][3] and "user.origin" not in dict(after["notes.txt"][3])
    overlay.discard()


@pytest.mark.parametrize("crash_at", range(CRASH_POINTS))
def test_a_crash_at_any_step_of_an_apply_of_attrs_recovers(tmp_path, monkeypatch, crash_at):
    overlay, before, now = attrs_run(tmp_path, "crash")
    expected = attrs_run(tmp_path, "expected")
    expected[0].apply()
    after = expected[2]()
    expected[0].discard()
    crashed_apply(overlay, monkeypatch, crash_at, also=(dirmodes, metadata))
    recovery = recover_journal(overlay.directory / JOURNAL_NAME)
    found = now()
    if recovery is not None and recovery.direction == "rolled back":
        assert found == before
    assert found in (before, after)
    assert no_litter(overlay.root)
    overlay.discard()
