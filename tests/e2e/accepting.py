"""Helpers for REPL tests (pexpect, scripted server) of accepting a speculated command.

`speculating` starts qshell two turns in with "tidy up" suggested, whose speculation runs
one shell command; `finished` waits until that speculation got its command's result and
was answered; `apply_on_accept` accepts it (Tab, Enter), checks the apply question lists
what it should, answers `a` and waits for the replayed answer; `quit_repl` leaves with
Ctrl-D; `speculation_events` reads what qshell recorded of each speculation's end
(local telemetry: its status, boundary type); `asked_live` checks that a speculated
command that stopped at a boundary is asked about on accept as a live turn asks. `MODES` holds the command-line arguments of the approval modes in which such a
command asks on accept (default and auto-edit), for `pytest.mark.parametrize`.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from qshell.dirs import Dirs
from qshell.telemetry import Telemetry, read_events
from tests.e2e.pty import Term
from tests.e2e.test_speculation_repl import READ, first_turn, speculated, start, suggests
from tests.fakes.llm_server import Reply, Rule, ToolCallSpec, always, has_tool_result
from tests.fakes.llm_server import last_user_text_contains as asks
from tests.overlay.test_overlay import snapshot
from tests.waiting import wait_until

PROMPT, ANSWER = "tidy up", "all tidy"
MODES = {"default": (), "auto-edit": ("--approval-mode", "auto-edit")}


def speculating(
    llm_server,
    project: Path,
    command: str,
    marker: str,
    *args: str,
    env: dict[str, str] | None = None,
    prompt: str = PROMPT,
) -> tuple[Term, Rule, Rule]:
    """Two turns in, `prompt` is suggested and speculated: its one call runs `command`,
    whose output holds `marker`, and the answer after it is "all tidy". Rules added before
    this call answer first."""
    suggests(llm_server, prompt)
    answer = llm_server.add_rule(has_tool_result(marker), Reply.text(ANSWER))
    call_ = ToolCallSpec("shell", {"command": command})
    asked = llm_server.add_rule(asks(prompt), Reply.tool_calls([call_]))
    llm_server.add_rule(has_tool_result(), Reply.text("it says hello"))
    llm_server.add_rule(always(), Reply.tool_calls([READ]))
    child = start(llm_server, project, *args, env=env)
    first_turn(child)
    child.expect(prompt)
    return child, answer, asked


def finished(llm_server, child: Term, answer: Rule) -> None:
    assert wait_until(lambda: answer.hits > 0, 60.0), "the speculation never got its result"
    time.sleep(0.5)  # the speculation's last round is answered; let it finish


def apply_on_accept(child: Term, *listed: str) -> None:
    """Tab, Enter on the suggestion; the question names the command and lists each of
    `listed` (regexes, in order); `a` applies, and the replayed answer shows."""
    child.send("\t")
    child.submit("")
    child.expect("ran 1 command you were not asked about")
    for line in listed:
        child.expect(line)
    child.expect("Use it")
    child.submit("a")
    child.expect(ANSWER)
    child.expect("saved")
    child.wait_prompt()


def quit_repl(child: Term) -> None:
    child.send("\x04")
    assert child.finish() == 0


def speculation_events() -> list[dict[str, Any]]:
    """The `speculation` events the qshell runs of this test recorded (its state dir)."""
    path = Telemetry.for_state_dir(Dirs.from_environ(os.environ).state).path
    assert path is not None
    return [e for e in read_events(path) if e["event"] == "speculation"]


def asked_live(
    llm_server,
    project: Path,
    mode: tuple[str, ...],
    command: str,
    marker: str,
    answer: str,
    env: dict[str, str] | None = None,
) -> None:
    """`command` (printing `marker`) is speculated, but stops there, a boundary: on Tab,
    Enter it is asked about as a live turn asks, with no apply question, and nothing of it
    is applied before the user's `answer` runs it (y) or denies it (n)."""
    before = snapshot(project)
    llm_server.add_rule(has_tool_result("denied this tool call"), Reply.text("left it alone"))
    child, _, _ = speculating(llm_server, project, command, marker, *mode, env=env)
    speculated(llm_server, PROMPT)
    child.send("\t")
    child.submit("")
    child.expect(r"Allow shell\?")  # the speculated command never stood
    assert "Use it?" not in child.text
    assert snapshot(project) == before
    child.submit(answer)
    child.expect("left it alone" if answer == "n" else "all tidy")
    child.wait_prompt()
    quit_repl(child)
    [ended] = speculation_events()
    assert (ended["status"], ended["boundary_tool"]) == ("boundary", "shell")
