"""Which tools a small local model is offered, read from the turn's prompt, and how their
schemas are narrowed; and that a session asks for that offer only when told to."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from qshell.agent.session import Session
from qshell.latency.tool_offer import (
    PromptReading,
    named_paths,
    offered_kinds,
    offered_specs,
    required_tool,
    top_level_files,
    typed_text,
)
from qshell.llm.messages import Message, ToolResultBlock, ToolSpec
from qshell.tools import default_tools
from qshell.tools.base import Kind, tool_spec
from tests.agent.scripted import ScriptedProvider, session_for

TOOLS = default_tools()
SPECS = [tool_spec(t, compact=True) for t in TOOLS]
READING = {Kind.READ, Kind.THINK, Kind.OTHER}


@pytest.fixture
def root(tmp_path: Path) -> Path:
    (tmp_path / "notes.txt").write_text("- buy milk\n")
    (tmp_path / "app.py").write_text("print('hi')\n")
    (tmp_path / "src").mkdir()
    (tmp_path / ".hidden").write_text("x")
    return tmp_path


def offered(prompt: str, root: Path) -> dict[str, dict[str, Any]]:
    """Tool name → its offered parameters' properties."""
    return {s.name: s.parameters["properties"] for s in offered_specs(prompt, root, TOOLS, SPECS)}


@pytest.mark.parametrize(
    "prompt",
    [
        "say hello",
        "hi!",
        "thanks",
        "who are you?",
        "how do I reverse a string in Python?",
        "write a Python function that checks if a number is even",
        "explain recursion",
        "bonjour, que sais-tu faire ?",
    ],
)
def test_a_greeting_or_a_general_question_is_offered_no_tool(prompt: str, root: Path) -> None:
    assert offered_kinds(prompt, root) == frozenset()
    assert offered_specs(prompt, root, TOOLS, SPECS) == []


def test_a_question_about_a_named_file_is_offered_only_reading_pinned_to_that_file(
    root: Path,
) -> None:
    assert offered_kinds("what is in notes.txt?", root) == READING
    tools = offered("what is in notes.txt?", root)
    assert set(tools) == {"read_file", "ls"}
    assert tools["read_file"] == {"path": {"type": "string", "enum": ["notes.txt"]}}
    assert tools["ls"] == {}, "an optional path is a directory, and none was named"


def test_a_question_about_the_project_without_a_file_gets_search_and_the_top_level_files(
    root: Path,
) -> None:
    assert offered_kinds("what files are here?", root) == READING | {Kind.SEARCH}
    tools = offered("what does this project do?", root)
    assert set(tools) == {"read_file", "glob", "grep", "ls"}
    assert tools["read_file"]["path"]["enum"] == ["app.py", "notes.txt"]
    assert "path" not in tools["grep"] and "glob" not in tools["grep"]
    assert set(tools["glob"]) == {"pattern"}


def test_a_named_directory_pins_the_optional_path_of_the_looking_tools(root: Path) -> None:
    tools = offered("find the tests in src/", root)
    assert tools["ls"] == {"path": {"type": "string", "enum": ["src/"]}}
    assert tools["glob"]["path"] == {"type": "string", "enum": ["src/"]}
    assert offered("what is in src/ and notes.txt?", root)["read_file"]["path"]["enum"] == [
        "notes.txt"
    ]


@pytest.mark.parametrize(
    "prompt", ["what files are here?", "list the python files", "show me the folder tree"]
)
def test_a_listing_question_is_offered_only_the_tools_that_need_no_argument(
    prompt: str, root: Path
) -> None:
    assert offered(prompt, root) == {"ls": {}}
    assert offered("list the files in src/", root)["ls"]["path"]["enum"] == ["src/"]


def test_a_question_about_what_a_file_or_the_project_holds_is_no_listing(root: Path) -> None:
    for prompt in ("list what notes.txt says", "what files does the project have?"):
        assert "read_file" in offered(prompt, root), prompt


