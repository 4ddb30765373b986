"""A history whose responses all name their call `call_0` (some OpenAI-compatible servers
do), as the providers lay it out: a result goes with the call of the message before it."""

from __future__ import annotations

import json

from qshell.llm.function_calling import for_function_calling
from qshell.llm.messages import (
    ChatRequest,
    Message,
    ToolCall,
    ToolResultBlock,
    ToolSpec,
    answered_calls,
    without_cut_calls,
)


def asks(name: str, args: dict | str, *, complete: bool = True) -> Message:
    arguments = args if isinstance(args, str) else json.dumps(args)
    return Message.assistant(
        "", [ToolCall(id="call_0", name=name, arguments=arguments, complete=complete)]
    )


def answers(content: str, *, error: bool = False) -> Message:
    result = ToolResultBlock(tool_call_id="call_0", content=content, is_error=error)
    return Message(role="user", content=[result])


HISTORY = [
    Message.user("fix notes.txt"),
    asks("read_file", {"path": "notes.txt"}),
    answers("the notes"),
    asks("edit", {"path": "notes.txt", "old_string": "the", "new_string": "my"}),
    answers("Edited notes.txt"),
]


def test_answered_calls_are_those_of_the_message_before():
    assert answered_calls(HISTORY, 2)["call_0"].name == "read_file"
    assert answered_calls(HISTORY, 4)["call_0"].name == "edit"
    assert answered_calls(HISTORY, 1) == {} and answered_calls(HISTORY, 0) == {}


def test_a_cut_call_0_leaves_out_only_itself_and_its_result():
    cut = [*HISTORY, asks("write_file", '{"path": "x", "cont', complete=False), answers("not run")]
    assert without_cut_calls(cut) == HISTORY


def test_function_calling_names_each_result_by_its_own_call():
    tool = ToolSpec(name="read_file", description="read", parameters={"type": "object"})
    request = ChatRequest(model="m", system="s", messages=HISTORY, tools=[tool])
    texts = [m.text for m in for_function_calling(request).messages if m.role == "user"][1:]
    assert texts == [
        "The read_file call returned:\nthe notes",
        "The edit call returned:\nEdited notes.txt",
    ]
    answer_round = for_function_calling(request.model_copy(update={"tools": []}))
    prompt = answer_round.messages[-1].text
    assert "notes.txt:\nthe notes" in prompt  # the read, headed by its own path
