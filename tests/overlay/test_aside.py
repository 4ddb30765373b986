"""Setting aside a recovery's earlier version of a file the user edited since the crash:
moved out of the project by a rename, or — where the state directory is on another file
system — by a copy (holes kept) and an unlink; a name that is not a regular file stays."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from qshell.overlay import aside
from qshell.overlay.aside import set_aside


def earlier(root: Path) -> tuple[str, str]:
    (root / "src").mkdir(parents=True)
    (root / "src" / "app.py").write_text("edited after the crash\n")
    with (root / "src" / ".qshell-backup-x-0").open("wb") as out:
        out.write(b"app v1\n")
        out.truncate(4 * 1024 * 1024)  # a hole after the first line
    return "src/app.py", "src/.qshell-backup-x-0"


@pytest.mark.parametrize("across", [False, True], ids=["rename", "copy"])
def test_the_earlier_version_leaves_the_project_whole(tmp_path, monkeypatch, across):
    root = tmp_path / "proj"
    pair = earlier(root)
    if across:
        real_rename = os.rename

        def other_file_system(src, dst, **kwargs):
            if kwargs.get("src_dir_fd") is not None:
                raise OSError(errno.EXDEV, "Invalid cross-device link")
            return real_rename(src, dst, **kwargs)

        monkeypatch.setattr(os, "rename", other_file_system)
    found = set_aside(root, [pair], tmp_path / "state")
    assert found.moved == ("src/app.py",) and found.stayed == ()
    assert found.folder is not None
    kept = found.folder / "src" / "app.py"
    with kept.open("rb") as read:
        assert read.read(7) == b"app v1\n"
    assert kept.stat().st_size == 4 * 1024 * 1024
    assert not (root / pair[1]).exists()
    assert (root / "src" / "app.py").read_text() == "edited after the crash\n"


def test_a_name_that_is_not_a_regular_file_stays_and_is_named(tmp_path):
    root = tmp_path / "proj"
    (root / "src").mkdir(parents=True)
    os.symlink("/etc/hostname", root / "src" / ".qshell-backup-x-0")
    found = set_aside(root, [("src/app.py", "src/.qshell-backup-x-0")], tmp_path / "state")
    assert found == aside.SetAside(None, (), ("src/.qshell-backup-x-0",))
    assert (root / "src" / ".qshell-backup-x-0").is_symlink()
