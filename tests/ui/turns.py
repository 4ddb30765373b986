"""Fixed event sequences shared by the renderer tests."""

from __future__ import annotations

from concurrent.futures import Future

from qshell.agent.events import (
    Event,
    FailureKind,
    HistoryCompacted,
    PermissionReply,
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

DIFF = "--- a/m.py\n+++ b/m.py\n@@ -1,2 +1,2 @@\n def f():\n-    return 1\n+    return 2\n"
EDIT_ARGS: dict[str, object] = {"path": "m.py", "old_string": "return 1", "new_string": "return 2"}
SHELL_ARGS: dict[str, object] = {"command": "pytest -q &&\n  echo done"}


def ask(
    name: str, args: dict[str, object], reason: str, preview: str = "", *, call_id: str = ""
) -> PermissionRequested:
    future: Future[PermissionReply] = Future()
    return PermissionRequested(call_id or "p-" + name, name, args, reason, future, preview=preview)


TURN: list[Event] = [
    TextDelta("Let me look at "),
    TextDelta("the file."),
    ToolStarted("c1", "read_file", {"path": "m.py"}),
    ToolFinished("c1", "read_file", ToolResult(llm_content="...", display="Read 2 lines")),
    ToolStarted("c2", "grep", {"pattern": "needle", "path": "src"}),
    ToolStarted("c3", "ls", {}),
    ToolFinished("c2", "grep", ToolResult.fail(ErrorType.NOT_FOUND, "src does not exist")),
    ToolFinished("c3", "ls", ToolResult(llm_content="a\nb\nc\nd\ne")),
    RoundFinished(1, Usage(prompt_tokens=1000, completion_tokens=20)),
    ask("edit", EDIT_ARGS, "edit changes files", preview=DIFF),
    ToolStarted("c4", "edit", EDIT_ARGS),
    ToolFinished(
        "c4",
        "edit",
        ToolResult(
            llm_content="Edited m.py: replaced 1 occurrence (+1 -1 lines).\n\n" + DIFF,
            display=DIFF,
        ),
    ),
    ask("shell", SHELL_ARGS, "runs a command"),
    ToolStarted("c5", "shell", SHELL_ARGS),
    ToolFinished("c5", "shell", ToolResult(llm_content="3 passed\ndone", display="3 passed\ndone")),
    RoundFinished(2, Usage(prompt_tokens=234, completion_tokens=30, cached_tokens=1000)),
    HistoryCompacted("auto", 40, 3),
    TextDelta("Fixed: `f` now "),
    TextDelta("returns 2.\n"),
    RoundFinished(3, Usage(prompt_tokens=0, completion_tokens=6)),
    TurnFinished("...", Usage(prompt_tokens=1234, completion_tokens=56, cached_tokens=1000), 2),
]

FAILURES: list[Event] = [
    TurnFailed(FailureKind.CANCELLED, "cancelled"),
    TurnFailed(FailureKind.AUTH, "the API key was refused; set OPENAI_API_KEY"),
]

ESC_TEXT = "red\x1b[31m title\x1b]0;pwned\x07 clear\x1b[2J csi\x9b31m bell\x07 cr\rover"


def hostile_events() -> list[Event]:
    """Every event type, with escape sequences and control bytes in every text field."""
    bad_args: dict[str, object] = {"path": ESC_TEXT, "command": ESC_TEXT}
    return [
        TextDelta(ESC_TEXT),
        ToolStarted("h1", "x\x1b[2Jtool", bad_args),
        ToolFinished("h1", "x\x1b[2Jtool", ToolResult(llm_content=ESC_TEXT, display=ESC_TEXT)),
        ToolStarted("h2", "edit", bad_args),
        ToolFinished("h2", "edit", ToolResult.fail(ErrorType.IO, ESC_TEXT)),
        ToolStarted("h3", "write_file", bad_args),
        ToolFinished(
            "h3",
            "write_file",
            ToolResult(
                llm_content=ESC_TEXT, display=f"--- a/x\n+++ b/x\n@@ -1 +1 @@\n-{ESC_TEXT}\n"
            ),
        ),
        ask("edit", bad_args, ESC_TEXT, preview=f"--- a/x\n+++ b/x\n+{ESC_TEXT}\n"),
        ask("shell", bad_args, ESC_TEXT),
        HistoryCompacted(ESC_TEXT, 4, 1),
        RoundFinished(1, Usage()),
        TurnFinished(ESC_TEXT, Usage(), 1),
        TurnFailed(FailureKind.ERROR, ESC_TEXT),
        TurnFailed(FailureKind.CANCELLED, ESC_TEXT),
    ]
