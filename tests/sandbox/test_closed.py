"""The jail closes what it would share with the host, tried for real: the session keyring
(a key the user's session holds cannot be read, `keyctl` fails), a process cap that holds for
root, whom RLIMIT_NPROC does not bind, a `/proc/self/mountinfo` that names no host mount or
path the command cannot see, and a file system with nothing outside the project but the
system's directories and what the jail binds back — for a proven command and for a
speculated one on a kernel overlay alike."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from qshell.permissions.confine import JailLauncher
from qshell.sandbox import probe
from qshell.sandbox.jail import SYSTEM_DATA, SYSTEM_DIRS
from tests.sandbox.test_masked_names import launcher_for

FOUND = probe(None)
pytestmark = pytest.mark.skipif(not FOUND.jail, reason=f"no sandbox here: {FOUND.reason}")
SECRET = "keyring-s3cr3t-0451"
WAYS = ["jail", pytest.param("overlay", marks=pytest.mark.skipif(not FOUND.overlay, reason="-"))]
# joins a fresh session keyring holding a key, then runs its arguments (the jailed command)
WITH_KEY = f"""
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
if libc.syscall({{keyctl}}, 1, None) < 0:  # KEYCTL_JOIN_SESSION_KEYRING, anonymous
    sys.exit("no keyring here: errno %d" % ctypes.get_errno())
libc.syscall({{add_key}}, b"user", b"qshell-test", b"{SECRET}", {len(SECRET)}, -3)
os.execvp(sys.argv[1], sys.argv[1:])
"""
# inside: find the key in the session keyring and print it
READ_KEY = """
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
key = libc.syscall({keyctl}, 10, -3, b"user", b"qshell-test", 0)  # KEYCTL_SEARCH
print("search", key, ctypes.get_errno())
buffer = ctypes.create_string_buffer(256)
print("read", libc.syscall({keyctl}, 11, key, buffer, 256), buffer.value)  # KEYCTL_READ
"""
NUMBERS = {"x86_64": {"keyctl": 250, "add_key": 248}, "aarch64": {"keyctl": 219, "add_key": 217}}


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    (root / "src").mkdir(parents=True)
    (root / "src" / "app.py").write_text("print('hi')\n")
    return root


def argv_for(launcher: JailLauncher, way: str, command: str, scratch: Path) -> list[str]:
    """The command line that runs `command` in the jail (`way`: as is, or on an overlay)."""
    if way == "overlay":
        launcher = launcher.on_overlay((), scratch)
        assert launcher.mount is not None
        launcher.mount.prepare()
    argv, _ = launcher.wrap(["bash", "-c", command], dict(os.environ))
    return argv


def output(argv: list[str], cwd: Path) -> str:
    done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=60)
    return done.stdout + done.stderr


@pytest.mark.skipif(os.uname().machine not in NUMBERS, reason="keyctl numbers unknown here")
@pytest.mark.parametrize("way", WAYS)
def test_the_session_keyring_is_out_of_reach(project, tmp_path, way):
    numbers = NUMBERS[os.uname().machine]
    launcher = launcher_for(project, dict(os.environ))
    reader = READ_KEY.format(**numbers)
    argv = argv_for(launcher, way, f"python3 -c '{reader}'", tmp_path / "scratch")
    wrapper = [sys.executable, "-c", WITH_KEY.format(**numbers)]
    control = output([*wrapper, sys.executable, "-c", reader], project)
    if "no keyring here" in control:
        pytest.skip(control.strip())
    assert SECRET in control  # outside, the key is there to read
    out = output([*wrapper, *argv], project)
    assert "search -1 38" in out and SECRET not in out, out  # ENOSYS: no keys in the jail


# forks 20 children that each sleep, and says how many it could make
FORKS = (
    "import os, time\nn = 0\nfor _ in range(20):\n    try:\n        pid = os.fork()\n"
    "    except OSError:\n        break\n    if pid == 0:\n        time.sleep(2)\n"
    "        os._exit(0)\n    n += 1\nprint('children', n)"
)


@pytest.mark.skipif(os.geteuid() != 0, reason="the rlimit binds every other user")
@pytest.mark.parametrize("way", WAYS)
def test_the_process_cap_holds_for_root(project, tmp_path, way):
    launcher = launcher_for(project, dict(os.environ))
    capped = replace(launcher, limits=replace(launcher.limits, processes=8))
    out = output(
        argv_for(capped, way, f'ulimit -u 5; python3 -c "{FORKS}"', tmp_path / "s"), project
    )
    children = int(out.split("children ")[1].split()[0])
    assert 0 < children < 8, out


@pytest.mark.parametrize("way", WAYS)
def test_mountinfo_names_no_host_mount_or_path_the_command_cannot_see(project, tmp_path, way):
    """A mount under a directory the jail empties (here one made in a private mount
    namespace around the jailed command) is not in the jail's mountinfo; nor, on an
    overlay, are the overlay's layers; each mount point there is a path the command sees."""
    hidden = tmp_path / "home" / "mounted"
    hidden.mkdir(parents=True)
    launcher = launcher_for(project, dict(os.environ))
    scratch = tmp_path / "scratch"
    listing = 'while read -r _ _ _ _ point _; do test -e "$point" || echo "UNSEEN $point"; done'
    command = f"cat /proc/self/mountinfo; {listing} < /proc/self/mountinfo"
    argv = argv_for(launcher, way, command, scratch)
    mounted = 'mount -t tmpfs qshell-host-mount "$0" && exec "$@"'
    out = output(["unshare", "-rm", "--", "sh", "-c", mounted, str(hidden), *argv], project)
    assert "UNSEEN" not in out and "qshell-host-mount" not in out, out
    assert str(hidden) not in out and str(scratch) not in out, out
    assert str(project) in out  # the project, which the command sees, is named


