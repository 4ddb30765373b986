"""reach(): which command lines plainly need the network or a person, read from the same
parse as the proof — past wrappers, assignments, pipelines and substitutions."""

from __future__ import annotations

import pytest

from qshell.shellproof import reach


@pytest.mark.parametrize(
    ("command", "found"),
    [
        ("pip install requests", "pip install"),
        ("python -m pip install -e .", "pip install"),
        ("python3 -m venv .venv", "python3 -m venv"),
        ("FOO=1 npm ci", "npm ci"),
        ("git -C sub fetch origin", "git fetch"),
        ("git push", "git push"),
        ("timeout 5 curl https://example.com", "curl"),
        ("echo $(wget -q -O- x)", "wget"),
        ("ls | xargs -n1 ssh", "ssh"),
        ("make && docker build .", "docker"),
        ("/usr/bin/apt-get install jq", "apt-get"),
        ("cargo install ripgrep", "cargo install"),
        ("vim notes.txt", "vim"),
        ("sudo make install", "sudo"),
    ],
)
def test_commands_that_need_the_outside_world_are_named(command, found):
    assert reach(command) == found


@pytest.mark.parametrize(
    "command",
    [
        "python -m pytest -q",
        "make test",
        "cargo build --release",
        "npm test",
        "git status && git diff",
        "rm -rf build && mkdir build",
        "echo pip install > notes.txt",
        "grep -r curl .",
        "$TOOL install",
    ],
)
def test_local_commands_are_not(command):
    assert reach(command) is None
