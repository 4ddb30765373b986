"""Attacks on accept (issue 25): sequences after which the accepted speculation left the tree
otherwise than a live run of the same calls, or lost the user's change.

Each test runs its calls LIVE with real bash in one copy of a starting tree and SPECULATED in
another — `run_on_overlay` on the real kernel overlay, then `Overlay.apply()` as accept does
(test_accept_differential.py's rig and `speculate`) — and compares the two with metadata
(differential.py's snapshots: entry types, bytes, modes, xattrs and ACLs, links). A call the
product refuses (RunRefused: the boundary, the call then runs live) or a reported conflict
(the prompt then runs live) is a right answer; a tree other than the live one is not. The
ones marked xfail are breaks found and not fixed (the reason names the cause); the others
guard those fixed: a project with a file system mounted inside it, where no overlay can be
mounted and the mount's failure stood as the command's output, a chmod the user made of a
directory after a command chmodded it, which accept put back, an xattr (or ACL) a command
removed from a file, which came back, or set on a directory, which was dropped
(test_accept_attrs.py has more of those), a write beside the project that vanished with
the jail's tmpfs, and output derived from a masked secret (test_accept_outside.py has more
of those two). Skipped with the probe's reason where a
user-namespace overlay cannot be mounted.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.followup import test_accept_differential as differential_test
from tests.followup.differential import (
    Start,
    UserEdit,
    build,
    differences,
    expected_trees,
    snapshot,
)
from tests.followup.test_accept_differential import Rig, Speculated, speculate

pytestmark = differential_test.pytestmark
rig = differential_test.rig  # the session, jail and scratch every test here runs in

TAGGED = Start((("b", b"b\n", 0o644),), dirs=(("d", 0o755),), xattrs=("b",))


def like_live(rig: Rig, start: Start, calls: list[str], edit: UserEdit | None = None) -> Speculated:
    """The speculated, accepted `calls` leave `rig.root` as live bash leaves a copy of
    `start` (strictly: xattrs and ACLs included) — up to a refused call, which runs live —,
    or met a conflict and left the tree untouched. How the speculation ended."""
    build(rig.root, start)
    outcome = speculate(rig, calls, edit)
    found = snapshot(rig.root)
    if outcome.conflict is not None:
        kept = differences(outcome.before_apply, found)
        assert not kept, f"a conflict ({outcome.conflict}) still changed:\n" + "\n".join(kept)
        return outcome
    want = expected_trees(rig.scratch, start, outcome.ran, edit).applied["the live run"]
    wrong = differences(want, found)
    assert not wrong, "accepted, it differs from the live run:\n" + "\n".join(wrong)
    return outcome


def _python(code: str) -> str:
    return f'python3 -c "{code}"'


def _can_mount(where: Path) -> bool:
    done = subprocess.run(["mount", "-t", "tmpfs", "none", str(where)], capture_output=True)
    return done.returncode == 0


def test_a_project_with_a_file_system_mounted_inside_runs_the_command_live(rig: Rig) -> None:
    """Fixed: the overlay cannot be mounted over a project holding a mount (`failed to clone
    lowerpath`); the mount's `wrong fs type` and exit 32 were taken in as the command's
    output, and accept showed an answer built on them."""
    build(rig.root, Start((("a", b"a\n", 0o644),)))
    data = rig.root / "data"
    data.mkdir()
    if not _can_mount(data):
        pytest.skip("this user cannot mount a file system (a devcontainer's volume does)")
    try:
        (data / "input.csv").write_text("1,2\n")
        outcome = speculate(rig, ["cp data/input.csv out.csv"], None)
    finally:
        subprocess.run(["umount", str(data)], check=True)
    assert outcome.refused is not None and "mounted" in outcome.refused, outcome
    assert not (rig.root / "out.csv").exists()


def test_a_users_chmod_of_a_directory_a_command_chmodded_is_kept(rig: Rig) -> None:
    """Fixed: the user's `chmod 700 d` after a speculated `chmod 711 d` ended was put back
    to 0711 on accept (the plan took the directory's mode at accept as the one to replace)."""
    start = Start((("d/c", b"c\n", 0o644),), dirs=(("d", 0o750),))
    build(rig.root, start)
    outcome = speculate(rig, ["chmod 711 d"], UserEdit("chmod", "d", 1, before=False))
    assert outcome.conflict is not None and "d" in outcome.conflict, outcome
    assert (rig.root / "d").stat().st_mode & 0o777 == 0o700


def test_an_xattr_the_command_removed_stays_removed(rig: Rig) -> None:
    like_live(rig, TAGGED, [_python("import os; os.removexattr('b', 'user.qshell.test')")])


def test_an_xattr_the_command_set_on_a_directory_is_applied(rig: Rig) -> None:
    like_live(rig, TAGGED, [_python("import os; os.setxattr('d', 'user.qshell.test', b'v')")])


@pytest.mark.skipif(shutil.which("setfacl") is None, reason="no setfacl here")
def test_a_default_acl_the_command_set_on_a_directory_is_applied(rig: Rig) -> None:
    owner = os.getuid()
    like_live(rig, TAGGED, [f"setfacl -d -m u:{owner}:r d"])


def test_a_file_the_command_writes_beside_the_project_is_not_lost(rig: Rig) -> None:
    start = Start((("a", b"a\n", 0o644),))
    call = 'echo made > "../$(basename "$PWD").made"'
    build(rig.root, start)
    outcome = speculate(rig, [call], None)
    beside = rig.root.parent / f"{rig.root.name}.made"
    assert outcome.refused is not None or beside.exists(), "the answer says done: nothing is"


def test_output_a_command_derives_from_a_secret_file_is_what_live_writes(rig: Rig) -> None:
    start = Start(((".env", b"KEY=secret\n", 0o644),))
    like_live(rig, start, ["sed 's/=.*/=/' .env > env.template"])


def test_a_directory_renamed_with_rename2_is_renamed(rig: Rig) -> None:
    """A userxattr overlay has no redirect_dir: rename(2) of a real directory fails with
    EXDEV in the speculation, where a live run renames it; the failure it prints makes the
    call run live."""
    start = Start((("d/c", b"c\n", 0o644),))
    like_live(rig, start, [_python("import os; os.rename('d', 'd2')")])