@pytest.mark.parametrize("way", WAYS)
def test_nothing_outside_the_project_is_there_but_the_system_and_what_is_bound(
    project, tmp_path, way
):
    """Every entry outside the system's directories is the project, one of the directories
    bound back (programs on PATH, the package databases), on the way to one, or an emptied
    top-level directory or symlink (the private /tmp, /home, /var, /work…): a listing of
    $HOME or /work shows nothing else, and no file lies at the top."""
    launcher = launcher_for(project, dict(os.environ))
    shown = [project, *launcher.home_binds, *(dest for _, dest in launcher.alias_binds)]
    shown += [Path(p) for p in SYSTEM_DATA]
    walled = [f"/{name}" for name in sorted(SYSTEM_DIRS - {"tmp"})] + [str(p) for p in shown]
    pruned = " -o ".join(f"-path {shlex.quote(p)}" for p in walled)
    command = f"find / \\( {pruned} \\) -prune -o -printf '%y %p\\n' 2>/dev/null; true"
    out = output(argv_for(launcher, way, command, tmp_path / "scratch"), project)
    listed = [line.split(" ", 1) for line in out.splitlines() if line[1:3] == " /"]
    assert len(listed) > 3, out
    for kind, name in listed:
        path = Path(name)
        if any(path.is_relative_to(s) or s.is_relative_to(path) for s in shown):
            continue
        emptied = kind == "d" and (path.parent == Path("/") or path == launcher.paths.home)
        remade = kind == "l" and len(path.parts) <= 3  # /bin -> usr/bin, /var/run -> /run
        assert emptied or remade, (kind, name)


CAP_USER = """
import subprocess, sys
from qshell.sandbox.pids import open_cap
cap = open_cap()
if cap is None:
    sys.exit("no pids cgroup here")
for _ in range(3):
    join = cap.group(8)
    subprocess.run(["sh", "-c", f"echo 0 > {join} && exec true"], check=True)
print(cap.directory)
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="only root gets a pids cgroup")
def test_the_cgroups_of_the_cap_are_removed_when_qshell_exits_or_died():
    first = subprocess.run([sys.executable, "-c", CAP_USER], capture_output=True, text=True)
    if first.returncode != 0:
        pytest.skip(first.stderr.strip())
    directory = Path(first.stdout.strip())
    assert not directory.exists()  # its three groups and itself, at exit
    dead = subprocess.Popen(["true"])
    dead.wait()  # its pid no process holds any more
    stale = directory.parent / f"qshell-{dead.pid}"
    (stale / "c0").mkdir(parents=True)
    second = subprocess.run([sys.executable, "-c", CAP_USER], capture_output=True, text=True)
    assert second.returncode == 0, second.stderr
    assert not stale.exists()
