"""The print-mode renderer: text, json and stream-json from a fixed event sequence."""

from __future__ import annotations

import io
import json
from concurrent.futures import Future

from qshell.agent.events import (
    FailureKind,
    PermissionAnswer,
    PermissionRequested,
    RoundFinished,
    TextDelta,
    ToolFinished,
    ToolStarted,
    TurnFailed,
    TurnFinished,
)
from qshell.llm.messages import Usage
from qshell.tools.base import ErrorType, ToolResult
from qshell.ui.printer import OutputFormat, Printer

USAGE = Usage(prompt_tokens=30, completion_tokens=5, cached_tokens=None)
EVENTS = [
    RoundFinished(1, USAGE),
    ToolStarted("c1", "ls", {"path": "."}),
    ToolFinished("c1", "ls", ToolResult(llm_content="a.txt")),
    ToolStarted("c2", "read_file", {"path": "x"}),
    ToolFinished("c2", "read_file", ToolResult.fail(ErrorType.NOT_FOUND, "x does not exist")),
    TextDelta("The answer"),
    TextDelta(" is 42."),
    RoundFinished(2, USAGE),
    TurnFinished("The answer is 42.", USAGE + USAGE, 2),
]


def render(fmt: OutputFormat, events) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    clock = iter(range(1000, 2000)).__next__
    code = Printer(fmt, stdout=out, stderr=err, session_id="s1", model="m", clock=clock).run(events)
    return code, out.getvalue(), err.getvalue()


def test_text_prints_only_the_final_answer():
    assert render(OutputFormat.TEXT, EVENTS) == (0, "The answer is 42.\n", "")


def test_json_prints_one_object_with_the_documented_fields():
    code, out, err = render(OutputFormat.JSON, EVENTS)
    record = json.loads(out)
    assert code == 0 and err == ""
    assert record["result"] == "The answer is 42." and record["session_id"] == "s1"
    assert record["is_error"] is False and record["num_rounds"] == 2
    assert record["usage"] == {
        "prompt_tokens": 60,
        "completion_tokens": 10,
        "cached_tokens": None,
        "cache_creation_tokens": None,
        "reasoning_tokens": None,
        "known": True,
    }


def test_json_marks_usage_the_server_did_not_report_as_unknown():
    events = [TurnFinished(text="hi", usage=Usage(known=False), rounds=1)]
    _, out, _ = render(OutputFormat.JSON, events)
    assert json.loads(out)["usage"]["known"] is False


def test_stream_json_prints_one_typed_timestamped_event_per_line_ending_with_result():
    code, out, _ = render(OutputFormat.STREAM_JSON, EVENTS)
    assert code == 0
    lines = [json.loads(line) for line in out.splitlines()]
    assert [r["type"] for r in lines] == [
        "init",
        "tool_use",
        "tool_result",
        "tool_use",
        "tool_result",
        "message",
        "message",
        "result",
    ]
    assert all("timestamp" in r for r in lines)
    assert lines[2]["status"] == "success" and lines[4]["status"] == "error"
    assert lines[4]["error"] == "x does not exist"
    assert "".join(r["content"] for r in lines if r["type"] == "message") == "The answer is 42."
    assert lines[-1]["result"] == "The answer is 42." and lines[-1]["is_error"] is False


def test_a_failure_goes_to_stderr_after_what_arrived_and_keeps_stdout_parseable():
    failed = [TextDelta("par"), TurnFailed(FailureKind.AUTH, "The API key was rejected")]
    code, out, err = render(OutputFormat.TEXT, failed)
    assert (code, out) == (41, "par\n") and err == "qshell: The API key was rejected\n"
    code, out, err = render(OutputFormat.JSON, failed)
    record = json.loads(out)
    assert code == 41 and record["is_error"] is True and record["error"]["kind"] == "auth"
    assert record["result"] == "par"
    code, out, _ = render(OutputFormat.STREAM_JSON, failed)
    types = [json.loads(line)["type"] for line in out.splitlines()]
    assert types == ["init", "message", "error", "result"]


def test_a_failure_after_a_finished_round_prints_only_the_failed_round_s_text():
    events = [
        TextDelta("Let me look."),
        RoundFinished(1, USAGE),
        TextDelta("It is"),
        TurnFailed(FailureKind.STREAM_BROKEN, "the stream broke"),
    ]
    code, out, _ = render(OutputFormat.TEXT, events)
    assert (code, out) == (1, "It is\n")
    assert json.loads(render(OutputFormat.JSON, events)[1])["result"] == "It is"


def test_the_printer_never_leaves_a_permission_question_open():
    future: Future = Future()
    events = [PermissionRequested("c1", "shell", {}, "why", future), TurnFinished("", USAGE, 1)]
    render(OutputFormat.TEXT, events)
    assert future.result().answer is PermissionAnswer.DENY


def test_each_failure_kind_maps_to_its_exit_code():
    expected = {
        FailureKind.AUTH: 41,
        FailureKind.INPUT: 42,
        FailureKind.CONFIG: 52,
        FailureKind.MAX_TURNS: 53,
        FailureKind.CANCELLED: 130,
        FailureKind.MODEL_NOT_FOUND: 1,
        FailureKind.CONTEXT_TOO_LONG: 1,
        FailureKind.UNAVAILABLE: 1,
    }
    for kind, code in expected.items():
        assert render(OutputFormat.TEXT, [TurnFailed(kind, "x")])[0] == code


def test_what_the_server_said_reaches_stderr_as_one_line_without_escape_codes():
    """A stop reason or an error message comes from the server: on a terminal's stderr it
    must not move the cursor, retitle the window or break the one-line rule."""
    said = "the server ended the answer (\x1b]0;owned\x07pause\x1b[2J\nnow)"
    for end in (
        TurnFinished("", USAGE, 1, stop_reason="other", note=said),
        TurnFailed(FailureKind.ERROR, said),
    ):
        _, _, err = render(OutputFormat.TEXT, [end])
        assert err == "qshell: the server ended the answer (]0;ownedpause[2J now)\n"


def test_a_notice_goes_to_stderr_as_one_line_in_every_format():
    from qshell.agent.events import Notice

    events = [Notice("plugin x failed in qshell_tool_gate: KeyError: 'k'"), *EVENTS]
    for fmt in OutputFormat:
        code, out, err = render(fmt, events)
        assert code == 0 and err == "qshell: plugin x failed in qshell_tool_gate: KeyError: 'k'\n"
        assert "plugin x" not in out
