"""The read scope of proven shell commands, computed as bash will expand and walk it.

Each case runs the real bash (for brace, tilde and glob expansion) in a throwaway project
whose home directory is inside tmp_path. Nothing here runs the commands themselves.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from qshell import shellproof
from qshell.config import ApprovalMode
from qshell.permissions.policy import Verdict, shell_concern
from qshell.permissions.runner import MainToolRunner
from qshell.permissions.shell_scope import MAX_WALK_ENTRIES, walk_concern
from qshell.tools.base import Kind, ToolContext, ToolResult
from qshell.tools.paths import PathResolver
from qshell.tools.shell import ShellArgs, ShellTool
from tests.secret_files import SECRET_FILES, plant


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    (root / "src").mkdir(parents=True)
    (root / "src" / "app.py").write_text("print('hi')\n")
    (root / "README.md").write_text("# project\n")
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_rsa").write_text("PRIVATE KEY\n")
    return root


@pytest.fixture
def ctx(project: Path, tmp_path: Path) -> ToolContext:
    home = tmp_path / "home"
    environ = {"HOME": str(home), "PATH": os.environ.get("PATH", ""), "OLDPWD": str(tmp_path)}
    return ToolContext(paths=PathResolver(project, home=home), environ=environ)


def allowed(command: str, ctx: ToolContext) -> bool:
    assert shellproof.check(command).read_only, command  # the proof is not what is tested
    return shell_concern(command, ctx) is None


@pytest.mark.parametrize(
    "command",
    [
        "cat {~,}/.ssh/id_rsa",
        "cat ~/.ssh/id_rsa",
        "cat ~-/home/.ssh/id_rsa",
        "head ~root/.bashrc",
        "cat /etc/hostname",
        "cat src/../../home/.ssh/id_rsa",
    ],
)
def test_paths_bash_expands_out_of_the_project_are_out_of_scope(command, ctx):
    assert not allowed(command, ctx)


@pytest.mark.parametrize(
    "command", ["cat README.md", "cat ~+/README.md", "cat '~'/x", "wc -l src/*.py", "ls {src,.}"]
)
def test_paths_bash_expands_inside_the_project_are_in_scope(command, ctx):
    assert allowed(command, ctx)


def test_a_glob_that_matches_a_secret_is_out_of_scope(project, ctx):
    assert allowed("cat .e*", ctx)  # matches nothing: bash passes `.e*` itself
    (project / ".env").write_text("API_KEY=1\n")
    assert not allowed("cat .e*", ctx)
    (project / "config").mkdir()
    (project / "config" / "a.txt").write_text("a\n")
    assert allowed("cat config/*", ctx)
    (project / "config" / "server.pem").write_text("KEY\n")
    assert not allowed("cat config/*", ctx)


def test_a_path_through_a_symlink_out_of_the_project_is_out_of_scope(project, tmp_path, ctx):
    os.symlink(tmp_path / "home" / ".ssh" / "id_rsa", project / "notes.txt")
    assert not allowed("cat notes.txt", ctx)
    assert not allowed("cat n*", ctx)


def test_a_recursive_read_must_not_reach_a_secret_or_an_outward_symlink(project, tmp_path, ctx):
    assert allowed("find . -name '*.py'", ctx)
    (project / "src" / ".env.local").write_text("TOKEN=1\n")
    assert not allowed("find . -name '*.py'", ctx)
    assert allowed("find src/app.py", ctx)  # a file is no tree
    (project / "src" / ".env.local").unlink()
    os.symlink(tmp_path / "home", project / "src" / "home")
    assert "would reach" in (shell_concern("find src", ctx) or "")


READERS = ("cat {}", "head {}", "awk 1 {}", "sed -n p {}", "jq . {}", "grep -r token {}")


@pytest.mark.parametrize("reader", READERS)
def test_every_credential_file_is_out_of_scope_for_every_reader(project, ctx, reader):
    plant(project)
    for rel in SECRET_FILES:
        assert not allowed(reader.format(rel), ctx), rel
        assert not allowed(reader.format(f"~/{rel}"), ctx), rel
    assert not allowed("grep -r token .", ctx)  # a recursive read reaches them all


def test_a_recursive_read_reaches_each_credential_file_alone(project, ctx):
    for rel in SECRET_FILES:
        assert allowed("grep -rn token .", ctx), f"clean before {rel}"
        plant(project, (rel,))
        assert not allowed("grep -rn token .", ctx), rel
        top = project / rel.split("/")[0]
        if top.is_dir():
            shutil.rmtree(top)
        else:
            top.unlink()


def test_a_tree_too_large_to_walk_asks(project, monkeypatch):
    monkeypatch.setattr("qshell.permissions.shell_scope.MAX_WALK_ENTRIES", 3)
    for i in range(5):
        (project / f"f{i}.txt").write_text("x")
    paths = PathResolver(project, home=project.parent / "home")
    assert "too large" in (walk_concern(project, paths) or "")
    assert MAX_WALK_ENTRIES > 3


@pytest.mark.parametrize(
    "command", ['cat "$HOME/.ssh/id_rsa"', "cat $(echo README.md)", "(cd ~- && cat x)"]
)
def test_paths_known_only_at_run_time_ask(command, ctx):
    assert shell_concern(command, ctx) is not None


class RecordingShell(ShellTool):
    """The real shell tool's contract, recording the context it would run in."""

    def __init__(self) -> None:
        self.contexts: list[ToolContext] = []

    def run(self, args: ShellArgs, ctx: ToolContext) -> ToolResult:
        self.contexts.append(ctx)
        return ToolResult("ok")


