"""The base taken before a command (baseline.py), what absorb does with it, the privilege a
layer may never bring in, and the symlinks a read goes through (reads.links_on)."""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

import pytest

from qshell.overlay import ApplyConflict, Overlay, OverlayEscape
from qshell.overlay.baseline import BASE_CHANGED, take
from qshell.overlay.dirfd import open_dir
from qshell.overlay.reads import links_on
from qshell.tools.paths import PathResolver
from tests.overlay.test_whiteouts import whiteout


def never() -> bool:
    return False


@pytest.fixture
def root(tmp_path: Path) -> Path:
    top = tmp_path / "project"
    (top / "out/sub").mkdir(parents=True)
    (top / "out/a.txt").write_text("a\n")
    (top / "out/sub/b.txt").write_text("b\n")
    (top / "keep.txt").write_text("k\n")
    (top / ".git/objects").mkdir(parents=True)
    (top / ".git/objects/x").write_text("x\n")
    return top


def changed(root: Path, base, rel: str, *, whole: bool = True) -> str | None:
    with open_dir(root) as fd:
        return base.changed(fd, rel, whole=whole)


def test_an_untouched_tree_is_as_the_base_recorded_it(root: Path) -> None:
    base = take(root, never)
    assert changed(root, base, "out") is None
    assert changed(root, base, "missing/new.txt") is None
    assert ".git" in base.stamps and ".git/objects" not in base.stamps  # not walked
    assert {rel for rel, _ in base.files()} == {"out/a.txt", "out/sub/b.txt", "keep.txt"}


@pytest.mark.parametrize(
    ("act", "first"),
    [
        (lambda r: (r / "out/sub/new.txt").write_text("n\n"), "out/sub"),
        (lambda r: (r / "out/sub/b.txt").unlink(), "out/sub"),
        (lambda r: (r / "out/sub/b.txt").write_text("bb\n"), "out/sub/b.txt"),
        (lambda r: (r / "out/sub/b.txt").chmod(0o600), "out/sub/b.txt"),
        (lambda r: (r / "out/sub").chmod(0o700), "out/sub"),
        (lambda r: (r / "out/sub/d").mkdir(), "out/sub"),
        (lambda r: shutil.rmtree(r / "out"), "out"),
    ],
)
def test_every_change_below_a_deleted_directory_is_found(root: Path, act, first: str) -> None:
    base = take(root, never)
    act(root)
    assert changed(root, base, "out") == first


def test_a_path_made_since_the_base_has_appeared(root: Path) -> None:
    base = take(root, never)
    (root / "new.txt").write_text("the user's\n")
    assert changed(root, base, "new.txt") == "new.txt"
    assert changed(root, base, "keep.txt") is None


def test_a_plain_directory_is_compared_without_its_listing(root: Path) -> None:
    base = take(root, never)
    (root / "out/other.txt").write_text("o\n")
    assert changed(root, base, "out", whole=False) is None
    assert changed(root, base, "out") == "out"


def test_a_directorys_xattrs_changed_since_the_base_are_found(root: Path) -> None:
    """A directory's ctime moves with every file made in it, so its attrs are recorded."""
    try:
        os.setxattr(root / "out/sub", "user.tag", b"v1")
    except OSError as exc:
        pytest.skip(f"this filesystem refuses user xattrs: {exc}")
    base = take(root, never)
    os.setxattr(root / "out/sub", "user.tag", b"the user's")
    assert changed(root, base, "out/sub", whole=False) == "out/sub"
    assert changed(root, base, "out") == "out/sub"
    os.setxattr(root / "out/sub", "user.tag", b"v1")
    assert changed(root, base, "out") is None


@pytest.fixture
def overlay(root: Path, tmp_path: Path):
    with Overlay.create(root, PathResolver(root), base_dir=tmp_path / "base") as ov:
        yield ov


def layer_of(overlay: Overlay) -> Path:
    layer = overlay.directory / "layer"
    layer.mkdir()
    return layer


def test_absorb_spoils_the_overlay_when_the_user_changed_what_the_command_deleted(
    root: Path, overlay: Overlay
) -> None:
    overlay.record_base(stop=never)
    layer = layer_of(overlay)
    whiteout(layer / "out")
    (root / "out/notes.txt").write_text("the user's\n")
    overlay.absorb(layer)
    assert [str(c) for c in overlay.check_conflicts()] == [f"out {BASE_CHANGED}"]
    with pytest.raises(ApplyConflict):
        overlay.apply()
    assert (root / "out/notes.txt").read_text() == "the user's\n"


def test_without_a_base_or_a_change_absorb_applies(root: Path, overlay: Overlay) -> None:
    overlay.record_base(stop=never)
    layer = layer_of(overlay)
    whiteout(layer / "out")
    overlay.absorb(layer)
    assert overlay.check_conflicts() == []
    overlay.apply()
    assert not (root / "out").exists()


@pytest.mark.parametrize("bits", [stat.S_ISUID | 0o755, stat.S_ISGID | 0o755])
def test_a_setuid_or_setgid_file_in_a_layer_is_refused(overlay: Overlay, bits: int) -> None:
    layer = layer_of(overlay)
    (layer / "tool").write_text("#!/bin/sh\n")
    os.chmod(layer / "tool", bits)
    with pytest.raises(OverlayEscape, match="setuid or setgid"):
        overlay.absorb(layer)
    assert not overlay.has_writes


def test_a_file_with_capabilities_in_a_layer_is_refused(overlay: Overlay) -> None:
    layer = layer_of(overlay)
    (layer / "tool").write_text("x\n")
    caps = bytes.fromhex("0000000200200000000000000000000000000000")  # v2: cap_net_raw
    try:
        os.setxattr(layer / "tool", "security.capability", caps)
    except OSError as exc:
        pytest.skip(f"cannot set a file capability here: {exc}")
    with pytest.raises(OverlayEscape, match="capabilities"):
        overlay.absorb(layer)
    assert not overlay.has_writes


def test_a_setgid_directory_is_refused_unless_inherited(root: Path, overlay: Overlay) -> None:
    layer = layer_of(overlay)
    (layer / "shared/inner").mkdir(parents=True)
    os.chmod(layer / "shared", 0o2775)
    os.chmod(layer / "shared/inner", 0o2775)  # inherited from shared/
    with pytest.raises(OverlayEscape, match="setgid directory"):
        overlay.absorb(layer)
    (root / "shared").mkdir()
    os.chmod(root / "shared", 0o2775)  # the user's own setgid directory, copied up
    overlay.absorb(layer)
    assert "shared/inner" in overlay.directories


def test_the_links_a_path_goes_through_are_named_by_their_targets(root: Path) -> None:
    (root / "v1").mkdir()
    (root / "current").symlink_to("v1")
    (root / "alias").symlink_to("current")
    found = {(p.rel, p.link) for p in links_on(root, root / "alias/conf.txt")}
    assert found == {("alias", "current"), ("current", "v1")}
    assert links_on(root, root / "keep.txt") == []
