"""A sloppy or hostile model's guesses, met the way a user meets them (pexpect, the scripted
server): a guess carrying escape sequences or other control characters never reaches the
screen, a guess list cut off inside its JSON offers the guesses it completed (never the raw
JSON), a slash command that throws work away is never offered, a prediction whose JSON list
the model spread over several lines is still hidden and read, and `.N` naming no candidate
asks again instead of sending `.N` to the model. Also what held: the REPL's arrow keys,
history, a bracketed paste holding `[` and a lone Esc still work with Alt-[ recognised."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from qshell.agent.prediction import CLOSE, OPEN
from qshell.followup.suggestion import SUGGESTION_MARKER
from tests.acp.raw import RawAgent
from tests.acp.sdk import needs_sdk
from tests.e2e.helpers import main_requests, provider_env, run_qshell
from tests.e2e.pty import Term, spawn_qshell
from tests.e2e.test_alternatives_repl import events, prompt_line, shows
from tests.fakes.llm_server import Reply, ScriptedLLMServer, ToolCallSpec, always, has_tool_result
from tests.fakes.llm_server import last_user_text_contains as asks
from tests.waiting import wait_until

READ = ToolCallSpec("read_file", {"path": "hello.txt"})  # a suggestion needs two answers
PLAIN = {"QSHELL_SUGGESTIONS": "1", "QSHELL_SPECULATION": "1"}


def answered(server: ScriptedLLMServer, answer: str, **replies: str) -> None:
    """The first prompt reads a file, then `answer`; each prompt in `replies` gets its reply."""
    for prompt, reply in replies.items():
        server.add_rule(asks(prompt), Reply.text(reply))
    server.add_rule(has_tool_result(), Reply.text(answer))
    server.add_rule(always(), Reply.tool_calls([READ]))


def predicting(*guesses: str) -> str:
    listed = json.dumps([{"text": g, "confidence": 0.9} for g in guesses])
    return f"it says hello\n\n{OPEN}{listed}{CLOSE}"


def plain(server: ScriptedLLMServer, project: Path) -> Term:
    child = spawn_qshell(server, project, term="dumb", extra_env=PLAIN)
    child.expect(r"\n> ")
    child.send("read hello.txt\r")
    child.expect("it says hello")
    return child


def main_prompts(server: ScriptedLLMServer) -> list[str]:
    return [r.last_user_text for r in main_requests(server)]


def test_a_guess_with_escape_or_control_characters_never_reaches_the_screen(llm_server, project):
    answered(
        llm_server,
        predicting(
            "run \x1b[2J\x1b[31mthe tests",
            "commit \u202ethis now",
            "show\x07 the diff",
            "lint it all",
        ),
        **{"lint it all": "no lint errors"},
    )
    child = plain(llm_server, project)
    child.expect(r"\(suggestion: lint it all — enter \. to use it\)")
    child.send(".\r")
    child.expect("no lint errors")
    child.expect(r"\n> ")
    child.send("\x04")
    assert child.finish() == 0
    assert "\x1b" not in child.raw and "\x07" not in child.raw and "\u202e" not in child.raw


def test_a_guess_list_cut_off_inside_its_json_offers_the_guesses_it_completed(llm_server, project):
    cut = '[{"text": "run the tests", "confidence": 0.9}, {"text": "commit th'
    llm_server.add_rule(asks(SUGGESTION_MARKER), Reply.text(cut))
    answered(llm_server, "it says hello", **{"run the tests": "all 12 tests pass"})
    child = plain(llm_server, project)
    child.expect(r"\(suggestion: run the tests — enter \. to use it\)")
    child.send(".\r")
    child.expect("all 12 tests pass")
    child.send("\x04")
    assert child.finish() == 0
    assert '"text"' not in child.text and "confidence" not in child.text


def test_a_cut_off_json_object_is_never_offered_as_words(llm_server, project):
    llm_server.add_rule(asks(SUGGESTION_MARKER), Reply.text('{"suggestion": "run the te'))
    answered(llm_server, "it says hello")
    child = plain(llm_server, project)
    child.settle(1.5)  # the suggestion delay, and more
    child.send("\x04")
    assert child.finish() == 0
    assert "suggestion" not in child.text.split("it says hello", 1)[1]


def test_a_command_that_throws_the_session_away_is_never_offered(llm_server, project):
    answered(
        llm_server,
        predicting("/clear", "/undo", "/clear and start over"),
        **{"run the tests": "all 12 tests pass"},
    )
    child = plain(llm_server, project)
    child.settle(1.5)
    child.send("\x04")
    assert child.finish() == 0
    assert "(suggestion" not in child.text
    assert "/clear" not in child.text and "/undo" not in child.text


def test_a_prediction_spread_over_lines_is_hidden_and_still_offered(llm_server, project):
    guesses = [
        {"text": "run the tests", "confidence": 0.9},
        {"text": "commit this", "confidence": 0.4},
    ]
    spread = f"it says hello\n\n{OPEN}\n{json.dumps(guesses, indent=2)}\n{CLOSE}"
    answered(llm_server, spread, **{"commit this": "committed as abc123"})
    child = plain(llm_server, project)
    child.expect(r"\(suggestions: \.1 run the tests · \.2 commit this — enter \.1 or \.2")
    child.send(".2\r")
    child.expect("committed as abc123")
    child.send("\x04")
    assert child.finish() == 0
    assert "next-prompt" not in child.text and "confidence" not in child.text


def test_print_mode_and_stream_json_never_show_a_spread_guess_list(llm_server, project):
    guesses = [{"text": "run the tests", "confidence": 0.9}, {"text": "commit this"}]
    spread = f"still here\n{OPEN}\n{json.dumps(guesses, indent=2)}\n{CLOSE}"
    llm_server.add_rule(asks("and now"), Reply.text(spread))
    answered(llm_server, predicting("run the tests"))
    child = plain(llm_server, project)  # an interactive session: its answers predict
    child.expect(r"\(suggestion: run the tests")
    child.send("\x04")
    assert child.finish() == 0
    env = provider_env(llm_server, "openai")
    printed = run_qshell("-p", "--continue", "and now", cwd=project, env=env)
    assert (printed.code, printed.stdout.strip()) == (0, "still here"), printed.stderr
    streamed = run_qshell("-p", "--continue", "and now", "-o", "stream-json", cwd=project, env=env)
    assert streamed.code == 0, streamed.stderr
    assert "still here" in streamed.stdout
    for leak in ("next-prompt", "next_prompt", "confidence", "commit this"):
        assert leak not in streamed.stdout


@pytest.mark.acp
@needs_sdk  # resuming over ACP
def test_an_acp_client_never_sees_a_guess_list_replayed_or_streamed(llm_server, project, tmp_path):
    guesses = [{"text": "run the tests", "confidence": 0.9}, {"text": "commit this"}]
    spread = f"\n{OPEN}\n{json.dumps(guesses, indent=2)}\n{CLOSE}"
    llm_server.add_rule(asks("and now"), Reply.text("still here" + spread))
    answered(llm_server, "it says hello" + spread)
    child = plain(llm_server, project)  # an interactive session: its answers predict
    child.expect(r"\(suggestions: \.1 run the tests")
    child.send("\x04")
    child.expect(r"resume it with: qshell --resume (\S+)")
    assert child.finish() == 0
    sid = re.findall(r"qshell --resume (\S+)", child.text)[-1]
    agent = RawAgent(llm_server, project.resolve(), tmp_path / "agent.err")
    agent.call("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
    agent.call("session/load", {"cwd": str(project.resolve()), "sessionId": sid, "mcpServers": []})
    prompt = {"sessionId": sid, "prompt": [{"type": "text", "text": "and now"}]}
    assert agent.call("session/prompt", prompt) == {"stopReason": "end_turn"}
    said = "".join(u["content"]["text"] for u in agent.updates("agent_message_chunk"))
    assert agent.close() == 0
    assert "it says hello" in said and "still here" in said
    for leak in ("next-prompt", "confidence", "commit this", "[", "{"):
        assert leak not in said


@pytest.mark.parametrize("key", [".3", ".9"])
def test_a_dot_number_naming_no_candidate_asks_again(llm_server, project, key):
    answered(
        llm_server,
        predicting("run the tests", "commit this"),
        **{"commit this": "committed as abc123"},
    )
    child = plain(llm_server, project)
    child.expect(r"enter \.1 or \.2 to use one\)")
    child.send(f"{key}\r")
    child.expect(rf"no suggestion {key}")
    child.expect(r"\n> ")
    child.send(".2\r")
    child.expect("committed as abc123")
    child.send("\x04")
    assert child.finish() == 0
    assert key not in main_prompts(llm_server)


def test_a_consequential_second_guess_never_asked_for_is_dropped_alone(llm_server, project):
    answered(llm_server, predicting("run the tests", "push the tag too"))
    child = plain(llm_server, project)
    child.expect(r"\(suggestion: run the tests — enter \. to use it\)")
    child.send("\x04")
    assert child.finish() == 0
    assert "push the tag" not in child.text
    assert "push the tag too" not in main_prompts(llm_server)


def test_a_consequential_guess_cycled_to_is_marked_and_speculated_reads_only(
    llm_server, project, isolated_home
):
    touched = project / "pushed.txt"
    push = ToolCallSpec("shell", {"command": f"touch {touched.name}"})
    llm_server.add_rule(asks("push the tag too"), Reply.tool_calls([push]))
    answered(llm_server, predicting("run the tests", "push the tag too"))
    child = spawn_qshell(llm_server, project, extra_env=PLAIN)
    child.expect("for commands, Ctrl-D to exit")
    child.wait_prompt()
    child.submit("read hello.txt, then I will be pushing the branch")
    child.expect("it says hello")
    shows(child, "run the tests", "1/2")
    assert "⚠" not in prompt_line(child)
    child.send("\x1b]")  # Alt-]
    shows(child, "push the tag too  ⚠ push", "2/2")
    assert wait_until(lambda: "push the tag too" in main_prompts(llm_server))
    child.settle(1.0)  # it ran up to its first call that is not a read, and stopped there
    assert not touched.exists()
    child.send("\x1b[")  # Alt-[: back to the first, unmarked
    shows(child, "run the tests", "1/2")
    assert "⚠" not in [line for line in child.screen() if line.startswith(">")][-1]
    child.send("\x04")
    assert child.finish() == 0
    assert not touched.exists()
    runs = [(e["boundary_type"], e["tools_executed"]) for e in events(isolated_home, "speculation")]
    assert ("bash", 0) in runs  # the push stopped before its shell call, even in the overlay


def test_typing_a_longer_guess_by_hand_never_runs_the_shorter_guess_speculated(
    llm_server, project, isolated_home
):
    short, longer = "run the tests", "run the tests again"
    answers = {longer: "ran them twice", short: "all 12 tests pass"}
    answered(llm_server, predicting(short, longer), **answers)
    child = repl(llm_server, project)
    shows(child, short, "1/2")
    assert wait_until(lambda: short in main_prompts(llm_server))  # the first is speculated
    child.send(longer)
    shows(child, f"> {longer}")
    child.send("\r")
    child.expect("ran them twice")
    child.wait_prompt()
    child.send("\x04")
    assert child.finish() == 0
    assert "all 12 tests pass" not in child.text
    [accepted] = [e for e in events(isolated_home, "suggestion") if e["outcome"] == "accepted"]
    assert (accepted["index"], accepted["method"]) == (1, "typed")
    runs = events(isolated_home, "speculation")
    assert ("aborted", "typed") in [(e["outcome"], e["reason"]) for e in runs]


def test_cycling_again_and_again_leaves_no_overlay_behind(llm_server, project, tmp_path):
    guesses = ("run the tests", "commit this", "show the diff")
    answered(llm_server, predicting(*guesses), **{g: f"done: {g}" for g in guesses})
    temp = tmp_path / "tmp"
    temp.mkdir()
    child = spawn_qshell(llm_server, project, extra_env={**PLAIN, "TMPDIR": str(temp)})
    child.expect("for commands, Ctrl-D to exit")
    child.wait_prompt()
    child.submit("read hello.txt")
    child.expect("it says hello")
    runs = dict.fromkeys(guesses, 0)
    for step in range(7):  # each one stays for the delay, so each is speculated in turn
        shown = guesses[step % 3]
        runs[shown] += 1
        shows(child, shown, f"{step % 3 + 1}/3")
        assert wait_until(lambda: main_prompts(llm_server).count(shown) == runs[shown])  # noqa: B023
        child.send("\x1b]" * 4)  # and quicker than the delay: only the last shown counts
    child.send("\x04")
    assert child.finish() == 0
    assert {g: main_prompts(llm_server).count(g) for g in guesses} == runs
    overlays = [p for p in temp.rglob("*") if p.name.startswith("overlay")]
    assert overlays == []


# -- what held: the keys around Alt-[ in the real REPL ---------------------------------------


def repl(server: ScriptedLLMServer, project: Path) -> Term:
    child = spawn_qshell(server, project, extra_env=PLAIN)
    child.expect("for commands, Ctrl-D to exit")
    child.wait_prompt()
    child.submit("read hello.txt")
    child.expect("it says hello")
    return child


def test_arrow_keys_and_history_work_while_a_suggestion_shows(llm_server, project):
    answered(llm_server, predicting("run the tests", "commit this"), **{"read it": "read again"})
    child = repl(llm_server, project)
    shows(child, "run the tests", "1/2")
    child.send("\x1b[A")  # Up: the last prompt comes back from history
    shows(child, "> read hello.txt")
    child.send("\x1b[D\x1b[D\x1b[D\x1b[D\x1b[D\x1b[D\x1b[D\x1b[D\x1b[D")  # Left ×9
    child.send("\x1b[3~")  # Delete the character under the cursor ("h")
    child.send("\x1b[F")  # End
    child.send("!")
    shows(child, "> read ello.txt!")
    child.send("\x15")  # Ctrl-U: the line is empty again and the suggestion comes back
    shows(child, "run the tests", "1/2")
    child.send("\x04")
    assert child.finish() == 0


def test_a_bracketed_paste_holding_brackets_is_typed_as_pasted(llm_server, project):
    answered(llm_server, predicting("run the tests", "commit this"), **{"[x]": "pasted ok"})
    child = repl(llm_server, project)
    shows(child, "run the tests")
    child.send("\x1b[200~fix a[0] and [x]\x1b[201~")
    shows(child, "> fix a[0] and [x]")
    child.send("\r")
    child.expect("pasted ok")
    child.wait_prompt()
    child.send("\x04")
    assert child.finish() == 0
    assert main_prompts(llm_server)[-1].startswith("fix a[0] and [x]")


def test_alt_open_bracket_then_esc_then_typed_brackets(llm_server, project):
    answered(llm_server, predicting("run the tests", "commit this"), **{"[y]": "typed ok"})
    child = repl(llm_server, project)
    shows(child, "run the tests", "1/2")
    child.send("\x1b[")  # Alt-[: the previous (wrapping to the last)
    shows(child, "commit this", "2/2")
    child.send("\x1b")  # a lone Esc dismisses (an Esc and a "[" within 50 ms are Alt-[)
    assert wait_until(lambda: "commit this" not in prompt_line(child))
    child.send("[")
    child.settle(0.2)
    child.send("y]")  # brackets typed one by one are text
    shows(child, "> [y]")
    child.send("\r")
    child.expect("typed ok")
    child.wait_prompt()
    child.send("\x04")
    assert child.finish() == 0
    assert main_prompts(llm_server)[-1].startswith("[y]")