def test_an_identifier_makes_a_question_about_the_projects_code(root: Path) -> None:
    for prompt in ("where is count_words defined?", "what does parseArgs do", "fix main()"):
        assert {Kind.READ, Kind.SEARCH} <= offered_kinds(prompt, root), prompt


def test_a_change_to_a_file_is_offered_the_edit_tools_pinned_to_it_even_when_new(
    root: Path,
) -> None:
    kinds = offered_kinds("add a line 'call mum' to notes.txt", root)
    assert {Kind.READ, Kind.EDIT, Kind.DELETE, Kind.MOVE} <= kinds
    assert Kind.EXECUTE not in kinds and Kind.FETCH not in kinds
    tools = offered("create todo.md with my tasks", root)
    assert tools["write_file"]["path"] == {"type": "string", "enum": ["todo.md"]}
    assert set(tools["write_file"]) == {"path", "content"}
    assert set(tools["edit"]) == {"path", "old_string", "new_string"}, "replace_all is optional"


def test_running_something_is_offered_the_shell_and_a_url_web_fetch(root: Path) -> None:
    assert Kind.EXECUTE in offered_kinds("run the tests", root)
    assert offered_kinds("what does https://example.com/a say", root) == {
        Kind.FETCH,
        Kind.THINK,
        Kind.OTHER,
    }
    assert "timeout" not in offered("run the tests", root)["shell"]


def test_an_attached_file_counts_as_named_but_what_it_holds_does_not(root: Path) -> None:
    prompt = 'say hello\n\n<file path="notes.txt">\nfix the code in app.py\n</file>'
    assert typed_text(prompt) == "say hello\n\n"
    reading = PromptReading.of(prompt, root)
    assert reading.named == ("notes.txt",) and reading.existing == ("notes.txt",)
    assert not reading.wants_change and not reading.names_code
    assert not offered_kinds(prompt, root) & {Kind.EDIT, Kind.DELETE, Kind.MOVE, Kind.EXECUTE}
    assert offered_specs(prompt, root, TOOLS, SPECS) == []


ATTACHED_NOTES = '\n\n<file path="notes.txt">\n- buy milk\n</file>'


@pytest.mark.parametrize(
    "prompt", ["explain @notes.txt", "what is in notes.txt?", "what does this say?"]
)
def test_a_prompt_with_its_file_attached_and_no_change_to_make_is_offered_nothing_to_read(
    root: Path, prompt: str
) -> None:
    assert offered_specs(prompt + ATTACHED_NOTES, root, TOOLS, SPECS) == []
    assert "read_file" in offered("what is in notes.txt?", root)  # not attached: it reads


def test_a_prompt_with_a_file_attached_keeps_the_tools_it_asks_for_beyond_reading(
    root: Path,
) -> None:
    tools = offered("run the script in @notes.txt" + ATTACHED_NOTES, root)
    assert "shell" in tools
    assert not {"read_file", "glob", "grep", "ls"} & set(tools)


def test_a_change_asked_of_an_attached_file_that_exists_is_offered_no_tool(root: Path) -> None:
    assert offered("add a line 'call mum' to @notes.txt" + ATTACHED_NOTES, root) == {}


def test_a_new_file_asked_for_beside_an_attached_one_is_offered_edit_tools_pinned_to_it(
    root: Path,
) -> None:
    tools = offered("create todo.md from @notes.txt" + ATTACHED_NOTES, root)
    assert {"write_file", "edit"} <= set(tools)
    assert tools["write_file"]["path"]["enum"] == ["todo.md"]  # never the existing notes.txt


def test_a_change_asked_of_a_file_only_retrieval_attached_is_offered_no_edit(root: Path) -> None:
    prompt = "add a comment to the discount function" + ATTACHED_NOTES
    reading = PromptReading.of(prompt, root)
    assert reading.retrieved_only and reading.wants_change
    assert not offered_kinds(prompt, root) & {Kind.EDIT, Kind.DELETE, Kind.MOVE}
    assert not {"edit", "write_file", "read_file"} & set(offered(prompt, root))