def test_a_command_run_because_it_was_proven_gets_the_sanitised_environment(ctx):
    ctx = ToolContext(
        paths=ctx.paths, environ={**ctx.environ, "OPENAI_API_KEY": "sk-x"}, shell_timeout_s=120
    )
    runner = MainToolRunner(ApprovalMode.DEFAULT, interactive=True)
    tool = RecordingShell()
    assert tool.kind is Kind.EXECUTE
    proven = ShellArgs(command="cat README.md", timeout=500)
    assert runner.decide(tool, proven, ctx).verdict is Verdict.ALLOW
    runner.execute(tool, proven, ctx)
    asked = ShellArgs(command="make test")
    assert runner.decide(tool, asked, ctx).verdict is Verdict.ASK
    runner.execute(tool, asked, ctx)  # the user said yes: their own environment
    auto, approved = tool.contexts
    assert "OPENAI_API_KEY" not in auto.environ and approved.environ["OPENAI_API_KEY"] == "sk-x"
    assert auto.shell_timeout_cap_s == shellproof.SHELL_TIMEOUT_S == auto.shell_timeout_s
    assert approved.shell_timeout_s == 120


def git(root: Path, *args: str) -> None:
    import subprocess

    env = {"HOME": str(root.parent / "home"), "PATH": os.environ.get("PATH", "")}
    subprocess.run(["git", *args], cwd=root, env=env, check=True, capture_output=True)


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("diff.external", "/bin/sh -c id"),
        ("diff.pdf.textconv", "pdftotext"),
        ("filter.lfs.clean", "git-lfs clean -- %f"),
        ("core.worktree", "/"),
    ],
)
def test_git_asks_when_the_repository_configures_a_program_it_would_run(project, ctx, key, value):
    git(project, "init", "-q")
    assert allowed("git status", ctx) and allowed("git log --oneline", ctx)
    git(project, "config", key, value)
    reason = shell_concern("git diff", ctx) or ""
    assert key in reason
    assert not allowed("git status", ctx)


def test_git_asks_when_the_users_global_configuration_does(project, ctx, tmp_path):
    git(project, "init", "-q")
    (tmp_path / "home" / ".gitconfig").write_text('[diff]\n\texternal = "evil"\n')
    assert not allowed("git log -p", ctx)


def test_the_environment_already_switches_off_fsmonitor_pagers_and_hooks(project, ctx):
    git(project, "init", "-q")
    git(project, "config", "core.fsmonitor", "/bin/false")
    git(project, "config", "core.pager", "less")
    git(project, "config", "core.hooksPath", ".hooks")
    assert allowed("git status", ctx)


def test_a_glob_that_expands_to_an_option_asks(project, ctx):
    assert allowed("wc -l *", ctx)
    (project / "-r").write_text("")
    assert "option" in (shell_concern("wc -l *", ctx) or "")
    (project / "-r").unlink()
    (project / "--files0-from=.env").write_text("")
    assert not allowed("wc -l *", ctx)


def test_git_asks_when_a_tracked_file_looks_like_a_secret(project, ctx):
    git(project, "init", "-q")
    assert allowed("git status", ctx)
    (project / "deploy.env").write_text("TOKEN=1\n")
    assert allowed("git status", ctx)  # untracked: git shows its name, not its content
    git(project, "add", "deploy.env")
    assert "deploy.env" in (shell_concern("git show HEAD:README.md", ctx) or "")


def test_a_cd_with_dotdot_through_a_symlink_is_not_followed_physically(project, tmp_path, ctx):
    """bash's cd takes `..` logically: `cd docs/../..` from a symlink docs -> a/b is the
    project's parent, though the physical path a/b/../.. is the project itself."""
    (project / "a" / "b").mkdir(parents=True)
    os.symlink("a/b", project / "docs")
    (tmp_path / "notes.txt").write_text("outside\n")
    assert shell_concern("(cd docs/../.. && cat notes.txt)", ctx) is not None
    assert shell_concern("(cd docs && cd ../.. && ls)", ctx) is not None
    assert allowed("(cd docs && cat ../../README.md)", ctx)  # a file's .. is physical


FILE_TESTS = [
    "[[ -d {} ]]",
    "[ -e {} ]",
    "test -f {}",
    "[[ -r {} ]]",
    "[ -s {} ]",
    "[ ! -L {} ]",
    "[ {} -nt README.md ]",
    "[[ README.md -ot {} ]]",
    "test README.md -ef {}",
    "[ -e README.md ] && test -x {}",
    "[[ -e README.md && ( -O {} || -N README.md ) ]]",
]
OPERANDS = [
    "~/.ssh/id_rsa",
    "~/x",
    "/etc/shadow",
    ".env",
    "src/../../home/.ssh/id_rsa",
    '"$HOME/x"',
    "README.md",
    "src/app.py",
    "~+/README.md",
]


@pytest.mark.parametrize("form", FILE_TESTS)
@pytest.mark.parametrize("operand", OPERANDS)
def test_a_file_test_is_checked_for_scope_as_cat_is(form, operand, project, ctx):
    """A file test reveals that a file exists, its type, owner or age: its operand is a read,
    out of scope exactly when `cat` of it would be."""
    (project / ".env").write_text("API_KEY=1\n")
    assert allowed(form.format(operand), ctx) == allowed(f"cat {operand}", ctx)


@pytest.mark.parametrize(
    "form",
    ["[ {} = x ]", "[[ x == {} ]]", "[[ x != {} ]]", "[ -n {} ]", "[[ -z {} ]]", "[ {} ]"],
)
@pytest.mark.parametrize("operand", ["~/.ssh/id_rsa", "/etc/shadow", ".env"])
def test_a_string_test_reads_no_file(form, operand, project, ctx):
    (project / ".env").write_text("API_KEY=1\n")
    assert not allowed(f"cat {operand}", ctx)
    assert allowed(form.format(operand), ctx)
