"""Accept lands a speculated command's metadata as a real run leaves it, through the REPL
(pexpect, scripted server), in default and auto-edit mode — where such a command asks on
accept, and the user answers `a`.

`chmod 700` of a directory the command made, or of one that was there, lands as 0700; a
`chmod u+s` is never applied from the speculation — it is a boundary, asked about live,
and the bit is set only when the user lets it run; the user's xattrs and ACL on an edited
file stay, xattrs a command sets on a directory or removes from it are listed ("attributes
changed") and land, an edit of a file with a second hard link (in the project or outside it) is a
boundary, asked about live, whose live run keeps the link, and a sparse file stays sparse. Output under an ignored path
(`build/`) is listed and applied, or with `sandbox.applyIgnored` off left out and said to
be. Skipped with the probe's reason where a user-namespace overlay cannot be mounted.
"""

from __future__ import annotations

import errno
import os
import re
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from qshell.followup.overlay_run import NOT_APPLIED
from qshell.sandbox import probe
from tests.e2e.accepting import (
    MODES,
    apply_on_accept,
    asked_live,
    finished,
    quit_repl,
    speculating,
)
from tests.e2e.pty import Term

FOUND = probe()
pytestmark = pytest.mark.skipif(not FOUND.overlay, reason=FOUND.reason or "no overlay sandbox")
APPEND = "echo more >> f.txt && echo appended"
SPARSE_BYTES = 16 * 1024 * 1024


@pytest.fixture(params=list(MODES))
def mode(request: pytest.FixtureRequest) -> tuple[str, ...]:
    return MODES[request.param]


ACL = "system.posix_acl_access"


def _acl(path: Path) -> bytes | None:
    """Give `path` an ACL entry for `nobody` and return the ACL; None where setfacl or ACLs
    are missing (the xattr alone is then checked)."""
    if shutil.which("setfacl") is None or shutil.which("getfacl") is None:
        return None
    done = subprocess.run(["setfacl", "-m", "u:nobody:r", str(path)], capture_output=True)
    return os.getxattr(path, ACL) if done.returncode == 0 else None