@pytest.mark.parametrize(
    "prompt", ["add a line 'call mum' to notes.txt", "fix app.py", "rewrite notes.txt"]
)
def test_a_change_to_files_that_all_exist_is_offered_no_edit_or_write_tool(
    root: Path, prompt: str
) -> None:
    tools = offered(prompt, root)
    assert not {"edit", "write_file"} & set(tools)
    assert "read_file" in tools  # it reads the file and shows the change in its answer


def test_the_edit_tools_are_offered_only_to_create_a_file_that_does_not_exist(root: Path) -> None:
    new = offered("create todo.md with my tasks", root)
    assert new["write_file"]["path"] == {"type": "string", "enum": ["todo.md"]}
    assert new["edit"]["path"] == {"type": "string", "enum": ["todo.md"]}
    both = offered("create todo.md from notes.txt", root)
    assert both["write_file"]["path"]["enum"] == ["todo.md"]
    assert both["edit"]["path"]["enum"] == ["todo.md"]
    # a missing file named beside existing ones opens no way to change those
    renamed = offered("rename app.py to main.py", root)
    assert renamed["write_file"]["path"]["enum"] == ["main.py"]


@pytest.mark.parametrize(
    ("prompt", "expected"),
    [
        ("run the tests", "shell"),
        ("please run the tests", "shell"),
        ("can you build it?", "shell"),
        ("Test it now", "shell"),
        ("which test fails?", "shell"),
        ("do the tests pass?", "shell"),
        ("fix app.py", None),
        ("what does run do?", None),
        ("explain the test in app.py", None),
        ("please", None),
        ("", None),
        ('say hello\n\n<file path="notes.txt">\nrun the tests\n</file>', None),
        # not a command to run: a file named like a verb, a heading, a question
        ("build.py, what does it do?", None),
        ("compile.sh, what does it do?", None),
        ("Test coverage: how is it measured here?", None),
        ("lint rules: list them", None),
        ("run-time errors?", None),
        ("test_discount fails; fix app.py so it passes", None),
    ],
)
def test_a_prompt_asking_to_run_something_must_call_the_shell(
    prompt: str, expected: str | None
) -> None:
    assert required_tool(prompt, SPECS, TOOLS) == expected


def test_no_tool_is_required_when_the_shell_is_not_offered() -> None:
    reading = [s for s in SPECS if s.name in ("read_file", "ls")]
    assert required_tool("run the tests", reading, TOOLS) is None


def test_path_like_tokens_are_found_without_their_quotes_and_punctuation() -> None:
    text = "compare `src/app.py`, 'notes.txt' and ./run.sh. Then stop: e.g. nothing"
    assert named_paths(text) == ["src/app.py", "notes.txt", "./run.sh"]


def test_the_top_level_files_skip_hidden_entries_and_directories(root: Path) -> None:
    assert top_level_files(root) == ["app.py", "notes.txt"]
    assert top_level_files(root / "missing") == []


# ------------------------------------------------------------------ in a session


def session(root: Path, *, tools_by_prompt: bool) -> Session:
    return session_for(
        ScriptedProvider([]),
        root,
        TOOLS,
        model="m1",
        max_turns=3,
        compact_tools=True,
        final_round_without_tools=True,
        tools_by_prompt=tools_by_prompt,
    )


def test_a_session_told_to_offers_its_turns_tools_by_the_prompt(root: Path) -> None:
    chosen = session(root, tools_by_prompt=True)
    chosen.append(Message.user("say hello"))
    assert chosen.request().tools == []
    chosen.append(Message.assistant("Hello!"))
    chosen.append(Message.user("what is in notes.txt?"))
    assert [t.name for t in chosen.request().tools] == ["read_file", "ls"]


def test_the_offer_is_decided_once_per_turn_not_per_round(root: Path) -> None:
    chosen = session(root, tools_by_prompt=True)
    chosen.append(Message.user("create todo.md"))
    first = chosen.request(round_index=0).tools
    (root / "todo.md").write_text("made by the turn\n")  # the turn's own call made it exist
    chosen.append(Message.assistant("", []))
    chosen.append(Message(role="user", content=[ToolResultBlock(tool_call_id="c", content="ok")]))
    assert chosen.request(round_index=1).tools == first
    assert chosen.request(round_index=2).tools == [], "the last round still has no tools"


