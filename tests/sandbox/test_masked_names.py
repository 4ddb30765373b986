"""The jail masks every credential file of qshell's one list (tests/secret_files.py), tried for
real: a command that runs in it — as a proven one does, or as a speculation runs one the
proof could not read (`cat X | tee /dev/stderr`, on a kernel overlay) — reads none of them
with `cat`, `head`, `awk 1`, `sed -n p`, `jq .` or `grep -r`, neither in the project nor in a
virtual environment or toolchain the jail binds back (`pip.conf`, `.pypirc`,
`credentials.toml`, a Node install's `etc/npmrc`), while their other files stay readable."""

from __future__ import annotations

import os
import shlex
import subprocess
from pathlib import Path

import pytest

from qshell.config import SandboxMode, SandboxSettings
from qshell.permissions.confine import JailLauncher, confinement
from qshell.sandbox import probe
from qshell.tools.paths import PathResolver
from tests.sandbox.test_jail import jailed, run, script
from tests.secret_files import leaked, plant

FOUND = probe(None)
pytestmark = pytest.mark.skipif(not FOUND.jail, reason=f"no sandbox here: {FOUND.reason}")
READERS = ("cat", "head", "awk 1", "sed -n p", "jq .")


def launcher_for(project: Path, environ: dict[str, str]) -> JailLauncher:
    paths = PathResolver(project, home=Path(environ["HOME"]))
    settings = SandboxSettings()
    launcher = confinement(SandboxMode.ON, paths, environ, None, settings=settings).launcher
    assert launcher is not None
    return launcher


def on_overlay(
    launcher: JailLauncher, command: str, scratch: Path, environ: dict[str, str] | None = None
) -> str:
    """`command` run as a speculation runs one the proof could not read: on a kernel
    overlay of the project, in the jail; its output and errors."""
    speculated = launcher.on_overlay((), scratch)
    assert speculated.mount is not None
    speculated.mount.prepare()
    argv, environ = speculated.wrap(["bash", "-c", command], environ or dict(os.environ))
    try:
        done = subprocess.run(argv, env=environ, cwd=launcher.paths.root, capture_output=True)
    finally:
        speculated.mount.clean()
    return (done.stdout + done.stderr).decode("utf-8", "replace")


def readers_of(names: list[str]) -> str:
    """One command line that reads each of `names` with every reader, then greps for all."""
    quoted = " ".join(shlex.quote(name) for name in names)
    return "; ".join([*(f"{r} {quoted} 2>&1" for r in READERS), "grep -r token . 2>&1; true"])


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    root.mkdir()
    (root / "README.md").write_text('{"token": "public"}\n')
    return root


def test_no_credential_file_of_the_project_is_read_in_the_jail(project):
    planted = plant(project)
    out = run(jailed(project), readers_of(["README.md", *planted]))
    assert leaked(out, planted) == []
    assert out.count("public") >= len(READERS) + 1  # README.md, by each reader and grep


@pytest.mark.skipif(not FOUND.overlay, reason=FOUND.reason or "no overlay here")
def test_nor_in_a_speculation_of_a_command_the_proof_cannot_read(project, tmp_path):
    planted = plant(project)
    launcher = launcher_for(project, dict(os.environ))
    command = f"{readers_of(list(planted))}; cat README.md | tee /dev/stderr"
    out = on_overlay(launcher, command, tmp_path / "scratch")
    assert leaked(out, planted) == []
    assert "public" in out


def toolchains(home: Path) -> tuple[list[Path], dict[str, str]]:
    """A virtual environment and a Node install under the home, each on PATH with a program
    and with credentials where their tools read them; (PATH entries, {file: value})."""
    venv = home / ".virtualenvs" / "app"
    (venv / "pyvenv.cfg").parent.mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text("home = /usr/bin\n")
    script(venv / "bin" / "venv-tool", "echo venv tool ran")
    node = home / ".nvm" / "versions" / "node" / "v22.1.0"
    script(node / "bin" / "node-tool", "echo node tool ran")
    planted = {}
    for where, names in ((venv, ("pip.conf", ".pypirc", "credentials.toml")), (node, ("npmrc",))):
        base = where / "etc" if where == node else where
        for rel, value in plant(base, names).items():
            planted[str(base / rel)] = value
    return [venv / "bin", node / "bin"], planted


def test_a_bound_toolchains_credentials_are_masked_and_its_programs_run(project, tmp_path):
    home = tmp_path / "home"
    entries, planted = toolchains(home)
    path = ":".join([*map(str, entries), os.environ["PATH"]])
    environ = {**os.environ, "HOME": str(home), "PATH": path}
    launcher = launcher_for(project, environ)
    command = f"venv-tool; node-tool; {readers_of(list(planted))}; grep -rs token {home}; true"
    argv, inside = launcher.wrap(["bash", "-c", command], environ)
    done = subprocess.run(argv, env=inside, cwd=project, capture_output=True, text=True)
    assert "venv tool ran" in done.stdout and "node tool ran" in done.stdout, done.stderr
    assert leaked(done.stdout + done.stderr, planted) == []
    if FOUND.overlay:
        command = f"cat {shlex.join(planted)} | tee /dev/stderr"
        out = on_overlay(launcher, command, tmp_path / "scratch", environ)
        assert leaked(out, planted) == [] and "No such file" not in out
