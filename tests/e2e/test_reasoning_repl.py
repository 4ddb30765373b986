"""A reasoning model in the REPL, the way its user sees it: recorded streams (DeepSeek's
deepseek-reasoner greeting, gpt-4o cut at the output limit; sources in
tests/llm/streams/corpus.json) replayed byte for byte to the real `qshell` in a
pseudo-terminal. The reasoning is one folded `∴` line above the answer, `/expand` shows it
whole, `showReasoning: false` leaves only the answer, and an answer cut off says so."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.pty import Term, spawn_qshell
from tests.fakes.replay import ReplayServer

STREAMS = Path(__file__).resolve().parents[1] / "llm" / "streams"
REASONER = (STREAMS / "deepseek" / "reasoner_hello.sse").read_bytes()
CUT_OFF = (STREAMS / "openai" / "gpt4o_length.sse").read_bytes()
ANSWER = "Hello there! 😊 How can I help you today?"
THOUGHT_START = 'Hmm, the user just said "Hello".'
THOUGHT_LATER = "I'll avoid assumptions about their gender, location, or intent"
CUT_NOTE = "! the answer was cut off at the output limit"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    root.mkdir()
    return root


def qshell(
    server: ReplayServer,
    project: Path,
    *args: str,
    term: str = "xterm-256color",
    extra_env: dict[str, str] | None = None,
) -> Term:
    """The real qshell in a pseudo-terminal, talking to the replay server."""
    env = {
        "OPENAI_BASE_URL": server.url + "/v1",
        "OPENAI_API_KEY": "sk-test-replay",
        "OPENAI_MODEL": "deepseek-reasoner",
        "QSHELL_SUGGESTIONS": "0",
        "QSHELL_SPECULATION": "0",
    }
    return spawn_qshell(None, project, *args, term=term, extra_env={**env, **(extra_env or {})})


def line_of(lines: list[str], text: str) -> int:
    return next(i for i, line in enumerate(lines) if text in line)


def test_reasoning_is_one_folded_line_above_the_answer_and_expand_shows_it_all(project):
    with ReplayServer([REASONER, CUT_OFF]) as server:
        child = qshell(server, project)
        child.expect("for commands, Ctrl-D to exit")
        child.wait_prompt()
        child.submit("Hello")
        child.expect("How can I help you today")
        child.wait_prompt()
        child.settle()
        screen = child.screen()
        fold = line_of(screen, "∴ ")
        assert screen[fold].lstrip().startswith(f"∴ {THOUGHT_START}")
        assert screen[fold].endswith("· 9 lines · /expand shows them")
        assert fold < line_of(screen, ANSWER)
        assert THOUGHT_LATER not in child.text  # folded: only its first line was shown

        child.submit("/expand")
        child.expect("zero information")
        child.wait_prompt()
        child.settle()
        screen = child.screen()
        shown = screen[line_of(screen, "∴ reasoning") :]
        assert (
            shown[1].strip()
            == f"{THOUGHT_START} It's a simple greeting but I wonder if there's more to it."
        )
        assert any(THOUGHT_LATER in line for line in shown)

        child.submit("write the config as JSON")
        child.expect(CUT_NOTE)
        child.wait_prompt()
        child.settle()
        screen = child.screen()
        note = line_of(screen, CUT_NOTE)
        assert "raise maxTokens (QSHELL_MAX_TOKENS), or ask it to go on" in screen[note]
        assert screen[note + 1].startswith("tokens:")
        child.send("\x04")
        assert child.finish() == 0
        sent = [r.json() for r in server.requests]
    # the first turn's reasoning is not sent back in the next turn's request
    assert [m["role"] for m in sent[1]["messages"]][-3:] == ["user", "assistant", "user"]
    assert all("reasoning_content" not in m for m in sent[1]["messages"])


def test_show_reasoning_off_leaves_only_the_answer(project):
    with ReplayServer([REASONER]) as server:
        child = qshell(server, project, extra_env={"QSHELL_SHOW_REASONING": "0"})
        child.expect("for commands, Ctrl-D to exit")
        child.wait_prompt()
        child.submit("Hello")
        child.expect("How can I help you today")
        child.wait_prompt()
        child.submit("/expand")
        child.expect("no output was cut short")
        child.wait_prompt()
        child.send("\x04")
        assert child.finish() == 0
    assert "∴" not in child.text and "the user just said" not in child.text


@pytest.mark.parametrize(("term", "args"), [("dumb", ()), ("xterm-256color", ("--simple-prompt",))])
def test_the_plain_mode_folds_reasoning_expands_it_and_says_an_answer_was_cut(project, term, args):
    with ReplayServer([REASONER, CUT_OFF]) as server:
        child = qshell(server, project, *args, term=term)
        child.expect("for commands, Ctrl-D to exit")
        child.expect(r"\n> ")
        child.send("Hello\r")
        child.expect(r"(?m)^∴ Hmm, the user just said .* · 9 lines · /expand shows them$")
        child.expect("How can I help you today")
        child.expect(r"\n> ")
        child.send("/expand\r")
        child.expect(r"(?m)^reasoning:$")
        child.expect(r"(?m)^    Hmm, the user just said")
        child.expect(r"(?m)^    I'll avoid assumptions")
        child.expect(r"\n> ")
        child.send("write the config as JSON\r")
        child.expect(CUT_NOTE)
        child.expect(r"(?m)^tokens: ")
        child.expect(r"\n> ")
        child.send("\x04")
        assert child.finish() == 0
    assert "\x1b" not in child.raw
    text = child.text
    fold = text.index("∴ Hmm, the user just said")
    assert fold < text.index("Hello there!") < text.index("reasoning:")
    assert text.count(THOUGHT_LATER) == 1  # only /expand showed it
