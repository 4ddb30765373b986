"""Hard links a command made in its upper layer: applied as one inode with every name.

A kernel overlay copies the file `ln` links up into the command's layer and makes the new
name a second link of that copy, so the layer holds one inode with both names (checked on
the kernel by tests/followup/test_accept_hard_links.py). Taken in and applied, every name
ends as one inode — with the linked file's content, mode and xattrs alone — inside the
journaled step: a crash at any point recovers to all-old or all-new with no litter. A tool
write to one name writes the shared inode, as a real write would; a name linked elsewhere
in the project since is a conflict; a tool write to a real file with other links is
refused (HardLinked), since the overlay's copy would leave the other names stale.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from qshell.overlay import ApplyConflict, HardLinked, Overlay, staging
from qshell.overlay.journal import JOURNAL_NAME, recover_journal
from qshell.overlay.records import LINKED_TWICE
from qshell.tools.paths import PathResolver
from tests.overlay.test_apply import CRASH_POINTS, crashed_apply, no_litter
from tests.overlay.test_apply_metadata import xattrs_work
from tests.overlay.test_whiteouts import layer_of

NAMES = ("b.txt", "n.txt", "d/n.txt")  # after `ln b.txt n.txt; ln b.txt d/n.txt`
Tree = dict[str, tuple[bytes, tuple[str, ...]]]  # each file: its bytes and its other names


def make_project(root: Path) -> Path:
    (root / "d").mkdir(parents=True)
    (root / "a.txt").write_text("a\n")
    (root / "b.txt").write_text("b\n")
    (root / "d" / "keep.txt").write_text("keep\n")
    return root


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return make_project(tmp_path / "project")


@pytest.fixture
def overlay(project: Path, tmp_path: Path):
    with Overlay.create(project, PathResolver(project), base_dir=tmp_path / "base") as ov:
        yield ov


def tree(root: Path) -> Tree:
    """Every file under `root` with its bytes and the other names of its inode."""
    files = [p for p in sorted(root.rglob("*")) if p.is_file() and not p.is_symlink()]
    inodes: dict[int, list[str]] = {}
    for path in files:
        inodes.setdefault(os.lstat(path).st_ino, []).append(path.relative_to(root).as_posix())
    out: Tree = {}
    for path in files:
        rel, names = path.relative_to(root).as_posix(), inodes[os.lstat(path).st_ino]
        out[rel] = (path.read_bytes(), tuple(n for n in names if n != rel))
    return out


def command_links(overlay: Overlay, source: str, names: tuple[str, ...]) -> None:
    """What `ln source name` for each of `names` leaves in a kernel overlay's layer (the
    source copied up with its mode and xattrs, each name a link of the copy), taken in."""
    layer = layer_of(overlay)
    for rel in (source, *names):
        parent = (overlay.root / rel).parent
        if parent != overlay.root:
            (layer / rel).parent.mkdir(parents=True, exist_ok=True)
            os.chmod((layer / rel).parent, os.stat(parent).st_mode & 0o7777)
    shutil.copy2(overlay.root / source, layer / source)  # copy2: mode and xattrs
    for rel in names:
        os.link(layer / source, layer / rel)
    overlay.absorb(layer)


def linked_after(before: Tree, names: tuple[str, ...]) -> Tree:
    """`before`, with each of `names` one inode holding the first one's bytes."""
    after = dict(before)
    for rel in names:
        after[rel] = (before[names[0]][0], tuple(n for n in sorted(names) if n != rel))
    return after


def test_a_commands_links_land_as_one_inode_with_every_name(overlay, project):
    before = tree(project)
    command_links(overlay, "b.txt", NAMES[1:])
    assert overlay.written == sorted(NAMES)  # what the question lists
    report = overlay.apply()
    assert sorted(report.applied) == sorted(NAMES)
    assert tree(project) == linked_after(before, NAMES)
    assert os.lstat(project / "b.txt").st_nlink == 3
    assert no_litter(project)


