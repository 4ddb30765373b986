"""A speculated command's edges, tried for real: what it writes outside the project is seen
(outside.py: the emptied directories shown from an overlay of a skeleton, walked after the
command), sorted into temporary files directly in /tmp and lasting writes, and never seen
by the next command; and the project's secrets are stand-ins (standins.py) that show a read
by a computed name, hold no secret and leave nothing behind when untouched. Skipped with the
probe's reason where a user-namespace overlay cannot be mounted."""

from __future__ import annotations

import os
import secrets
import stat
import subprocess
from pathlib import Path

import pytest

from qshell.permissions.confine import JailLauncher
from qshell.sandbox import private_dirs, probe
from qshell.sandbox.jail import SYSTEM_DATA, symlinks_in
from qshell.sandbox.outside import Writes, remove_tree
from qshell.sandbox.standins import StandIns, atime_kept, plant
from tests.sandbox.test_masked_names import launcher_for

FOUND = probe(None)
pytestmark = pytest.mark.skipif(not FOUND.overlay, reason=FOUND.reason or "no overlay here")
SECRET = "KEY=s3cr3t-value-0451"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    (root / "src").mkdir(parents=True)
    (root / "src" / "app.py").write_text("print('hi')\n")
    (root / ".env").write_text(SECRET + "\n")
    return root


def speculated(
    launcher: JailLauncher, command: str, scratch: Path, environ: dict[str, str] | None = None
) -> tuple[str, Writes, StandIns]:
    """`command` run as run_on_overlay runs it (stand-ins planted, the outside view on):
    its output, what it wrote outside the project, the stand-ins after it."""
    jailed = launcher.on_overlay((), scratch)
    assert jailed.mount is not None
    remove_tree(jailed.mount.upper)
    jailed.mount.prepare()
    planted = plant(jailed.mount.upper, launcher.paths.root, launcher.masked())
    jailed = jailed.hiding(planted.paths)
    assert jailed.mount is not None
    env = environ or dict(os.environ)
    argv, inside = jailed.wrap(["bash", "-c", command], env)
    try:
        done = subprocess.run(argv, env=inside, cwd=launcher.paths.root, capture_output=True)
    finally:
        jailed.mount.clean()
    written = jailed.mount.writes(caches=(launcher.paths.home / ".cache",))
    assert written is not None
    return (done.stdout + done.stderr).decode("utf-8", "replace"), written, planted


def test_writes_outside_the_project_are_seen_and_only_tmp_and_the_cache_are_temporary(
    project, tmp_path
):
    launcher = launcher_for(project, dict(os.environ))
    home = launcher.paths.home
    command = (
        "mkdir /tmp/work && echo t > /tmp/work/f && echo h > ~/h && echo r > /run/r"
        " && echo p > ../beside && echo i > inside && mkdir -p ~/.cache/tool"
        " && echo c > ~/.cache/tool/c && echo ok"
    )
    out, written, _ = speculated(launcher, command, tmp_path / "scratch")
    assert "ok" in out, out
    assert sorted(written.temporary) == sorted([str(home / ".cache"), "/tmp/work"])
    assert {str(home / "h"), "/run/r", str(project.parent / "beside")} <= set(written.lasting)
    assert not any("inside" in path for path in written.lasting + written.temporary)
    assert not (home / "h").exists() and not (project.parent / "beside").exists()


def test_what_a_command_makes_or_removes_at_the_top_of_the_file_system_is_seen(project, tmp_path):
    """The outside view is the jail's root: a directory made beside `/usr`, a private
    top-level directory removed, are lasting writes (live, root would make them), and
    the root a command sees is the skeleton, with the system's symlinks and directories
    as the host has them."""
    launcher = launcher_for(project, dict(os.environ))
    shown = [project, launcher.paths.home, *launcher.home_binds, *map(Path, SYSTEM_DATA)]
    shown += [dest for _, dest in launcher.alias_binds]
    empty = [
        p
        for p in private_dirs()
        if p != Path("/tmp") and not symlinks_in(p) and not any(s.is_relative_to(p) for s in shown)
    ]
    removal = f" && rmdir {empty[0]}" if empty else ""
    name = f"/qshell-test-{secrets.token_hex(4)}"
    command = f"ls -ld / /bin && mkdir {name}{removal} && echo ok"
    out, written, _ = speculated(launcher, command, tmp_path / "scratch")
    assert "ok" in out, out
    assert name in written.lasting, written
    if empty:
        assert str(empty[0]) in written.lasting, written
    assert out.startswith("drwxr-xr-x"), out
    if Path("/bin").is_symlink():
        assert f"-> {os.readlink('/bin')}" in out, out
    assert not Path(name).exists()


def test_a_home_in_a_private_top_level_directory_is_seen_too(project, tmp_path):
    """Where the home is not under /tmp (as on a real machine: /home/you, /root), its
    writes are seen in the outside view; the real directory is never made."""
    private = [p for p in private_dirs() if p != Path("/tmp")]
    if not private:
        pytest.skip("no private top-level directory here")
    home = private[0] / f"qshell-test-home-{secrets.token_hex(4)}"
    environ = {**os.environ, "HOME": str(home)}
    launcher = launcher_for(project, environ)
    out, written, _ = speculated(launcher, "echo h > ~/made && echo ok", tmp_path / "s", environ)
    assert "ok" in out, out
    assert written.lasting == [str(home)] or str(home / "made") in written.lasting, written
    assert not home.exists()


def test_nothing_one_command_left_outside_is_seen_by_the_next(project, tmp_path):
    launcher = launcher_for(project, dict(os.environ))
    scratch = tmp_path / "scratch"
    speculated(launcher, "echo a > /tmp/left; echo b > ~/left", scratch)
    outside = scratch / "outside"
    assert stat.S_IMODE(os.lstat(outside).st_mode) == 0o700  # the host side: private
    listing, written, _ = speculated(launcher, "ls -A /tmp ~", scratch)
    assert "left" not in listing, listing
    out, _, _ = speculated(launcher, "test -e /tmp/left || test -e ~/left || echo gone", scratch)
    assert out.strip() == "gone"
    assert written == Writes()


def test_a_secret_read_by_a_computed_name_is_seen_and_never_shown(project, tmp_path):
    if not atime_kept(tmp_path):
        pytest.skip("this file system keeps no access times")
    launcher = launcher_for(project, dict(os.environ))
    out, _, planted = speculated(launcher, "cat $(echo .e)nv", tmp_path / "scratch")
    assert SECRET not in out and "qshell stands in" in out
    assert planted.touched() == [".env"]


def test_untouched_stand_ins_leave_nothing_in_the_layer(project, tmp_path):
    launcher = launcher_for(project, dict(os.environ))
    (project / "deploy" / ".ssh").mkdir(parents=True)
    (project / "deploy" / ".ssh" / "id_deploy").write_text("PRIVATE\n")
    command = "ls -la . deploy > /dev/null; stat .env > /dev/null; cat src/app.py"
    out, _, planted = speculated(launcher, command, tmp_path / "scratch")
    assert "hi" in out, out
    assert planted.touched() == []
    assert {".env", "deploy/.ssh", "deploy/.ssh/id_deploy"} <= set(planted.planted)
    planted.remove()
    assert os.listdir(planted.upper) == []
