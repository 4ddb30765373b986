"""What a new user meets first, driven as they would drive it (pexpect, subprocess): a
question on the command line, a resumed session, the README's own commands."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.helpers import ACP_EXTRA, LOCAL_EXTRA, provider_env, run_qshell, without_packages
from tests.e2e.pty import spawn_qshell
from tests.fakes.llm_server import Reply, ToolCallSpec, always, has_tool_result
from tests.fakes.script import Latency

README = Path(__file__).resolve().parents[2] / "README.md"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    root.mkdir()
    return root


def test_a_question_on_the_command_line_is_the_first_turn_of_the_repl(llm_server, project):
    llm_server.add_rule(always(), Reply.text("Rayleigh scattering makes it blue."))
    child = spawn_qshell(llm_server, project, "why is the sky blue")
    child.expect("for commands, Ctrl-D to exit")
    child.expect("Rayleigh scattering")  # answered without anything typed
    child.wait_prompt()
    child.send("\x04")
    assert child.finish() == 0
    assert [r.last_user_text for r in llm_server.requests] == ["why is the sky blue"]


def test_a_long_reply_is_on_screen_while_it_streams_in_the_full_repl(llm_server, project):
    """One long paragraph (no block ends until the reply does) must not stay invisible."""
    paragraph = " ".join(f"w{n}" for n in range(200))
    pace = Latency(ttft_s=0.2, tokens_per_s=150)  # about 250 tokens: well over a second
    llm_server.add_rule(always(), Reply.text(paragraph, latency=pace))
    child = spawn_qshell(llm_server, project)
    child.expect("for commands, Ctrl-D to exit")
    child.wait_prompt()
    child.submit("explain at length")
    child.expect(r"\bw30\b")
    assert "w199" not in child.text  # the start is shown before the end has arrived
    child.expect(r"\bw199\b")
    child.wait_prompt()
    child.send("\x04")
    assert child.finish() == 0


def test_a_shell_result_is_shown_whole_up_to_a_screenful_and_expand_shows_the_rest(
    llm_server, project
):
    llm_server.add_rule(has_tool_result("[exit code: 0]"), Reply.text("there it is"))
    llm_server.add_rule(
        lambda request: "long" in request.last_user_text,
        Reply.tool_calls([ToolCallSpec("shell", {"command": "seq 1000 1200"})]),
    )
    llm_server.add_rule(always(), Reply.tool_calls([ToolCallSpec("shell", {"command": "seq 12"})]))
    child = spawn_qshell(llm_server, project)
    child.expect("for commands, Ctrl-D to exit")
    child.wait_prompt()
    child.submit("show me the numbers")
    child.expect("there it is")
    child.wait_prompt()
    shown = child.text[child.text.index("seq 12") :]
    assert re.findall(r"^ +(?:⎿ ok: )?(\d+)$", shown, re.MULTILINE) == [
        str(n) for n in range(1, 13)
    ]
    assert "more lines" not in shown
    child.submit("now the long list")
    child.expect(r"… \d+ more lines · /expand shows them")
    child.wait_prompt()
    assert not re.search(r"^ +1200$", child.text, re.MULTILINE)
    child.submit("/expand")
    child.expect(r"\n +1200\s")
    child.wait_prompt()
    child.send("\x04")
    assert child.finish() == 0
    assert len(llm_server.requests) == 4  # /expand never reaches the model


def test_continue_says_it_resumed_and_shows_the_last_exchange(llm_server, project):
    llm_server.add_rule(always(), Reply.text("The build uses make and a Python script."))
    first = run_qshell(
        "-p", "how is this built?", cwd=project, env=provider_env(llm_server, "openai")
    )
    assert first.code == 0, first.stderr
    child = spawn_qshell(llm_server, project, "--continue")
    child.expect("for commands, Ctrl-D to exit")
    child.expect(r"resumed session [0-9a-f-]+ \(2 messages\)")
    child.expect("you: how is this built\\?")
    child.expect("qshell: The build uses make and a Python script.")
    child.wait_prompt()
    child.send("\x04")
    assert child.finish() == 0


def toolbar(child) -> str:
    """The bottom toolbar's line on the emulated screen."""
    child.settle()
    return next(line.strip() for line in child.screen() if line.strip().startswith("m1 ·"))