def test_a_link_over_a_file_carries_the_linked_files_xattrs_alone(overlay, project, tmp_path):
    if not xattrs_work(tmp_path):
        pytest.skip("no user xattrs here")
    os.setxattr(project / "a.txt", "user.mine", b"a's")
    os.setxattr(project / "b.txt", "user.theirs", b"b's")
    command_links(overlay, "b.txt", ("a.txt",))  # `ln -f b.txt a.txt`
    overlay.apply()
    assert os.lstat(project / "a.txt").st_ino == os.lstat(project / "b.txt").st_ino
    assert os.listxattr(project / "a.txt") == ["user.theirs"]
    assert (project / "a.txt").read_text() == "b\n"


def test_a_tool_write_to_one_name_writes_the_shared_inode(overlay, project):
    before = tree(project)
    command_links(overlay, "b.txt", ("n.txt",))
    overlay.view.write_bytes(project / "n.txt", b"written\n")
    assert overlay.view.read_bytes(project / "b.txt") == b"written\n"
    overlay.apply()
    expected = linked_after(before, ("b.txt", "n.txt"))
    expected.update(
        {
            rel: (b"written\n", links)
            for rel, (_, links) in expected.items()
            if rel in ("b.txt", "n.txt")
        }
    )
    assert tree(project) == expected


def test_a_name_linked_elsewhere_in_the_project_since_is_a_conflict(overlay, project):
    command_links(overlay, "b.txt", ("n.txt",))
    os.link(project / "b.txt", project / "d" / "again.txt")  # the user, meanwhile
    before = tree(project)
    with pytest.raises(ApplyConflict) as raised:
        overlay.apply()
    assert [(c.path, c.reason) for c in raised.value.conflicts] == [("b.txt", LINKED_TWICE)]
    assert tree(project) == before


def linking_run(tmp_path: Path) -> tuple[Overlay, Tree, Tree]:
    """An overlay holding the links of `NAMES` and an edit of a.txt; the trees before and
    after its apply."""
    root = make_project(tmp_path / "p")
    overlay = Overlay.create(root, PathResolver(root), base_dir=tmp_path / "base")
    before = tree(root)
    command_links(overlay, "b.txt", NAMES[1:])
    overlay.view.write_bytes(root / "a.txt", b"a edited\n")  # an unlinked file in the apply
    return overlay, before, {**linked_after(before, NAMES), "a.txt": (b"a edited\n", ())}


def test_the_crash_points_below_cover_a_whole_linking_apply(tmp_path, monkeypatch):
    overlay, _, after = linking_run(tmp_path)
    assert crashed_apply(overlay, monkeypatch, None, also=(staging,)) < CRASH_POINTS
    assert tree(overlay.root) == after
    overlay.discard()


@pytest.mark.parametrize("crash_at", range(CRASH_POINTS))
def test_a_crash_at_any_step_of_a_linking_apply_recovers(tmp_path, monkeypatch, crash_at):
    overlay, before, after = linking_run(tmp_path)
    crashed_apply(overlay, monkeypatch, crash_at, also=(staging,))
    recovery = recover_journal(overlay.directory / JOURNAL_NAME)
    found = tree(overlay.root)
    if recovery is not None and recovery.direction == "rolled back":
        assert found == before
    assert found in (before, after)
    assert no_litter(overlay.root)
    overlay.discard()


@pytest.mark.parametrize("inside", [True, False])
def test_a_tool_write_to_a_real_file_with_other_links_is_refused(overlay, project, inside):
    """The overlay's copy would be that one name: the others would show the old content to
    every later read (an outside name too, where the jail shows it); a real write changes
    them all. Nothing is written."""
    other = project / "d" / "again.txt" if inside else project.parent / "outside.txt"
    os.link(project / "b.txt", other)
    with pytest.raises(HardLinked) as raised:
        overlay.view.write_bytes(project / "b.txt", b"b edited\n")
    assert "has other hard links" in str(raised.value)
    assert not overlay.has_writes
    assert list(overlay.upper.iterdir()) == []
