"""The view of /etc a speculated command sees (sysview.py): its secrets hidden by one read-only
overlay rather than one bind each. Built on a throwaway directory as a user's /etc (the
layer's files, modes and reuse), and tried for real on this machine's /etc through the
speculated command's jail (outside.py's `speculated`): every system secret this user can
read fails to open or lists empty inside, as a bind mask does, and the rest of /etc reads
as it does outside. Skipped with the probe's reason where that view cannot be mounted."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from qshell.sandbox import probe
from qshell.sandbox.jail import ETC, system_secrets
from qshell.sandbox.outside import OPAQUE_XATTR
from qshell.sandbox.sysview import furnish, hideable, submounts
from tests.sandbox.test_masked_names import launcher_for
from tests.sandbox.test_outside import speculated

FOUND = probe(None)


def fake_etc(tmp_path: Path) -> Path:
    top = tmp_path / "etc"
    (top / "ssl" / "private").mkdir(parents=True)
    (top / "ssl" / "private" / "key.pem").write_text("PRIVATE\n")
    (top / "ssl").chmod(0o751)
    (top / "shadow").write_text("root:$6$hash\n")
    (top / "hostname").write_text("box\n")
    return top


def test_the_layer_holds_a_closed_empty_file_or_an_empty_opaque_directory_per_secret(tmp_path):
    top = fake_etc(tmp_path)
    layer = tmp_path / "layer"
    furnish(layer, [top / "shadow", top / "ssl" / "private"], top)
    shadow = layer / "shadow"
    assert shadow.read_bytes() == b"" and stat.S_IMODE(shadow.stat().st_mode) == 0
    private = layer / "ssl" / "private"
    assert os.listdir(private) == []
    assert os.getxattr(private, OPAQUE_XATTR) == b"y"
    assert stat.S_IMODE((layer / "ssl").stat().st_mode) == 0o751  # as the one it shows
    assert not (layer / "hostname").exists()
    assert stat.S_IMODE(layer.stat().st_mode) == stat.S_IMODE(top.stat().st_mode)


def test_the_layer_is_kept_while_the_secrets_are_the_same_and_made_again_when_not(tmp_path):
    top = fake_etc(tmp_path)
    layer = tmp_path / "layer"
    furnish(layer, [top / "shadow"], top)
    made = (layer / "shadow").stat().st_ino
    furnish(layer, [top / "shadow"], top)
    assert (layer / "shadow").stat().st_ino == made
    (top / "gshadow").write_text("root:!::\n")
    furnish(layer, [top / "shadow", top / "gshadow"], top)
    assert (layer / "gshadow").exists()
    furnish(layer, [top / "gshadow"], top)
    assert not (layer / "shadow").exists()


def test_secrets_below_a_file_system_mounted_in_etc_are_left_to_a_bind(tmp_path):
    table = tmp_path / "mountinfo"
    table.write_text(
        "22 1 8:1 / / rw - ext4 /dev/sda1 rw\n"
        "30 22 8:1 /hosts /etc/hosts rw - ext4 /dev/sda1 rw\n"
        "31 22 0:5 / /etc/my\\040secrets rw - tmpfs tmpfs rw\n"
        "32 31 0:6 / /etc/my\\040secrets/inner rw - tmpfs tmpfs rw\n"
        "33 22 0:7 / /etcetera rw - tmpfs tmpfs rw\n"
    )
    mounts = submounts(ETC, table)
    assert mounts == (Path("/etc/hosts"), Path("/etc/my secrets"))
    secrets = [Path("/etc/shadow"), Path("/etc/my secrets/key"), Path("/usr/etc/npmrc")]
    assert hideable(secrets, mounts) == (Path("/etc/shadow"),)


@pytest.mark.skipif(not (FOUND.overlay and FOUND.etc_view), reason=FOUND.reason or "no view")
def test_a_speculated_command_meets_every_system_secret_hidden_and_the_rest_of_etc_as_it_is(
    tmp_path,
):
    project = tmp_path / "proj"
    project.mkdir()
    (project / "a.txt").write_text("a\n")
    readable = [p for p in system_secrets() if p.is_relative_to(ETC)]
    steps = [
        f'echo "$(ls -A {p} | wc -l) in {p}"' if p.is_dir() else f"cat {p} > /dev/null"
        for p in readable
    ]
    command = "; ".join([*steps, "cat /etc/passwd", "true"])
    launcher = launcher_for(project, dict(os.environ))
    on_view = launcher.on_overlay((), tmp_path / "scratch").mount
    assert on_view is not None and on_view.etc_merged is not None  # no bind masks them
    out, _, _ = speculated(launcher, command, tmp_path / "scratch")
    for path in readable:
        shown = f"0 in {path}" if path.is_dir() else f"{path}: Permission denied"
        assert shown in out, out
    assert Path("/etc/passwd").read_text() in out