def test_after_continue_the_toolbar_counts_from_the_resumed_sessions_figures(llm_server, project):
    """Not "tokens 0 in (? cached)": the resumed session's own use so far, and /stats
    agrees; a new session shows no figures before its first round."""
    llm_server.add_rule(always(), Reply.text("The build uses make."))
    first = run_qshell(
        "-p",
        "how is this built?",
        "-o",
        "json",
        cwd=project,
        env=provider_env(llm_server, "openai"),
    )
    assert first.code == 0, first.stderr
    used = first.json()["usage"]
    child = spawn_qshell(llm_server, project, "--continue", answer_cpr=True)
    child.expect(r"resumed session")
    child.wait_prompt()
    assert toolbar(child) == (
        f"m1 · default · tokens {used['prompt_tokens']:,} in ({used['cached_tokens']:,} cached) · "
        f"{used['completion_tokens']:,} out · /help"
    )
    child.submit("/stats")
    child.expect("model rounds: 1")
    child.wait_prompt()
    child.send("\x04")
    assert child.finish() == 0
    fresh = spawn_qshell(llm_server, project, answer_cpr=True)
    fresh.wait_prompt()
    assert toolbar(fresh) == "m1 · default · /help"
    fresh.send("\x04")
    assert fresh.finish() == 0


def test_the_readmes_test_command_installs_what_it_needs():
    """After the README's set-up (`pip install -e '.[local]'`), its test command must work:
    it installs the test extra itself before running pytest."""
    section = README.read_text().split("## Run the tests", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```sh\n(.*?)```", section, re.DOTALL)
    assert block is not None
    commands = block.group(1)
    install = re.search(r"pip install -e '?\.\[[^\]]*test[^\]]*\]'?", commands)
    assert install is not None and install.start() < commands.index("python -m pytest -q")


CI = README.parent / ".ci" / "run"


def test_ci_runs_the_readmes_commands_as_written_the_tests_first_with_nothing_more():
    """.ci/run reads the commands from the README (its `readme_commands`), and nothing is
    installed in the fresh venv of its first step before the README's test commands run."""
    script = CI.read_text()
    function = re.search(r"^readme_commands\(\) \{\n.*?^\}\n", script, re.DOTALL | re.MULTILINE)
    assert function is not None
    for heading in ("Set up and run", "Run the tests"):
        section = README.read_text().split(f"\n## {heading}\n", 1)[1].split("\n## ", 1)[0]
        block = re.search(r"```sh\n(.*?)```", section, re.DOTALL)
        assert block is not None
        shown = subprocess.run(
            ["bash", "-c", f'{function.group(0)}readme_commands "{heading}"'],
            cwd=README.parent,
            capture_output=True,
            text=True,
            check=True,
        )
        assert shown.stdout == block.group(1)
    first_step = script.split("\nfresh_venv\n", 1)[1].split('bash -euo pipefail -c "$TESTS"')[0]
    assert "pip" not in first_step and "install" not in first_step


def test_with_only_the_test_extra_the_tests_of_the_others_skip_saying_why(tmp_path):
    """The README's test command after its test install: the model and ACP tests skip, and
    the run's end names the missing extra of each; the ACP starts that need no SDK run."""
    env = {**os.environ, **without_packages(tmp_path, *LOCAL_EXTRA, *ACP_EXTRA)}
    env.pop("QSHELL_REQUIRE_LOCAL_MODEL", None)
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "tests/local", "tests/acp/test_start.py"],
        cwd=README.parent,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stdout[-3000:]
    skipped = [line for line in run.stdout.splitlines() if line.startswith("SKIPPED")]
    assert any(
        "the `local` extra (xllamacpp, the bundled model's parts) is not" in s for s in skipped
    )
    assert any("the `acp` extra (agent-client-protocol) is not installed" in s for s in skipped)
    assert re.search(r"\n2 passed, \d+ skipped", run.stdout)  # the starts needing no SDK


def test_help_in_the_repl_keeps_its_columns_and_wraps_instead_of_cutting(llm_server, project):
    child = spawn_qshell(llm_server, project)
    child.expect("for commands, Ctrl-D to exit")
    child.wait_prompt()
    child.child.setwinsize(40, 100)
    child.submit("/help")
    child.expect(r"/model \[--fast\] \[name\] {3,}show")  # the usage column stays padded
    child.expect("Ctrl-C twice on an")
    child.expect("empty line exits")  # the key line is wrapped at 100 columns, not cut
    child.wait_prompt()
    child.send("\x04")
    assert child.finish() == 0
    assert "…" not in child.text.split("/help", 1)[1].split("resume it with")[0]
