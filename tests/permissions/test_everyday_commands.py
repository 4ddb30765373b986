"""Everyday commands in a project that holds secrets: the jail and the scanner carry them.

The project (bench/everyday_commands.py) has a `.env` with a real-looking API key and a
remote whose URL carries a GitHub token. In a session with the sandbox, ≥ 90 % of the
corpus's ordinary read-only commands run without asking — `git status`, `grep -rn TODO .`
— and none of the writing ones; what they print, live or speculated, however transformed,
holds neither secret, because the jail masks `.env` and shows git its configuration
without the token. A secret the jail cannot mask still asks, and with no sandbox a
recursive read beside a secret asks as before while git that prints no configuration runs.
"""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from bench.everyday_commands import GOAL, decisions, secret_project, session_context
from qshell.config import ApprovalMode
from qshell.followup.gate import SpeculativeRunner
from qshell.overlay import Overlay
from qshell.permissions.policy import Verdict, proven_context, shell_concern
from qshell.sandbox import probe
from qshell.tools.base import ToolContext
from qshell.tools.shell import ShellArgs, ShellTool
from tests.shellproof.test_corpus import load_corpus

FOUND = probe(None)
needs_jail = pytest.mark.skipif(not FOUND.jail, reason=f"no sandbox here: {FOUND.reason}")
# what prints the configuration, the history or the whole tree, as is and transformed
PRINTING = [
    "git status",
    "git remote -v",
    "git remote -v | rev",
    "git remote get-url origin | base64",
    "git config --local -l",
    "git config --get remote.origin.url | od -c",
    "cat .git/config",
    "cut -c1-30 .git/config",
    "grep -rn KEY .",
    "grep -ro 'sk-proj-.\\{8\\}' .",
    "rg -uu -n sk-proj",
    "git log -p | cat",
    "tail -n +1 .git/config README.md",
]


@pytest.fixture
def project(tmp_path: Path):
    return secret_project(tmp_path)


def run(ctx: ToolContext, command: str) -> str:
    """What `command` prints, run as a proven command runs — before the scanner sees it:
    the jail alone must keep the secrets out."""
    return ShellTool().run(ShellArgs(command=command), proven_context(ctx)).llm_content


def leaked(output: str, secrets: tuple[str, ...]) -> list[str]:
    """Each secret of which `output` shows any 8 characters of its random body, as is,
    without whitespace (`od -c`), reversed or base64-decoded."""
    flat = "".join(output.split())
    forms = [output, flat, flat[::-1]]
    for word in output.split():
        try:
            forms.append(base64.b64decode(word + "=" * (-len(word) % 4)).decode("latin-1"))
        except ValueError:
            continue
    pieces = {s: {s[i : i + 8] for i in range(8, len(s) - 7)} for s in secrets}
    return [s for s in secrets if any(p in form for p in pieces[s] for form in forms)]


@needs_jail
def test_ninety_percent_of_ordinary_read_only_commands_run_and_no_writing_one(project):
    rows = load_corpus()
    ro = [row["command"] for row in rows if row["label"] == "ro"]
    rw = [row["command"] for row in rows if row["label"] == "rw"]
    asked = [(c, why) for c, why in zip(ro, decisions(project, ro, "auto"), strict=True) if why]
    share = 1 - len(asked) / len(ro)
    assert share >= GOAL, f"{share:.1%} run without asking; these ask:\n" + "\n".join(
        f"{c!r}: {why}" for c, why in asked
    )
    assert not any("credential" in why or ".env" in why for _, why in asked)
    ran = [c for c, why in zip(rw, decisions(project, rw, "auto"), strict=True) if why is None]
    assert ran == []


@pytest.mark.parametrize("sandbox", [pytest.param("auto", marks=needs_jail), "off"])
def test_no_corpus_command_that_runs_without_asking_shows_a_secret(project, sandbox):
    ro = [row["command"] for row in load_corpus() if row["label"] == "ro"]
    ctx = session_context(project, sandbox)
    ran = [c for c, why in zip(ro, decisions(project, ro, sandbox), strict=True) if why is None]
    shown = {command: run(ctx, command) for command in ran}
    assert {c: out for c, out in shown.items() if leaked(out, project.secrets)} == {}
    assert "git status --short | wc -l" in ran
    assert ("tree -L 2" in ran) is (sandbox == "auto")  # a recursive read beside the .env


