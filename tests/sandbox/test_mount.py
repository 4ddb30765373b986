"""OverlayMount: a command run on a kernel overlay writes its upper layer, never the lower
one (tried for real, skipped with the probe's reason where it cannot mount), and paths that
overlayfs options cannot name are refused."""

from __future__ import annotations

import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from qshell.sandbox import OverlayMount, SandboxUnavailable, probe

FOUND = probe(None)


def mount_for(tmp_path: Path, lower: Path) -> OverlayMount:
    unshare, mount = shutil.which("unshare"), shutil.which("mount")
    assert unshare is not None and mount is not None
    scratch = tmp_path / "scratch"
    upper = tmp_path / "upper"
    upper.mkdir()
    return OverlayMount(unshare, mount, lower, upper, scratch / "work", scratch / "merged")


def test_paths_overlayfs_options_cannot_name_are_refused(tmp_path):
    lower = tmp_path / "a,b"
    lower.mkdir()
    with pytest.raises(SandboxUnavailable, match="mount options"):
        mount_for(tmp_path, lower).argv(["true"])


@pytest.mark.skipif(not FOUND.overlay, reason=FOUND.reason or "no overlay here")
def test_writes_and_deletions_land_in_the_upper_layer_only(tmp_path):
    lower = tmp_path / "project"
    (lower / "d").mkdir(parents=True)
    (lower / "a.txt").write_text("a\n")
    (lower / "d" / "b.txt").write_text("b\n")
    where = mount_for(tmp_path, lower)
    where.prepare()
    script = 'cd "$0" && echo x >> a.txt && rm -rf d && mkdir d && echo n > new.txt'
    done = subprocess.run(where.argv(["sh", "-c", script, str(where.merged)]), check=False)
    where.clean()
    assert done.returncode == 0
    assert (lower / "a.txt").read_text() == "a\n"
    assert (lower / "d" / "b.txt").read_text() == "b\n"
    assert not (lower / "new.txt").exists()
    assert (where.upper / "a.txt").read_text() == "a\nx\n"
    assert (where.upper / "new.txt").read_text() == "n\n"
    assert stat.S_ISDIR((where.upper / "d").lstat().st_mode)
    assert not where.work.exists()
