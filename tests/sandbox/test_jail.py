"""The jail, tried for real with bubblewrap in a throwaway project: a command qshell runs
on its own can write, delete or create nothing in the project, `/tmp`, `$HOME` or `/etc`,
reads nothing masked (not with `grep -r`, not through a symlink), reaches no network and
cannot undo the sandbox; and the read-only commands the proof allows give the same output
inside as outside (differential, against the real binaries). Skipped, with the probe's
reason, where the machine cannot sandbox; `.ci/run` installs bubblewrap."""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import stat
import subprocess
import tempfile
import threading
from dataclasses import replace
from pathlib import Path

import pytest

from qshell.config import SandboxMode
from qshell.permissions.confine import confinement
from qshell.permissions.policy import proven_context
from qshell.sandbox import private_dirs, probe
from qshell.sandbox.jail import system_secrets, top_view
from qshell.tools.base import ToolContext
from qshell.tools.paths import PathResolver
from qshell.tools.shell import ShellArgs, ShellTool

FOUND = probe(None)
pytestmark = pytest.mark.skipif(not FOUND.jail, reason=f"no sandbox here: {FOUND.reason}")
SECRET = "s3cr3t-value-0451"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    (root / "src").mkdir(parents=True)
    (root / "src" / "app.py").write_text("print('hi')\n")
    (root / "README.md").write_text("hello\n")
    (root / ".env").write_text(f"TOKEN={SECRET}\n")
    (root / "deploy").mkdir()
    (root / "deploy" / "server.pem").write_text(f"{SECRET}\n")
    outside = tmp_path / "elsewhere.key"
    outside.write_text(f"{SECRET}\n")
    (root / "linked").symlink_to(outside)
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    return root


def jailed(project: Path) -> ToolContext:
    home = Path(os.environ["HOME"])
    paths = PathResolver(project, home=home)
    confined = confinement(SandboxMode.ON, paths, os.environ, None)
    assert confined.launcher is not None, confined.missing
    ctx = ToolContext(paths=paths, environ=dict(os.environ), sandbox=confined.launcher)
    return proven_context(ctx)


def run(ctx: ToolContext, command: str) -> str:
    result = ShellTool().run(ShellArgs(command=command), ctx)
    return result.llm_content


def snapshot(root: Path) -> dict[str, bytes | str]:
    found: dict[str, bytes | str] = {}
    for path in sorted(root.rglob("*")):
        rel = str(path.relative_to(root))
        if path.is_symlink():
            found[rel] = "-> " + os.readlink(path)
        elif path.is_file():
            found[rel] = path.read_bytes()
        else:
            found[rel] = "dir"
    return found


WRITES = [
    "echo x > README.md",
    "rm -f README.md",
    "touch new.txt",
    "mkdir made",
    "mv src moved",
    "git add -A && git commit -qm x",
    "chmod 000 README.md",
    "ln -s /etc/passwd here",
]


@pytest.mark.parametrize("command", WRITES)
def test_a_command_changes_nothing_in_the_project(project, command):
    before = snapshot(project)
    out = run(jailed(project), command)
    assert snapshot(project) == before
    assert "Read-only file system" in out or "read-only" in out.lower()


def test_writes_to_tmp_home_and_etc_stay_inside(project):
    home = Path(os.environ["HOME"])
    name = f"qshell-jail-{os.getpid()}"
    out = run(
        jailed(project),
        f"echo x > /tmp/{name}; echo x > ~/{name}; echo x > /etc/{name}; cat /tmp/{name}",
    )
    assert "x" in out.splitlines()  # /tmp is writable inside, and private
    assert "Read-only file system" in out
    for where in (Path("/tmp"), home, Path("/etc")):
        assert not (where / name).exists()


def test_masked_secrets_read_as_empty_even_recursively(project):
    ctx = jailed(project)
    assert SECRET not in run(ctx, f"grep -r {SECRET} . ; grep -r {SECRET} / 2>/dev/null | head")
    assert SECRET not in run(ctx, "cat .env deploy/server.pem linked")
    assert "hello" in run(ctx, "cat README.md")


def test_home_credentials_are_not_there(project):
    ssh = Path(os.environ["HOME"]) / ".ssh"
    ssh.mkdir(exist_ok=True)
    (ssh / "id_ed25519").write_text(SECRET)
    try:
        assert SECRET not in run(jailed(project), "cat ~/.ssh/id_ed25519; ls -a ~")
    finally:
        (ssh / "id_ed25519").unlink()


