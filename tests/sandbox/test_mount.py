"""OverlayMount: a command run on a kernel overlay writes its upper layer, never the lower
one (tried for real, skipped with the probe's reason where it cannot mount), and its mount
options name no host path (they are what /proc/self/mountinfo shows), so a layer may be
any path, one with a comma or a colon too."""

from __future__ import annotations

import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from qshell.sandbox import OverlayMount, probe

FOUND = probe(None)


# each overlay mounted by a `mount` of its own, or all by one `mount -a` of a table
# (where this machine's mount reads one); the scratch directory's name has what the
# table must escape
WAYS = [False, *([True] if FOUND.by_table else [])]


def mount_for(tmp_path: Path, lower: Path, by_table: bool = False) -> OverlayMount:
    unshare, mount = shutil.which("unshare"), shutil.which("mount")
    assert unshare is not None and mount is not None
    scratch = tmp_path / "scr atch\t#\\x"
    upper = tmp_path / "upper"
    upper.mkdir()
    work, merged = scratch / "work", scratch / "merged"
    return OverlayMount(unshare, mount, lower, upper, work, merged, by_table=by_table)


@pytest.mark.skipif(not FOUND.overlay, reason=FOUND.reason or "no overlay here")
@pytest.mark.parametrize("by_table", WAYS)
def test_the_mount_options_name_no_host_path_and_any_path_can_be_a_layer(tmp_path, by_table):
    lower = tmp_path / "a,b:c"
    lower.mkdir()
    (lower / "a.txt").write_text("a\n")
    where = mount_for(tmp_path, lower, by_table)
    where.prepare()
    shown = "grep ' overlay ' /proc/self/mountinfo; cat \"$0/a.txt\""
    done = subprocess.run(
        where.argv(["sh", "-c", shown, str(where.merged)]), capture_output=True, text=True
    )
    where.clean()
    assert done.returncode == 0, done.stderr
    assert "lowerdir=lower,upperdir=upper,workdir=work" in done.stdout
    assert done.stdout.endswith("a\n")
    for path in (lower, where.upper, where.work, where.names):
        assert str(path) not in done.stdout.replace(str(where.merged), "")


@pytest.mark.skipif(not FOUND.overlay, reason=FOUND.reason or "no overlay here")
@pytest.mark.parametrize("by_table", WAYS)
def test_writes_and_deletions_land_in_the_upper_layer_only(tmp_path, by_table):
    lower = tmp_path / "project"
    (lower / "d").mkdir(parents=True)
    (lower / "a.txt").write_text("a\n")
    (lower / "d" / "b.txt").write_text("b\n")
    where = mount_for(tmp_path, lower, by_table)
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
