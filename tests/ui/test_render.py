"""The helpers both renderers share: argument summaries, excerpts, usage and cleaning."""

from __future__ import annotations

import io

from qshell.agent.events import HistoryCompacted, ToolFinished, ToolStarted
from qshell.llm.messages import Usage
from qshell.tools.base import ErrorType, ToolResult
from qshell.ui.render import (
    Renderer,
    call_label,
    clean,
    compaction_line,
    outcome,
    summarize_args,
    usage_line,
)
from qshell.ui.render_plain import PlainRenderer
from qshell.ui.render_rich import RichRenderer
from tests.ui.turns import DIFF, EDIT_ARGS, ask


def test_the_summary_is_the_most_telling_argument() -> None:
    assert summarize_args({"path": "src", "pattern": "needle"}) == "needle"
    assert summarize_args({"path": "a.py", "offset": 3}) == "a.py"
    assert summarize_args({"url": "https://x.org", "path": "p"}) == "https://x.org"
    assert summarize_args({"other": "value"}) == "value"
    assert summarize_args({"limit": 3}) == ""


def test_the_summary_is_one_line_and_cut_with_an_ellipsis() -> None:
    assert summarize_args({"command": "make\n  test"}) == "make test"
    assert summarize_args({"command": "x" * 100}) == "x" * 79 + "…"
    assert call_label("shell", {"command": "x" * 100}, ellipsis="...", width=30) == (
        "shell(" + "x" * 18 + "...)"
    )


def test_clean_keeps_newlines_and_tabs_and_drops_every_other_control_character() -> None:
    assert clean("a\r\nb\tc\x1b[1m\x07\x00\x7f\x9b\u0085d\n") == "a\nb\tc[1md\n"


def test_the_usage_line_says_unknown_when_the_server_did_not_report_cached_tokens() -> None:
    usage = Usage(prompt_tokens=1234, completion_tokens=5)
    assert usage_line(usage, 1, sep=" · ") == "tokens: 1,234 in (cached unknown) · 5 out · 1 round"


def test_the_compaction_line_names_the_reason_and_the_counts() -> None:
    assert compaction_line(HistoryCompacted("manual", 12, 2), arrow="→") == (
        "history compacted (manual): 12 → 2 messages"
    )


def test_an_edit_outcome_keeps_the_summary_line_and_the_diff() -> None:
    result = ToolResult(llm_content="Edited m.py (+1 -1 lines).\n\n" + DIFF, display=DIFF)
    shown = outcome(ToolFinished("c", "edit", result))
    assert shown.ok and shown.lines == ["Edited m.py (+1 -1 lines)."]
    assert shown.diff == DIFF.rstrip("\n").split("\n") and shown.diff_more == 0


def test_a_failed_outcome_shows_the_error_message_not_the_output() -> None:
    result = ToolResult.fail(ErrorType.NOT_FOUND, "src does not exist")
    shown = outcome(ToolFinished("c", "grep", result))
    assert not shown.ok and shown.lines == ["src does not exist"] and shown.diff == []


def test_a_shell_result_is_shown_whole_up_to_a_screenful_also_when_it_failed() -> None:
    output = "".join(f"line {n}\n" for n in range(30)) + "[exit code: 1]"
    result = ToolResult(llm_content=output, display=output)
    ok = outcome(ToolFinished("c", "shell", result), screen_lines=40)
    assert ok.ok and ok.lines == output.split("\n") and ok.more == 0
    failed = ToolResult.fail(ErrorType.NONZERO_EXIT, "command exited with code 1")
    failed = ToolResult(llm_content=output, display=output, error=failed.error)
    shown = outcome(ToolFinished("c", "shell", failed), screen_lines=20)
    assert not shown.ok and shown.lines[0] == "command exited with code 1"
    assert shown.lines[1:] == [f"line {n}" for n in range(14)] and shown.more == 17
    bare = ToolResult.fail(ErrorType.NONZERO_EXIT, "exit status 2")
    assert outcome(ToolFinished("c", "shell", bare)).lines == ["exit status 2"]


def test_expand_shows_the_last_cut_output_whole_in_both_renderers() -> None:
    output = "\n".join(f"row {n}" for n in range(100))
    for renderer, out in _renderers():
        renderer.expand()
        assert "no output was cut short" in out.getvalue()
        renderer.event(ToolStarted("s", "shell", {"command": "seq 100"}))
        renderer.event(ToolFinished("s", "shell", ToolResult(llm_content=output, display=output)))
        renderer.end_turn()
        assert "row 17" in out.getvalue() and "row 99" not in out.getvalue()
        assert "/expand shows them" in out.getvalue()
        renderer.expand()
        text = out.getvalue()
        assert [text.count(f"row {n}\n") for n in (17, 99)] == [2, 1], text


def _asked_edit(renderer: Renderer, diff: str) -> None:
    renderer.event(ask("edit", EDIT_ARGS, "edit changes files", preview=diff, call_id="e1"))
    renderer.event(ToolStarted("e1", "edit", EDIT_ARGS))
    result = ToolResult(llm_content="Edited m.py: replaced 1 occurrence.\n\n" + diff, display=diff)
    renderer.event(ToolFinished("e1", "edit", result))
    renderer.end_turn()


def _renderers() -> list[tuple[Renderer, io.StringIO]]:
    plain, rich = io.StringIO(), io.StringIO()
    return [(PlainRenderer(plain), plain), (RichRenderer(file=rich, width=80, environ={}), rich)]


def test_a_diff_the_permission_question_showed_is_not_shown_again_when_the_edit_lands() -> None:
    for renderer, out in _renderers():
        _asked_edit(renderer, DIFF)
        text = out.getvalue()
        assert text.count("+    return 2") == 1, text
        assert "Edited m.py: replaced 1 occurrence." in text


def test_a_diff_the_question_cut_short_is_shown_under_the_finished_edit() -> None:
    long_diff = "--- a/m.py\n+++ b/m.py\n@@ -1,200 +1,200 @@\n" + "".join(
        f"+line {n}\n" for n in range(200)
    )
    for renderer, out in _renderers():
        _asked_edit(renderer, long_diff)
        assert out.getvalue().count("+line 0") == 2, out.getvalue()


def test_a_diff_is_shown_once_when_no_question_was_asked() -> None:
    for renderer, out in _renderers():
        renderer.event(ToolStarted("e2", "edit", EDIT_ARGS))
        renderer.event(ToolFinished("e2", "edit", ToolResult(llm_content="Edited.", display=DIFF)))
        renderer.end_turn()
        assert out.getvalue().count("+    return 2") == 1