def test_no_network_not_even_the_loopback(project):
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    port = server.getsockname()[1]
    accepted: list[object] = []

    def accept() -> None:
        with contextlib.suppress(OSError):  # closed at the end of the test
            accepted.append(server.accept())

    threading.Thread(target=accept, daemon=True).start()
    try:
        code = f"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=2)"
        out = run(jailed(project), f'python3 -c "{code}" && echo CONNECTED')
        assert "CONNECTED" not in out and accepted == []
        assert "Connection refused" in out or "unreachable" in out
    finally:
        server.close()


@pytest.mark.skipif(not FOUND.seccomp, reason="the seccomp filter does not load here")
def test_no_unix_socket_even_one_the_read_only_file_system_shows(project):
    # like /var/run/docker.sock: a socket the jail's file system shows (the project is
    # bound read-only at its path, even where it lies under the private /tmp)
    where = Path(tempfile.mkdtemp(dir=project))
    path = where / "daemon.sock"
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    server.listen()
    try:
        code = f"import socket; socket.socket(socket.AF_UNIX).connect({str(path)!r})"
        ctx = jailed(project)
        assert ctx.launcher is not None
        # the socket file is there, read-only, yet nothing may connect to it
        out = run(ctx, f'ls {path} && python3 -c "{code}" && echo CONNECTED')
        assert str(path) in out and "CONNECTED" not in out and "Operation not permitted" in out
        pair = "import socket; a, b = socket.socketpair(); a.send(b'x'); print(b.recv(1))"
        assert "b'x'" in run(ctx, f'python3 -c "{pair}"')  # a process's own pair still works
    finally:
        server.close()
        shutil.rmtree(where)


@pytest.mark.parametrize(
    "command",
    [
        "mount -o remount,rw / && echo ESCAPED",
        "unshare -rm true && echo ESCAPED",
        f"mount -o remount,rw {'{root}'} && echo ESCAPED",
        "cat /proc/1/environ | tr '\\0' '\\n' | grep -c HOME && ls /proc | grep -c '^[0-9]'",
    ],
)
def test_the_sandbox_cannot_be_undone_from_inside(project, command):
    out = run(jailed(project), command.replace("{root}", str(project)))
    assert "ESCAPED" not in out
    before = snapshot(project)
    run(jailed(project), command.replace("{root}", str(project)) + "; touch x")
    assert snapshot(project) == before


READ_ONLY = [
    "ls -la src",
    "cat README.md src/app.py",
    "grep -rn hi src",
    "git status --short",
    "git log --oneline -3 || true",
    "wc -l README.md",
    "find src -name '*.py'",
    "head -1 README.md && tail -1 src/app.py",
]


@pytest.mark.parametrize("command", READ_ONLY)
def test_read_only_commands_say_the_same_inside_and_out(project, command):
    inside = jailed(project)
    outside = replace(inside, launcher=None)
    assert run(inside, command) == run(outside, command)


def test_programs_on_path_under_tmp_are_still_there(project, tmp_path):
    """A virtual environment in /tmp (a clone in /tmp, as CI makes) is behind the jail's
    private /tmp: the PATH entries there are bound back, read-only."""
    tools = tmp_path / "venv" / "bin"
    tools.mkdir(parents=True)
    (tools / "hello-tool").write_text("#!/bin/sh\necho tool ran\n")
    (tools / "hello-tool").chmod(0o755)
    environ = {**os.environ, "PATH": f"{tools}:{os.environ['PATH']}"}
    paths = PathResolver(project, home=Path(os.environ["HOME"]))
    launcher = confinement(SandboxMode.ON, paths, environ, None).launcher
    ctx = proven_context(ToolContext(paths=paths, environ=environ, sandbox=launcher))
    assert run(ctx, "hello-tool && touch $(dirname $(command -v hello-tool))/x").startswith(
        "tool ran"
    )
    assert not (tools / "x").exists()


def test_other_peoples_files_and_the_system_secrets_are_not_there(project):
    """/var/tmp, other homes, /root, mounted media: emptied; /etc/shadow and the host keys
    are masked even for root, who could read them outside."""
    left = Path(tempfile.mkdtemp(dir="/var/tmp"))
    (left / "notes.txt").write_text(f"{SECRET}\n")
    try:
        ctx = jailed(project)
        out = run(ctx, f"cat {left}/notes.txt; grep -rs {SECRET} /var /mnt /media /srv; true")
        assert SECRET not in out and "No such file" in out
        for shadow in (Path("/etc/shadow"), Path("/etc/shadow-"), Path("/etc/gshadow-")):
            if os.access(shadow, os.R_OK) and shadow.read_text().strip():
                out = run(ctx, f"cat {shadow}; true").split("[exit code")[0].strip()
                assert out in ("", f"cat: {shadow}: Permission denied"), out
    finally:
        shutil.rmtree(left)


