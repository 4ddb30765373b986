"""Suggestion alternatives in the full REPL and in plain mode (pexpect) against the scripted
server: one prediction gives three candidates; the first shows as ghost text with `1/3` in
the key hint, Alt-] and Alt-[ cycle through them, and the speculation follows the one shown
once it has stayed on screen for the suggestion delay (the old run is aborted, the new one
started, a gated one never). Accepting a cycled-to candidate runs its speculated answer and
telemetry records its index. Typing the start of another candidate switches to it. Plain
mode lists them as `.1 .2 .3`, and `.2` submits the second. A separate suggestion request
returns its candidates as a JSON list the same way, and `suggestions.alternatives: 1`
offers one."""

from __future__ import annotations

import json
import re
from pathlib import Path

from qshell.agent.prediction import CLOSE, OPEN
from qshell.followup.suggestion import SUGGESTION_MARKER
from qshell.telemetry import EVENTS_FILENAME, TELEMETRY_DIRNAME, read_events
from tests.e2e.helpers import run_qshell
from tests.e2e.pty import Term, spawn_qshell
from tests.fakes.llm_server import Reply, ScriptedLLMServer, ToolCallSpec, always, has_tool_result
from tests.fakes.llm_server import last_user_text_contains as asks
from tests.waiting import wait_until

FIRST, SECOND, THIRD = "run the tests", "commit this", "show the diff"
GUESSES = [(FIRST, 0.9), (SECOND, 0.8), (THIRD, 0.2)]  # the third is below the gate
READ = ToolCallSpec("read_file", {"path": "hello.txt"})  # a suggestion needs two answers
ANSWERS = {FIRST: "all 12 tests pass", SECOND: "committed as abc123", THIRD: "no changes yet"}


def guesses_json(guesses: list[tuple[str, float]]) -> str:
    return json.dumps([{"text": t, "confidence": c} for t, c in guesses])


def events(home: Path, kind: str) -> list[dict]:
    path = home / "qshell" / "state" / TELEMETRY_DIRNAME / EVENTS_FILENAME
    return [e for e in read_events(path) if e.get("event") == kind]


def prompt_line(child: Term) -> str:
    """The prompt's line as the emulated screen shows it now ("" before there is one)."""
    child.settle(0.05)
    lines = [line for line in child.screen() if line.startswith(">")]
    return lines[-1] if lines else ""


def shows(child: Term, *parts: str, timeout_s: float = 10.0) -> None:
    """Wait until the prompt's line on the emulated screen shows every one of `parts` (the
    ghost text and the key hint are redrawn in place, so the raw output will not do)."""

    def drawn() -> bool:
        line = prompt_line(child)
        return bool(line) and all(part in line for part in parts)

    assert wait_until(drawn, timeout_s), "\n".join(child.screen())


def prompts_sent(server: ScriptedLLMServer, text: str) -> int:
    return [r.last_user_text for r in server.requests].count(text)


def script(server: ScriptedLLMServer, answer: str) -> None:
    for prompt, reply in ANSWERS.items():
        server.add_rule(asks(prompt), Reply.text(reply))
    server.add_rule(has_tool_result(), Reply.text(answer))
    server.add_rule(always(), Reply.tool_calls([READ]))


def folded() -> str:
    return f"it says hello\n\n{OPEN}{guesses_json(GUESSES)}{CLOSE}"


def started(server: ScriptedLLMServer, project: Path, *args: str, **env: str) -> Term:
    extra = {"QSHELL_SUGGESTIONS": "1", "QSHELL_SPECULATION": "1", **env}
    child = spawn_qshell(server, project, *args, extra_env=extra)
    child.expect("for commands, Ctrl-D to exit")
    child.wait_prompt()
    child.submit("read hello.txt")
    child.expect("it says hello")
    return child


def test_alt_bracket_cycles_and_the_speculation_follows_the_candidate_shown(
    llm_server, project, isolated_home
):
    script(llm_server, folded())
    child = started(llm_server, project)
    shows(child, FIRST, "1/3")
    assert wait_until(lambda: prompts_sent(llm_server, FIRST) == 1)
    child.send("\x1b]")  # Alt-]
    shows(child, SECOND, "2/3")
    assert wait_until(lambda: prompts_sent(llm_server, SECOND) == 1)  # after the delay
    child.send("\t")
    child.submit("")
    child.expect(ANSWERS[SECOND])
    child.wait_prompt()
    child.send("\x04")
    assert child.finish() == 0
    assert prompts_sent(llm_server, SECOND) == 1  # the speculated answer was the turn
    [accepted] = [e for e in events(isolated_home, "suggestion") if e["outcome"] == "accepted"]
    assert (accepted["index"], accepted["candidates"], accepted["method"]) == (1, 3, "tab")
    runs = events(isolated_home, "speculation")
    assert {"aborted", "accepted"} <= {e["outcome"] for e in runs}
    assert any(e.get("reason") == "replaced" for e in runs)
    assert "confidence" not in child.text and "next-prompt" not in child.text
    stats = run_qshell("stats", "--json", cwd=project).json()
    assert stats["accepted_by_index"] == {"1": 1}
    assert "accepted by guess" in run_qshell("stats", cwd=project).stdout


