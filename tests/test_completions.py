"""The completion scripts: checked in as generated, valid in each shell, and completing what
`qshell` reads (bash through its completion function, fish through `complete -C`)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from qshell import arguments, completions
from tests.e2e.helpers import run_qshell

SCRIPTS = Path(__file__).resolve().parent.parent / "completions"
BASH_COMPLETE = """\
source "$1"; shift
COMP_WORDS=("$@"); COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 )); COMPREPLY=()
_shtab_qshell
printf '%s\\n' "${COMPREPLY[@]}"
"""


def bash_completes(*words: str, cwd: Path | None = None) -> list[str]:
    """What bash offers for the last of `words`, as Tab after `qshell ...` would."""
    script = str(SCRIPTS / "qshell.bash")
    proc = subprocess.run(
        ["bash", "--norc", "--noprofile", "-c", BASH_COMPLETE, "bash", script, "qshell", *words],
        capture_output=True,
        text=True,
        check=True,
        cwd=cwd,
    )
    return proc.stdout.split()


def fish_completes(line: str) -> list[str]:
    proc = subprocess.run(
        ["fish", "--no-config", "-c", f"source {SCRIPTS / 'qshell.fish'}; complete -C {line!r}"],
        capture_output=True,
        text=True,
        check=True,
    )
    return [row.split("\t")[0] for row in proc.stdout.splitlines()]


needs_fish = pytest.mark.skipif(shutil.which("fish") is None, reason="fish is not installed")


def test_checked_in_scripts_equal_the_generated_ones(tmp_path):
    check = subprocess.run(
        [sys.executable, "-m", "qshell.completions", "--check"],
        capture_output=True,
        text=True,
    )
    assert check.returncode == 0, check.stderr
    for shell, name in completions.FILES.items():
        assert (SCRIPTS / name).read_text() == completions.script(shell), name
    assert completions.drifted(tmp_path) == list(completions.FILES.values())


def test_the_generator_writes_the_three_scripts_into_a_directory(tmp_path):
    out = tmp_path / "out"
    run = subprocess.run(
        [sys.executable, "-m", "qshell.completions", "--dir", str(out)],
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, run.stderr
    assert sorted(p.name for p in out.iterdir()) == sorted(completions.FILES.values())
    assert all(
        (out / n).read_text() == (SCRIPTS / n).read_text() for n in completions.FILES.values()
    )
    (out / "_qshell").write_text("#compdef qshell\n")
    check = subprocess.run(
        [sys.executable, "-m", "qshell.completions", "--check", "--dir", str(out)],
        capture_output=True,
        text=True,
    )
    assert check.returncode == 1 and "_qshell differs" in check.stderr


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_print_completion_prints_the_checked_in_script(shell, tmp_path):
    run = run_qshell("--print-completion", shell, cwd=tmp_path)
    assert run.code == 0 and run.stderr == ""
    assert run.stdout == (SCRIPTS / completions.FILES[shell]).read_text()


def test_print_completion_of_an_unknown_shell_is_bad_input(tmp_path):
    run = run_qshell("--print-completion", "tcsh", cwd=tmp_path)
    assert run.code == 42
    assert run.stderr.count("\n") == 1 and "invalid choice: 'tcsh'" in run.stderr


def test_print_completion_without_shtab_is_one_line_and_exit_52(tmp_path):
    shim = tmp_path / "hide-shtab"
    shim.mkdir()
    (shim / "sitecustomize.py").write_text("import sys\nsys.modules['shtab'] = None\n")
    pythonpath = ":".join(filter(None, [str(shim), os.environ.get("PYTHONPATH")]))
    run = run_qshell("--print-completion", "bash", cwd=tmp_path, env={"PYTHONPATH": pythonpath})
    assert run.code == 52 and run.stdout == ""
    assert run.stderr.count("\n") == 1 and "needs the shtab package" in run.stderr
    assert "Traceback" not in run.stderr


def test_every_subcommand_the_cli_dispatches_is_completed():
    names = [*arguments.SUBCOMMANDS, arguments.CHECK_SHELL]
    for shell in ("bash", "zsh", "fish"):
        script = completions.script(shell)
        assert all(name in script for name in names), shell


@pytest.mark.parametrize(
    ("shell", "name"), [("bash", "qshell.bash"), ("zsh", "_qshell"), ("fish", "qshell.fish")]
)
def test_each_script_passes_its_shells_syntax_check(shell, name):
    if shutil.which(shell) is None:
        pytest.skip(f"{shell} is not installed")
    check = subprocess.run([shell, "-n", str(SCRIPTS / name)], capture_output=True, text=True)
    assert check.returncode == 0, check.stderr


def test_bash_completes_an_option_prefix_to_the_approval_mode():
    assert "--approval-mode" in bash_completes("--ap")
    assert bash_completes("--approval-mode", "") == ["default", "auto-edit", "plan", "yolo"]
    assert bash_completes("-o", "s") == ["stream-json"]


def test_bash_offers_the_subcommands_and_each_ones_own_options(tmp_path):
    assert bash_completes("") == ["stats", "plugins", "doctor", "check-shell"]
    assert bash_completes("check-shell", "--") == [
        "--help",
        "--root",
        "--json",
        "--plugin",
        "--no-plugins",
    ]
    assert bash_completes("stats", "--") == ["--help", "--json"]
    assert bash_completes("plugins", "--") == ["--help", "--plugin", "--no-plugins", "--json"]
    assert bash_completes("doctor", "--") == ["--help"]
    assert bash_completes("--print-completion", "") == ["bash", "zsh", "fish"]
    (tmp_path / "sub").mkdir()
    (tmp_path / "subfile").write_text("")
    assert bash_completes("check-shell", "--root", "s", cwd=tmp_path) == ["sub"]
    assert sorted(bash_completes("--plugin", "s", cwd=tmp_path)) == ["sub", "subfile"]


@needs_fish
def test_fish_completes_an_option_prefix_and_the_subcommands():
    assert "--approval-mode" in fish_completes("qshell --ap")
    assert set(fish_completes("qshell ")) == {"stats", "plugins", "doctor", "check-shell"}
    assert fish_completes("qshell --approval-mode ") == ["default", "auto-edit", "plan", "yolo"]
    assert fish_completes("qshell check-shell --r") == ["--root"]


@pytest.mark.e2e
@pytest.mark.skipif(shutil.which("zsh") is None, reason="zsh is not installed")
def test_zsh_completes_the_approval_mode_and_its_values_at_a_prompt(isolated_home):
    import pexpect

    env = {"HOME": str(isolated_home), "TERM": "xterm", "PATH": os.environ["PATH"], "PS1": "Z> "}
    child = pexpect.spawn("zsh", ["-f", "-i"], env=env, encoding="utf-8", timeout=20)
    try:
        child.expect("Z> ")
        child.sendline(f"fpath=({SCRIPTS} $fpath); autoload -Uz compinit; compinit -u -D")
        child.expect("Z> ")
        child.send("qshell --appr\t")
        child.expect("approval-mode")
        child.send("\t")
        child.expect("auto-edit")
    finally:
        child.close(force=True)