def test_the_python_on_path_runs_in_the_jail_wherever_it_is_installed(project):
    """An interpreter under an emptied directory (pyenv in /root, a venv in another home)
    is bound back, with what it needs beside it."""
    code = "import sys; print(sys.version_info[:2])"
    inside = jailed(project)
    outside = replace(inside, launcher=None)
    assert run(inside, f'python3 -c "{code}"') == run(outside, f'python3 -c "{code}"')
    assert "(3, " in run(inside, f'python3 -c "{code}"')


def test_only_the_systems_top_level_directories_stay(tmp_path):
    for name in ("usr", "etc", "opt", "home", "root", "var", "work", "data"):
        (tmp_path / name).mkdir()
    (tmp_path / "bin").symlink_to("usr/bin")
    (tmp_path / "notes.txt").write_text("x")
    emptied = [p.name for p in private_dirs(tmp_path)]
    assert emptied == ["data", "home", "root", "var", "work"]


def test_the_top_of_the_file_system_is_looked_at_again_whenever_it_changed(tmp_path):
    """The view every jail's command line is built from is kept between commands, but
    a directory made or removed at the top, or a symlink in a private directory, shows
    in the next one: no jail binds an old view."""
    for name in ("usr", "etc", "home", "var"):
        (tmp_path / name).mkdir()
    (tmp_path / "bin").symlink_to("usr/bin")
    first = top_view(tmp_path)
    assert top_view(tmp_path) is first
    assert [p.name for p in first.private] == ["home", "var"]
    assert first.links == (("usr/bin", str(tmp_path / "bin")),)
    (tmp_path / "data").mkdir()
    assert [p.name for p in top_view(tmp_path).private] == ["data", "home", "var"]
    (tmp_path / "var" / "run").symlink_to("/run")
    assert top_view(tmp_path).inner_links[tmp_path / "var"] == (
        ("/run", str(tmp_path / "var/run")),
    )
    (tmp_path / "etc").rmdir()
    (tmp_path / "etc").symlink_to("usr/etc")
    assert [p.name for p in top_view(tmp_path).system] == ["usr"]


def home_with_tools(tmp_path: Path) -> Path:
    """A home with programs on PATH beside what must stay hidden."""
    home = tmp_path / "home"
    for where in (".local/bin", ".cargo/bin"):
        tool = home / where / "say-hi"
        tool.parent.mkdir(parents=True)
        tool.write_text("#!/bin/sh\necho hi from $0\n")
        tool.chmod(0o755)
    (home / ".local/share").mkdir(parents=True)
    (home / ".local/share/history").write_text(f"{SECRET}\n")
    (home / ".cargo/credentials.toml").write_text(f"token = '{SECRET}'\n")
    (home / ".netrc").write_text(f"password {SECRET}\n")
    return home


@pytest.mark.parametrize("entry", [".local/bin", ".cargo/bin", "", ".local/bin/../.."])
def test_a_path_entry_in_the_home_brings_back_its_programs_and_nothing_else(
    project, tmp_path, entry
):
    home = home_with_tools(tmp_path)
    path_entry = f"{home}/{entry}".rstrip("/")
    environ = {**os.environ, "HOME": str(home), "PATH": f"{path_entry}:{os.environ['PATH']}"}
    paths = PathResolver(project, home=home)
    launcher = confinement(SandboxMode.ON, paths, environ, None).launcher
    ctx = proven_context(ToolContext(paths=paths, environ=environ, sandbox=launcher))
    reads = f"cat {home}/.netrc {home}/.cargo/credentials.toml {home}/.local/share/history"
    assert SECRET not in run(ctx, f"{reads}; grep -rs {SECRET} {home}; true")
    listed = run(ctx, f"ls -A {home}/.local {home}/.cargo 2>/dev/null; true")
    assert "share" not in listed and "credentials.toml" not in listed
    if entry in (".local/bin", ".cargo/bin"):
        assert "hi from" in run(ctx, f"{home}/{entry}/say-hi")


def jailed_with(project: Path, home: Path, path_entries: list[Path]) -> ToolContext:
    path = ":".join([*map(str, path_entries), os.environ["PATH"]])
    environ = {**os.environ, "HOME": str(home), "PATH": path}
    paths = PathResolver(project, home=home)
    launcher = confinement(SandboxMode.ON, paths, environ, None).launcher
    return proven_context(ToolContext(paths=paths, environ=environ, sandbox=launcher))


def script(path: Path, body: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)
    return path


