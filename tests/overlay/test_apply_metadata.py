"""Apply leaves metadata as a real run would: directory modes, the user's xattrs and ACLs,
hard links and holes kept; setuid/setgid bits and file capabilities never applied."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import pytest

from qshell.overlay import ApplyConflict, Overlay, journal
from qshell.overlay.journal import JOURNAL_NAME, recover_journal
from qshell.overlay.records import CAPABILITY, SET_ID
from qshell.tools.paths import PathResolver
from tests.overlay.test_apply import Crash, crash_before_the_commit_point, no_litter


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    (root / "secrets").mkdir(parents=True)
    (root / "secrets" / "key.txt").write_text("key v1\n")
    (root / "notes.txt").write_text("notes v1\n")
    return root


@pytest.fixture
def overlay(project: Path, tmp_path: Path):
    with Overlay.create(project, PathResolver(project), base_dir=tmp_path / "base") as ov:
        yield ov


def mode_of(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def xattrs_work(tmp_path: Path) -> bool:
    probe = tmp_path / "probe"
    probe.write_text("x")
    try:
        os.setxattr(probe, "user.probe", b"1")
    except OSError:
        return False
    return True


# --- directory modes ---------------------------------------------------------------------------


def test_a_directory_the_speculation_made_gets_its_upper_mode(overlay, project):
    overlay.view.write_bytes(project / "private" / "token", b"t\n")
    os.chmod(overlay.upper / "private", 0o700)  # as `mkdir -m 700 private` leaves it
    overlay.apply()
    assert mode_of(project / "private") == 0o700
    assert (project / "private" / "token").read_bytes() == b"t\n"


def test_an_existing_directory_a_command_chmodded_gets_that_mode(overlay, project):
    os.chmod(project / "secrets", 0o755)
    layer = overlay.directory / "layer"
    (layer / "secrets").mkdir(parents=True)
    os.chmod(layer / "secrets", 0o700)  # overlayfs copied it up with the new mode
    overlay.absorb(layer)
    assert overlay.check_conflicts() == []
    overlay.apply()
    assert mode_of(project / "secrets") == 0o700


def test_a_tool_write_in_a_private_directory_keeps_its_mode(overlay, project):
    os.chmod(project / "secrets", 0o700)
    overlay.view.write_bytes(project / "secrets" / "key.txt", b"key v2\n")
    overlay.apply()
    assert mode_of(project / "secrets") == 0o700
    assert (project / "secrets" / "key.txt").read_bytes() == b"key v2\n"


def test_a_rolled_back_apply_puts_a_directory_mode_back(overlay, project, monkeypatch):
    os.chmod(project / "secrets", 0o755)
    overlay.view.write_bytes(project / "notes.txt", b"notes v2\n")
    overlay.view.write_bytes(project / "secrets" / "key.txt", b"key v2\n")
    os.chmod(overlay.upper / "secrets", 0o700)
    crash_before_the_commit_point(monkeypatch)
    monkeypatch.setattr(journal, "_abort", lambda *args: None)
    with pytest.raises(Crash):
        overlay.apply()
    monkeypatch.undo()
    assert mode_of(project / "secrets") == 0o700
    recover_journal(overlay.directory / JOURNAL_NAME)
    assert mode_of(project / "secrets") == 0o755
    assert (project / "secrets" / "key.txt").read_text() == "key v1\n"
    assert no_litter(project)


# --- setuid, setgid, capabilities ----------------------------------------------------------------


def test_a_setuid_file_is_never_applied(overlay, project):
    overlay.view.write_bytes(project / "tool", b"#!/bin/sh\n")
    os.chmod(overlay.upper / "tool", 0o4755)
    assert [c.reason for c in overlay.check_conflicts()] == [SET_ID]
    with pytest.raises(ApplyConflict):
        overlay.apply()
    assert not (project / "tool").exists()


def test_a_setgid_bit_on_an_edited_file_is_never_applied(overlay, project):
    overlay.view.write_bytes(project / "notes.txt", b"notes v2\n")
    os.chmod(overlay.upper / "notes.txt", 0o2755)
    with pytest.raises(ApplyConflict) as caught:
        overlay.apply()
    assert caught.value.conflicts[0].reason == SET_ID
    assert (project / "notes.txt").read_text() == "notes v1\n"


def test_a_setgid_directory_is_never_applied(overlay, project):
    overlay.view.write_bytes(project / "shared" / "f", b"f\n")
    os.chmod(overlay.upper / "shared", 0o2775)
    assert [c.reason for c in overlay.check_conflicts()] == [SET_ID]


def test_a_setgid_bit_a_new_directory_inherits_is_kept(overlay, project):
    os.chmod(project / "secrets", 0o2755)
    overlay.view.write_bytes(project / "secrets" / "sub" / "f", b"f\n")
    overlay.apply()
    assert mode_of(project / "secrets" / "sub") & stat.S_ISGID


def test_file_capabilities_are_never_applied(overlay, project):
    overlay.view.write_bytes(project / "ping", b"\x7fELF")
    try:
        subprocess.run(
            ["setcap", "cap_net_raw+ep", str(overlay.upper / "ping")],
            check=True,
            capture_output=True,
        )
    except (OSError, subprocess.CalledProcessError):
        capability = bytes.fromhex("0100000201000000000000000000000000000000")  # v2, one cap
        try:
            os.setxattr(overlay.upper / "ping", "security.capability", capability)
        except OSError:
            pytest.skip("this filesystem or user cannot set file capabilities")
    assert [c.reason for c in overlay.check_conflicts()] == [CAPABILITY]


# --- xattrs and ACLs -----------------------------------------------------------------------------


def test_the_users_xattrs_and_acl_on_an_edited_file_are_kept(overlay, project, tmp_path):
    if not xattrs_work(tmp_path):
        pytest.skip("this filesystem refuses xattrs")
    target = project / "notes.txt"
    subprocess.run(["setfattr", "-n", "user.origin", "-v", "mine", str(target)], check=True)
    acl = subprocess.run(["setfacl", "-m", "u:nobody:r", str(target)], capture_output=True)
    overlay.view.write_bytes(target, b"notes v2\n")
    overlay.apply()
    assert target.read_text() == "notes v2\n"
    assert os.getxattr(target, "user.origin") == b"mine"
    if acl.returncode == 0:
        shown = subprocess.run(["getfacl", "-c", str(target)], capture_output=True, text=True)
        assert "user:nobody:r--" in shown.stdout


# --- hard links and holes --------------------------------------------------------------------------


def test_a_file_the_user_hard_linked_meanwhile_is_edited_in_place(overlay, project, tmp_path):
    """A speculation never writes a file with other links (HardLinked, test_hard_links.py);
    one the user links after the write keeps the link, as the live write would have."""
    overlay.view.write_bytes(project / "notes.txt", b"notes v2\n")
    outside = tmp_path / "outside.txt"
    os.link(project / "notes.txt", outside)
    inode = os.stat(outside).st_ino
    overlay.apply()
    assert os.stat(project / "notes.txt").st_ino == inode
    assert outside.read_text() == "notes v2\n"
    assert no_litter(project)


def test_a_crashed_in_place_edit_is_rolled_back_into_the_same_inode(
    overlay, project, tmp_path, monkeypatch
):
    overlay.view.write_bytes(project / "notes.txt", b"notes v2\n")
    overlay.view.write_bytes(project / "new.txt", b"new\n")
    outside = tmp_path / "outside.txt"
    os.link(project / "notes.txt", outside)  # the user, meanwhile
    crash_before_the_commit_point(monkeypatch)
    monkeypatch.setattr(journal, "_abort", lambda *args: None)
    with pytest.raises(Crash):
        overlay.apply()
    monkeypatch.undo()
    assert outside.read_text() == "notes v2\n"
    recovery = recover_journal(overlay.directory / JOURNAL_NAME)
    assert recovery is not None and recovery.direction == "rolled back"
    assert outside.read_text() == "notes v1\n"
    assert os.stat(outside).st_ino == os.stat(project / "notes.txt").st_ino
    assert not (project / "new.txt").exists()
    assert no_litter(project)


def test_a_sparse_file_is_staged_sparse(overlay, project):
    size = 64 << 20
    overlay.view.write_bytes(project / "disk.img", b"")
    with open(overlay.upper / "disk.img", "r+b") as out:
        out.truncate(size)
        out.seek(size - 5)
        out.write(b"tail\n")
    if os.stat(overlay.upper / "disk.img").st_blocks * 512 >= size:
        pytest.skip("this filesystem does not keep holes")
    overlay.apply()
    applied = os.stat(project / "disk.img")
    assert applied.st_size == size
    assert applied.st_blocks * 512 < size // 4
    with open(project / "disk.img", "rb") as source:
        source.seek(size - 5)
        assert source.read() == b"tail\n"


def test_a_chmod_the_user_makes_after_a_write_in_that_directory_is_kept(overlay, project):
    os.chmod(project / "secrets", 0o755)
    overlay.view.write_bytes(project / "secrets" / "key.txt", b"key v2\n")
    os.chmod(project / "secrets", 0o700)  # the user, while the speculation waits
    overlay.apply()
    assert mode_of(project / "secrets") == 0o700