@needs_jail
@pytest.mark.parametrize("command", PRINTING)
def test_what_runs_without_asking_shows_no_secret(project, command):
    ctx = session_context(project)
    assert shell_concern(command, ctx) is None
    output = run(ctx, command)
    assert leaked(output, project.secrets) == [], output


@needs_jail
def test_git_in_the_jail_works_on_its_configuration_without_the_token(project):
    ctx = session_context(project)
    status = run(ctx, "git status")
    assert "up to date with 'origin/main'" in status and "[exit code: 0]" in status
    remotes = run(ctx, "git remote -v")
    assert "origin\thttps://alice:[redacted: url-password #0]@github.com/acme/demo.git" in remotes
    found = run(ctx, "grep -rn KEY .")
    assert "README.md:3:KEY ideas" in found and "src/app.py:3:" in found
    assert ".env: Permission denied" in found  # masked: the tool says so, nothing more


@needs_jail
@pytest.mark.parametrize(
    ("key", "value"), [("sendemail.smtpPass", "hunter2-x7"), ("hub.oauthtoken", "0a1b2c3d4e" * 4)]
)
def test_a_password_under_its_own_key_is_hidden_from_git_in_the_jail(project, key, value):
    project.git("remote", "set-url", "origin", "https://github.com/acme/demo.git")
    project.git("config", key, value)
    ctx = session_context(project)
    for command in (f"git config --local --get {key}", "cut -c2-200 .git/config", "git status"):
        assert shell_concern(command, ctx) is None, command
        output = run(ctx, command)
        assert value not in output and "[exit code: 0]" in output, output


@needs_jail
def test_a_speculated_command_is_decided_and_run_the_same(project, tmp_path):
    ctx = session_context(project)
    with Overlay.create(project.root, ctx.paths, base_dir=tmp_path / "base") as overlay:
        runner = SpeculativeRunner(overlay, ApprovalMode.DEFAULT)
        shown = {
            "grep -rn KEY .": "README.md:3:",
            "git remote -v": "origin\t",
            "cat .git/config": "url",
        }
        for command, expected in shown.items():
            args = ShellArgs(command=command)
            assert runner.decide(ShellTool(), args, ctx).verdict is Verdict.ALLOW
            output = runner.execute(ShellTool(), args, ctx).llm_content
            assert leaked(output, project.secrets) == [] and expected in output


@needs_jail
def test_a_secret_the_jail_cannot_mask_still_asks(project, tmp_path):
    ctx = session_context(project)
    assert "secret" in (shell_concern("cat .env", ctx) or "")  # named: the user's to give
    outside = tmp_path / "home" / ".netrc"
    outside.write_text("machine h login u password x\n")
    (project.root / "src" / "netrc").symlink_to(outside)
    assert "would reach src/netrc" in (shell_concern("grep -rn KEY .", ctx) or "")
    (project.root / "src" / "netrc").unlink()
    (project.root / "src" / "settings.env").symlink_to(project.root / ".env")
    assert shell_concern("grep -rn KEY src", ctx) is None  # it leads to the masked .env
    assert project.env_value not in run(ctx, "grep -rRn KEY src")


def test_with_no_sandbox_a_recursive_read_asks_and_git_runs_unless_it_prints_config(project):
    ctx = session_context(project, "off")
    assert ctx.sandbox is None
    assert "would reach .env" in (shell_concern("grep -rn KEY .", ctx) or "")
    assert "credential" in (shell_concern("git remote -v", ctx) or "")
    assert "secret" in (shell_concern("cat .git/config", ctx) or "")
    for command in ("git status", "git log --oneline", "git branch -vv", "git diff --stat"):
        assert shell_concern(command, ctx) is None, command
        assert leaked(run(ctx, command), project.secrets) == []