def test_alt_open_bracket_goes_back_and_a_gated_candidate_is_not_speculated(
    llm_server, project, isolated_home
):
    script(llm_server, folded())
    child = started(llm_server, project)
    shows(child, FIRST)
    child.send("\x1b[")  # Alt-[ from the first wraps to the third
    shows(child, THIRD, "3/3")
    assert wait_until(lambda: len(events(isolated_home, "speculation_gate")) == 2)
    child.settle(0.6)
    assert prompts_sent(llm_server, THIRD) == 0  # confidence 0.2: below the gate
    gates = events(isolated_home, "speculation_gate")
    assert [(e["confidence"], e["gated"]) for e in gates] == [(0.9, False), (0.2, True)]
    child.send("\x1b")  # a lone Esc still dismisses
    child.settle(0.3)
    child.send("\x04")
    assert child.finish() == 0
    dismissed = [e for e in events(isolated_home, "suggestion") if e["outcome"] == "ignored"]
    assert [(e["reason"], e["index"]) for e in dismissed] == [("dismissed", 2)]
    stats = run_qshell("stats", cwd=project).stdout
    assert re.search(r"held back by confidence +1/2 \(50\.0%\)", stats)


def test_typing_the_start_of_another_candidate_shows_that_one(llm_server, project):
    script(llm_server, folded())
    child = started(llm_server, project)
    shows(child, FIRST)
    child.send("sh")
    shows(child, "> show the diff")
    child.send("\t")
    child.submit("")
    child.expect(ANSWERS[THIRD])
    child.wait_prompt()
    child.send("\x04")
    assert child.finish() == 0


def test_plain_mode_lists_the_candidates_and_dot_two_submits_the_second(
    llm_server, project, isolated_home
):
    script(llm_server, folded())
    extra = {"QSHELL_SUGGESTIONS": "1", "QSHELL_SPECULATION": "1"}
    child = spawn_qshell(llm_server, project, term="dumb", extra_env=extra)
    child.expect(r"\n> ")
    child.send("read hello.txt\r")
    child.expect("it says hello")
    child.expect(
        rf"\(suggestions: \.1 {FIRST} · \.2 {SECOND} · \.3 {THIRD} — enter \.1, \.2 or \.3 to use one\)"
    )
    child.send(".2\r")
    child.expect(ANSWERS[SECOND])
    child.expect(r"\n> ")
    child.send("\x04")
    assert child.finish() == 0
    assert "\x1b" not in child.raw
    [accepted] = [e for e in events(isolated_home, "suggestion") if e["outcome"] == "accepted"]
    assert (accepted["index"], accepted["method"]) == (1, "dot")


def test_a_suggestion_request_returns_its_candidates_as_a_json_list(llm_server, project):
    llm_server.add_rule(
        asks(SUGGESTION_MARKER), Reply.text(guesses_json([(FIRST, 0.9), (SECOND, 0.7)]))
    )
    script(llm_server, "it says hello")  # no prediction line: a separate request
    child = started(llm_server, project)
    shows(child, FIRST, "1/2")
    child.send("\x1b]")
    shows(child, SECOND, "2/2")
    child.send("\x04")
    assert child.finish() == 0


def test_at_70_columns_a_long_guess_keeps_a_shorter_key_hint_beside_it(llm_server, project):
    long = "run the tests and summarise the failures"
    script(llm_server, f"it says hello\n\n{OPEN}{guesses_json([(long, 0.9), *GUESSES])}{CLOSE}")
    extra = {"QSHELL_SUGGESTIONS": "1", "QSHELL_SPECULATION": "0"}
    child = spawn_qshell(llm_server, project, extra_env=extra, columns=70)
    child.expect("for commands, Ctrl-D to exit")
    child.wait_prompt()
    child.submit("read hello.txt")
    child.expect("it says hello")
    shows(child, long, "⇥ Tab · Alt-] 1/3 · Esc")  # the whole hint would not fit
    assert len(prompt_line(child)) <= 70
    child.send("\x04")
    assert child.finish() == 0


def test_with_alternatives_set_to_one_there_is_nothing_to_cycle(llm_server, project):
    script(llm_server, folded())
    child = started(llm_server, project, QSHELL_SUGGESTIONS__ALTERNATIVES="1")
    shows(child, FIRST, "Tab fills · Esc")  # no count in the hint
    child.send("\x1b]")
    child.settle(0.6)
    assert SECOND not in "\n".join(child.screen())
    shows(child, FIRST)
    child.send("\x04")
    assert child.finish() == 0


def test_help_names_the_keys_that_cycle(llm_server, project):
    child = spawn_qshell(llm_server, project)
    child.expect("for commands, Ctrl-D to exit")
    child.wait_prompt()
    child.submit("/help")
    child.expect(r"Alt-\] / Alt-\[ show its alternatives")
    child.send("\x04")
    assert child.finish() == 0


def test_with_a_prefix_typed_the_hint_counts_and_alt_cycles_only_the_guesses_that_fit(
    llm_server, project
):
    guesses = [(FIRST, 0.9), (SECOND, 0.5), ("run the linter", 0.3)]
    script(llm_server, f"it says hello\n\n{OPEN}{guesses_json(guesses)}{CLOSE}")
    child = started(llm_server, project)
    shows(child, FIRST, "1/3")
    child.send("run")
    shows(child, "> run the tests", "1/2")
    child.send("\x1b]")
    shows(child, "> run the linter", "2/2")
    child.send("\x1b]")
    shows(child, "> run the tests", "1/2")  # "commit this" does not fit what is typed
    child.send("\x15\x04")  # clear the line, then leave
    assert child.finish() == 0
