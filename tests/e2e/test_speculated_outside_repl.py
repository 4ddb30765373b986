"""A speculated command that reaches what the jail changes — a secret of the project, by a
name the shell computes, or a place outside the project — stops the speculation there,
through the REPL (pexpect, scripted server), in default and auto-edit mode: on Tab, Enter
it is asked about as a live turn asks, nothing the speculation made of it is applied, and
once allowed its live run does what a live run does (the template holds `KEY=`, the tool is
installed in the home). Skipped with the probe's reason where a user-namespace overlay
cannot be mounted.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from qshell.sandbox import probe
from tests.e2e.accepting import MODES, asked_live

FOUND = probe()
pytestmark = pytest.mark.skipif(not FOUND.overlay, reason=FOUND.reason or "no overlay sandbox")
EACH_MODE = pytest.mark.parametrize("mode", list(MODES.values()), ids=list(MODES))


@EACH_MODE
def test_a_template_made_from_the_env_file_by_a_computed_name_is_made_live(
    llm_server, project: Path, mode: tuple[str, ...]
) -> None:
    (project / ".env").write_text("KEY=secret\n")
    command = "sed 's/=.*/=/' \"$(echo .e)nv\" > env.template && echo templated"
    asked_live(llm_server, project, mode, command, "templated", "y")
    assert (project / "env.template").read_text() == "KEY=\n"


@EACH_MODE
def test_an_install_into_the_home_is_asked_live_and_made_when_allowed(
    llm_server, project: Path, mode: tuple[str, ...]
) -> None:
    home = Path(os.environ["HOME"])
    (project / "tool").write_text("#!/bin/sh\necho tool\n")
    command = "mkdir -p ~/.local/bin && cp tool ~/.local/bin/ && echo installed"
    asked_live(llm_server, project, mode, command, "installed", "y")
    assert (home / ".local" / "bin" / "tool").read_text() == "#!/bin/sh\necho tool\n"