def mode_of(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def edited(
    llm_server, project: Path, mode: tuple[str, ...], command: str, marker: str, *listed: str
) -> Term:
    """Speculate `command` (its output holding `marker`), accept it, check the question
    lists `listed`, answer `a`, and quit; what the terminal showed."""
    child, answer, _ = speculating(llm_server, project, command, marker, *mode)
    finished(llm_server, child, answer)
    apply_on_accept(child, *listed)
    quit_repl(child)
    return child


def test_chmod_700_of_a_new_and_an_existing_directory_lands_as_0700(llm_server, project, mode):
    (project / "keys").mkdir(mode=0o755)
    os.chmod(project / "keys", 0o755)
    command = "mkdir secrets && chmod 700 secrets keys && echo locked-up"
    edited(
        llm_server,
        project,
        mode,
        command,
        "locked-up",
        r"m keys/ \(permissions changed\)",
        r"\+ secrets/",
    )
    assert mode_of(project / "secrets") == 0o700
    assert mode_of(project / "keys") == 0o700


@pytest.mark.parametrize("answer", ["n", "y"])
def test_a_speculated_setuid_bit_is_asked_live_and_set_only_when_allowed(
    llm_server, project, mode, answer
):
    tool = project / "tool"
    tool.write_text("#!/bin/sh\necho tool\n")
    os.chmod(tool, 0o755)
    asked_live(llm_server, project, mode, "chmod u+s tool && echo set-it", "set-it", answer)
    assert mode_of(tool) == (0o4755 if answer == "y" else 0o755)


def test_the_users_xattr_and_acl_on_an_edited_file_stay(llm_server, project, mode):
    target = project / "f.txt"
    target.write_text("a line\n")
    try:
        os.setxattr(target, "user.note", b"keep")
    except OSError as exc:
        if exc.errno in (errno.ENOTSUP, errno.EOPNOTSUPP):
            pytest.skip(f"no user xattrs on this filesystem: {exc}")
        raise
    acl = _acl(target)
    edited(llm_server, project, mode, APPEND, "appended", r"~ f.txt")
    assert target.read_text() == "a line\nmore\n"
    assert os.getxattr(target, "user.note") == b"keep"
    if acl is not None:
        assert os.getxattr(target, ACL) == acl
        shown = subprocess.run(["getfacl", "-c", str(target)], capture_output=True, text=True)
        assert "user:nobody:r--" in shown.stdout


@pytest.mark.skipif(shutil.which("setfattr") is None, reason="no setfattr here")
def test_xattrs_a_command_sets_and_removes_on_a_directory_are_listed_and_land(
    llm_server, project, mode
):
    keys = project / "keys"
    keys.mkdir()
    try:
        os.setxattr(keys, "user.old", b"drop me")
    except OSError as exc:
        if exc.errno in (errno.ENOTSUP, errno.EOPNOTSUPP):
            pytest.skip(f"no user xattrs on this filesystem: {exc}")
        raise
    command = "setfattr -n user.note -v kept keys && setfattr -x user.old keys && echo tagged"
    edited(llm_server, project, mode, command, "tagged", r"m keys/ \(attributes changed\)")
    assert os.getxattr(keys, "user.note") == b"kept"
    assert "user.old" not in os.listxattr(keys)


@pytest.mark.parametrize("inside", [True, False])
def test_an_edit_of_a_hard_linked_file_is_asked_live_and_keeps_the_link(
    llm_server, project, mode, tmp_path, inside
):
    """The overlay's copy-up would break the link (a later read of the other name would
    see the old content): the speculation stops at the edit, and the live run keeps it."""
    target = project / "f.txt"
    target.write_text("a line\n")
    other = project / "hard-f.txt" if inside else tmp_path / "outside.txt"
    os.link(target, other)
    inode = os.stat(target).st_ino
    asked_live(llm_server, project, mode, APPEND, "appended", "y")
    assert target.read_text() == other.read_text() == "a line\nmore\n"
    assert os.stat(target).st_ino == os.stat(other).st_ino == inode
    assert os.stat(target).st_nlink == 2


def test_a_sparse_file_stays_sparse(llm_server, project, mode):
    target = project / "f.txt"
    with target.open("wb") as out:
        out.write(b"head\n")
        out.truncate(SPARSE_BYTES)
    if os.stat(target).st_blocks * 512 >= SPARSE_BYTES // 2:
        pytest.skip("this filesystem does not keep holes")
    edited(llm_server, project, mode, APPEND, "appended", r"~ f.txt")
    info = os.stat(target)
    assert info.st_size == SPARSE_BYTES + len(b"more\n")
    assert info.st_blocks * 512 < SPARSE_BYTES // 2  # holes kept, not written out as zeros
    with target.open("rb") as read:
        assert read.read(5) == b"head\n"
        read.seek(SPARSE_BYTES)
        assert read.read() == b"more\n"


BUILD = "mkdir -p build && echo built > build/out.txt && echo done-building"


@pytest.fixture
def git_project(project: Path) -> Path:
    """`project` as a git repository that ignores `build/`."""
    if shutil.which("git") is None:
        pytest.skip("no git")
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    (project / ".gitignore").write_text("build/\n")
    return project


def test_output_under_an_ignored_path_is_listed_and_applied(llm_server, git_project, mode):
    child = edited(llm_server, git_project, mode, BUILD, "done-building", r"\+ build/out.txt")
    assert (git_project / "build/out.txt").read_text() == "built\n"
    assert NOT_APPLIED not in child.text


def test_with_apply_ignored_off_the_answer_says_it_was_not_applied(llm_server, git_project, mode):
    env = {"QSHELL_SANDBOX__APPLY_IGNORED": "false"}
    child, answer, _ = speculating(llm_server, git_project, BUILD, "done-building", *mode, env=env)
    finished(llm_server, child, answer)
    apply_on_accept(child, "It changed no file of the project")
    quit_repl(child)
    note = re.escape(f"[{NOT_APPLIED}: ") + r"[^\]]*\bbuild/out\.txt\b"
    assert re.search(note, child.text), child.text  # what the user reads...
    assert any(re.search(note, r.all_text) for r in llm_server.requests)  # ...and the model
    assert not (git_project / "build").exists()
