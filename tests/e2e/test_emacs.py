"""qshell inside a real Emacs `M-x shell` (comint): the plain line mode, no escape codes.

Emacs runs in batch mode (`emacs --batch -Q`) and loads emacs_shell.el, which starts
`M-x shell` and plays a user's steps in it: `python -m qshell` typed at the bash prompt,
then prompts, answers to questions, C-c C-c and C-c C-d, each once the line before was
answered. Emacs gives the shell `TERM=dumb` and `INSIDE_EMACS`, as it does for every user.
Skipped when Emacs is not installed (.ci/run installs `emacs-nox`).
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.e2e.helpers import main_requests, provider_env, read_first
from tests.fakes.llm_server import (
    Reply,
    ScriptedLLMServer,
    ToolCallSpec,
    always,
    has_tool_result,
    last_user_text_contains,
)

pytestmark = pytest.mark.skipif(shutil.which("emacs") is None, reason="Emacs is not installed")
DRIVER = Path(__file__).with_name("emacs_shell.el")
QSHELL = f"{shlex.quote(sys.executable)} -m qshell"
SHELL_PROMPT = r"^sh\$ "
QSHELL_PROMPT = "^> "
STEP_SEPARATOR = "\x1f"  # ASCII unit separator: a regexp may hold a newline
EDIT = ToolCallSpec("edit", {"path": "hello.txt", "old_string": "hello", "new_string": "howdy"})


@dataclass
class Session:
    code: int  # Emacs's: 0 when every step's answer appeared, 3 when one never did
    buffer: str  # the *shell* buffer as the user sees it
    raw: str  # every string the shell's process sent, before comint touched it
    stderr: str

    def failure(self) -> str:
        return f"{self.stderr}\n--- buffer ---\n{self.buffer}"


def in_emacs_shell(
    server: ScriptedLLMServer,
    project: Path,
    steps: list[tuple[str, str]],  # text to type, then an Emacs regexp to wait for
    extra_env: dict[str, str] | None = None,
) -> Session:
    """Play `steps` (text to type, regexp to wait for) in `M-x shell`, started in `project`."""
    raw, dump = project.parent / "raw.txt", project.parent / "buffer.txt"
    env = {
        **os.environ,
        **provider_env(server, "openai"),
        "PS1": "sh$ ",
        "QSHELL_MAX_RETRIES": "0",
        "QSHELL_SUGGESTIONS": "0",
        "QSHELL_EMACS_STEPS": STEP_SEPARATOR.join(f"{t}\t{w}" for t, w in steps),
        "QSHELL_EMACS_RAW": str(raw),
        "QSHELL_EMACS_BUFFER": str(dump),
        **(extra_env or {}),
    }
    for name in ("INSIDE_EMACS", "NO_COLOR", "PROMPT_COMMAND", "TERM"):
        env.pop(name, None)
    proc = subprocess.run(
        ["emacs", "--batch", "-Q", "-l", str(DRIVER)],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    return Session(
        proc.returncode,
        dump.read_text() if dump.exists() else "",
        raw.read_text() if raw.exists() else "",
        proc.stderr,
    )


def test_m_x_shell_shows_the_answer_a_question_and_stats_with_no_escape_codes(llm_server, project):
    llm_server.add_rule(has_tool_result(), Reply.text("All **done**: hello became `howdy`."))
    read_first(llm_server, "hello.txt", then=EDIT)
    steps = [
        (QSHELL, QSHELL_PROMPT),
        ("change the greeting", "Allow edit[?]"),
        ("y", QSHELL_PROMPT),
        ("/stats", QSHELL_PROMPT),
        ("<EOF>", SHELL_PROMPT),
    ]
    session = in_emacs_shell(llm_server, project, steps)
    assert session.code == 0, session.failure()
    assert "+howdy world" in session.buffer  # the diff, in the question
    assert "All **done**: hello became `howdy`." in session.buffer
    assert "model rounds: 3" in session.buffer
    assert "resume it with: qshell --resume" in session.buffer
    assert "\x1b" not in session.raw and "\x1b" not in session.buffer
    assert "\r" not in session.buffer
    assert session.buffer.count("change the greeting") == 1  # typed once, never echoed back
    assert (project / "hello.txt").read_text() == "howdy world\n"


def test_c_c_c_c_in_m_x_shell_cancels_the_turn_and_the_next_one_is_answered(llm_server, project):
    llm_server.add_rule(last_user_text_contains("second"), Reply.text("the second answer"))
    rule = llm_server.add_rule(always(), Reply.text("the first words of a long answer " * 40))
    llm_server.hold(rule, after_first_chunk=True)
    steps = [
        (QSHELL, QSHELL_PROMPT),
        ("first", "^the "),  # the first chunk; the rest is held
        ("<INTERRUPT>", "cancelled"),
        ("second", "the second answer"),
        ("<EOF>", SHELL_PROMPT),
    ]
    session = in_emacs_shell(llm_server, project, steps)
    assert session.code == 0, session.failure()
    assert "\x1b" not in session.raw
    roles = [m["role"] for m in llm_server.requests[-1].body["messages"]]
    assert roles == ["system", "user", "user"]  # the cancelled turn left the history valid


def test_print_mode_in_m_x_shell_writes_plain_text(llm_server, project):
    llm_server.add_rule(always(), Reply.text("# Title\n\nSome **bold** text."))
    steps = [(f"{QSHELL} -p 'say it'", SHELL_PROMPT)]
    session = in_emacs_shell(llm_server, project, steps)
    assert session.code == 0, session.failure()
    assert "Some **bold** text." in session.buffer
    assert "\x1b" not in session.raw


def test_a_suggestion_in_m_x_shell_is_a_hint_line_and_a_dot_uses_it(llm_server, project):
    from qshell.followup.suggestion import SUGGESTION_MARKER

    llm_server.add_rule(last_user_text_contains(SUGGESTION_MARKER), Reply.text("run the tests"))
    llm_server.add_rule(last_user_text_contains("run the tests"), Reply.text("all green"))
    llm_server.add_rule(has_tool_result(), Reply.text("it says hello"))
    read = ToolCallSpec("read_file", {"path": "hello.txt"})
    llm_server.add_rule(always(), Reply.tool_calls([read]))
    steps = [
        (QSHELL, QSHELL_PROMPT),
        ("read hello.txt", "(suggestion: run the tests — enter [.] to use it)\n> "),
        (".", "all green"),
        ("<EOF>", SHELL_PROMPT),
    ]
    session = in_emacs_shell(llm_server, project, steps, {"QSHELL_SUGGESTIONS": "1"})
    assert session.code == 0, session.failure()
    assert "\x1b" not in session.raw
    lines = session.buffer.splitlines()
    [at] = [n for n, line in enumerate(lines) if "(suggestion: run the tests" in line]
    # on the waiting prompt's line, never under a stray bare prompt; a fresh prompt below
    assert lines[at] == "> (suggestion: run the tests — enter . to use it)"
    assert lines[at - 1].strip() != ">" and lines[at + 1].startswith("> ")
    mains = main_requests(llm_server)
    assert mains[-1].last_user_text == "run the tests"