def test_programs_keep_what_they_need_where_they_are_installed(project, tmp_path):
    """A symlinked PATH entry, a virtual environment and a conda install under the home, a
    program that links into its own environment (pipx, `uv tool`), `pip --user`'s library."""
    home = tmp_path / "home"
    script(home / "dotfiles/bin/from-dotfiles", "echo dotfiles ok")
    (home / "bin").symlink_to(home / "dotfiles/bin")
    venv = home / ".virtualenvs/tool"
    (venv / "pyvenv.cfg").parent.mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text("home = /usr/bin\n")
    script(venv / "bin/from-venv", f"cat {venv}/pyvenv.cfg")
    conda = home / "miniconda3"
    (conda / "conda-meta").mkdir(parents=True)
    (conda / "lib/data.txt").parent.mkdir(parents=True)
    (conda / "lib/data.txt").write_text("conda lib ok\n")
    script(conda / "bin/from-conda", f"cat {conda}/lib/data.txt")
    pipx = home / ".local/share/pipx/venvs/black"
    (pipx / "pyvenv.cfg").parent.mkdir(parents=True)
    (pipx / "pyvenv.cfg").write_text("home = /usr/bin\n")
    script(pipx / "lib/marker", "")
    script(pipx / "bin/black", f"test -f {pipx}/lib/marker && echo pipx ok")
    (home / ".local/bin").mkdir(parents=True)
    (home / ".local/bin/black").symlink_to(pipx / "bin/black")
    (home / ".local/share/fish_history").write_text(f"{SECRET}\n")
    (home / ".local/lib/python3/site.txt").parent.mkdir(parents=True)
    (home / ".local/lib/python3/site.txt").write_text("user site ok\n")
    entries = [home / "bin", venv / "bin", conda / "bin", home / ".local/bin"]
    ctx = jailed_with(project, home, entries)
    out = run(ctx, f"from-dotfiles; from-venv; from-conda; black; cat {home}/.local/lib/*/site.txt")
    for said in ("dotfiles ok", "home = /usr/bin", "conda lib ok", "pipx ok", "user site ok"):
        assert said in out, out
    assert run(ctx, f"ls -A {home}/.local/share").startswith("pipx\n[exit code: 0]")
    assert SECRET not in run(ctx, f"cat {home}/.local/share/fish_history; true")


def test_git_works_in_a_worktree_whose_repository_lies_outside_the_project(tmp_path):
    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "a.txt").write_text("a\n")
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "add", "a.txt"], check=True)
    subprocess.run([*git, "commit", "-qm", "first"], check=True)
    subprocess.run([*git, "worktree", "add", "-q", str(tmp_path / "wt")], check=True)
    ctx = jailed(tmp_path / "wt")
    assert "first" in run(ctx, "git log --oneline -1")


def test_the_package_database_says_the_same_inside(project):
    if shutil.which("dpkg-query") is None or not Path("/var/lib/dpkg").is_dir():
        pytest.skip("no dpkg here")
    inside = jailed(project)
    outside = replace(inside, launcher=None)
    command = "dpkg-query -W -f='${Package}\\n' coreutils bash"
    assert run(inside, command) == run(outside, command)


def test_every_etc_entry_others_may_not_read_is_masked():
    """A differential against a plain walk of /etc: whatever of it this user can read but
    others may not is in the jail's mask list."""
    expected = set()
    for top, dirs, files in os.walk("/etc"):
        for name in [*dirs, *files]:
            path = Path(top, name)
            mode = path.lstat().st_mode
            if not stat.S_ISLNK(mode) and not mode & stat.S_IROTH and os.access(path, os.R_OK):
                expected.add(path)
    masked = set(system_secrets())
    assert all(p in masked or any(p.is_relative_to(m) for m in masked) for p in expected)


def test_files_at_the_top_of_the_file_system_are_not_there(project):
    """A machine's notes or installers at `/` are nobody's system: the jail's root, made
    of the system's directories alone, has no file."""
    out = run(jailed(project), "find / -maxdepth 1 ! -type d ! -type l; ls -d /usr /etc /bin")
    assert out.splitlines()[:3] == ["/bin", "/etc", "/usr"], out


def test_a_path_entry_in_the_home_that_links_to_the_system_is_there(project, tmp_path):
    """`~/.nix-profile/bin` style: the entry is a symlink into a directory the jail shows,
    but PATH names it where the home is emptied."""
    home = tmp_path / "home"
    home.mkdir()
    (home / ".nix-profile").symlink_to("/usr")
    ctx = jailed_with(project, home, [home / ".nix-profile/bin"])
    assert "there" in run(ctx, f"test -x {home}/.nix-profile/bin/sh && echo there")