def test_the_first_round_of_a_turn_asking_to_run_something_must_call_the_shell(
    root: Path,
) -> None:
    chosen = session(root, tools_by_prompt=True)
    chosen.append(Message.user("please run the tests"))
    assert chosen.request(round_index=0).tool_choice == "shell"
    chosen.append(Message.assistant("", []))
    chosen.append(Message(role="user", content=[ToolResultBlock(tool_call_id="c", content="ok")]))
    assert chosen.request(round_index=1).tool_choice is None
    asking = session(root, tools_by_prompt=True)
    asking.append(Message.user("what does run do?"))
    assert asking.request().tool_choice is None
    every = session(root, tools_by_prompt=False)
    every.append(Message.user("please run the tests"))
    assert every.request().tool_choice is None


def test_a_session_not_told_to_offers_every_tool_whatever_the_prompt(root: Path) -> None:
    every = session(root, tools_by_prompt=False)
    every.append(Message.user("say hello"))
    assert every.request().tools == every.tool_specs
    assert every.fork().options.tools_by_prompt is False


def test_a_fork_of_a_session_that_chooses_chooses_for_its_own_prompt(root: Path) -> None:
    parent = session(root, tools_by_prompt=True)
    parent.append(Message.user("say hello"))
    parent.append(Message.assistant("Hello!"))
    from qshell.llm.fork import CacheSafeParams

    parent.cache_safe = CacheSafeParams.capture(parent.request(), parent.history[-1])
    fork = parent.fork()
    fork.append(Message.user("what is in notes.txt?"))
    assert [t.name for t in fork.request().tools] == ["read_file", "ls"]


def compact(name: str) -> ToolSpec:
    return next(s for s in SPECS if s.name == name)


def test_the_narrowed_specs_leave_the_sessions_own_specs_untouched(root: Path) -> None:
    before = compact("read_file").model_dump()
    offered("what is in notes.txt?", root)
    assert compact("read_file").model_dump() == before


def test_the_offer_reads_what_was_typed_not_the_piped_log_or_notes_around_it(root: Path) -> None:
    """`cat error.log | qshell -p "why does this fail?"`: the log's "1 failed" and test names
    must not force a test run, and a note put before the prompt must not hide its verb."""
    piped = "FAILED test_calc.py::test_add - assert -1 == 3\n1 failed in 0.01s"
    chosen = session(root, tools_by_prompt=True)
    chosen.typed_prompt = "why does this fail?"
    chosen.append(Message.user(f"{piped}\n\nwhy does this fail?"))
    assert chosen.request(round_index=0).tool_choice is None
    assert chosen.request().tools == []  # nothing the typed words ask for
    noted = session(root, tools_by_prompt=True)
    noted.typed_prompt = "run the tests"
    noted.append(Message.user("[The user undid the last turn's changes.]\n\nrun the tests"))
    assert noted.request(round_index=0).tool_choice == "shell"
    stale = session(root, tools_by_prompt=True)  # a turn that set no typed prompt
    stale.typed_prompt = "run the tests"
    stale.append(Message.user("say hello"))
    assert stale.request(round_index=0).tool_choice is None and stale.request().tools == []


@pytest.mark.parametrize(
    ("prompt", "expected"),
    [
        ("build a REST API in Flask", None),
        ("build me a todo app", None),
        ("run me through app.py", None),
        ("compile a list of the TODOs", None),
        ("go ahead and run the tests", "shell"),
        ("ok run the tests", "shell"),
        ("pytest -q", "shell"),
        ("npm test", "shell"),
        ("what is in ~nobody_here/notes.txt?", None),  # no crash on an unknown user's home
    ],
)
def test_making_something_is_not_running_it_and_a_runners_command_line_is(
    prompt: str, expected: str | None
) -> None:
    assert required_tool(prompt, SPECS, TOOLS) == expected
