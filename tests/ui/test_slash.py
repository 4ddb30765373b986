"""Slash commands: what each prints for typical and bad arguments, and what is a command."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from qshell.agent.events import FailureKind, HistoryCompacted, TurnFailed
from qshell.cancel import CancelToken
from qshell.config import ApprovalMode
from qshell.llm.base import StreamDone, StreamEvent
from qshell.llm.messages import ChatRequest, Message, Usage
from qshell.ui.slash import ALIASES, COMMANDS, Next, SlashResult, is_slash, run_slash
from tests.agent.test_conversation import (
    Setup,
    consume,
    make_conversation,
    read_call,
    write_call,
)


@pytest.fixture
def setup(tmp_path) -> Setup:
    return make_conversation(tmp_path)


def shown(result: SlashResult) -> str:
    assert result.next is Next.SHOW and result.events is None
    return "\n".join(result.lines)


def test_model_without_arguments_shows_the_model(setup):
    result = run_slash("/model", setup.conversation)
    assert shown(result) == f"model: {setup.conversation.model}" and not result.error


def test_model_with_a_name_switches_the_model(setup):
    assert shown(run_slash("/model  small-1 ", setup.conversation)) == "model set to small-1"
    assert setup.conversation.model == "small-1"
    assert shown(run_slash("/model", setup.conversation)) == "model: small-1"


def test_model_with_two_names_is_a_usage_error(setup):
    before = setup.conversation.model
    result = run_slash("/model a b", setup.conversation)
    assert result.error and "usage: /model" in shown(result)
    assert setup.conversation.model == before


def test_model_fast_shows_and_sets_the_fast_model(setup):
    main = setup.conversation.model
    assert shown(run_slash("/model --fast", setup.conversation)) == (
        f"fast model: (same as main: {main})"
    )
    assert shown(run_slash("/model --fast x", setup.conversation)) == "fast model set to x"
    assert setup.conversation.fast_model == "x" and setup.conversation.model == main
    assert shown(run_slash("/model --fast", setup.conversation)) == "fast model: x"


def test_approval_mode_shows_and_sets_the_mode(setup):
    assert shown(run_slash("/approval-mode", setup.conversation)) == "approval mode: default"
    assert shown(run_slash("/approval-mode plan", setup.conversation)) == (
        "approval mode set to plan"
    )
    assert setup.conversation.approval_mode is ApprovalMode.PLAN


def test_an_unknown_approval_mode_is_an_error_listing_the_choices(setup):
    result = run_slash("/approval-mode bogus", setup.conversation)
    assert result.error
    assert shown(result) == (
        "unknown approval mode 'bogus'; choose one of: default, auto-edit, plan, yolo"
    )
    assert setup.conversation.approval_mode is ApprovalMode.DEFAULT


def test_clear_names_the_new_session_and_how_to_get_the_old_one_back(setup):
    old = setup.conversation.session.id
    text = shown(run_slash("/clear", setup.conversation))
    assert (
        text
        == f"started a new session {setup.conversation.session.id} (the old one: /resume {old})"
    )
    assert setup.conversation.session.id != old


def test_resume_without_an_id_lists_the_sessions_marking_the_current_one(setup):
    setup.script(Message.assistant("hi"))
    consume(setup.conversation.turn("the very first prompt"))
    old = setup.conversation.clear()
    lines = run_slash("/resume", setup.conversation).lines
    assert lines[0] == "Sessions here (newest first); resume one with /resume ID:"
    current = next(line for line in lines if setup.conversation.session.id in line)
    earlier = next(line for line in lines if old in line)
    assert current.startswith(" * ") and earlier.startswith("   ")
    assert earlier.endswith("the very first prompt")


def test_resume_with_an_id_switches_and_counts_the_messages(setup):
    setup.script(Message.assistant("hi"))
    consume(setup.conversation.turn("hello"))
    old = setup.conversation.clear()
    result = run_slash(f"/resume {old}", setup.conversation)
    assert shown(result) == f"resumed session {old} (2 messages)" and not result.error
    assert setup.conversation.session.id == old


@pytest.mark.parametrize("target", ["unknown-id", "../etc/passwd"])
def test_resume_of_an_unknown_or_invalid_id_is_an_error(setup, target):
    current = setup.conversation.session.id
    result = run_slash(f"/resume {target}", setup.conversation)
    assert result.error and target in shown(result)
    assert setup.conversation.session.id == current


def test_undo_with_nothing_to_undo_says_so(setup):
    result = run_slash("/undo", setup.conversation)
    assert shown(result) == "nothing to undo: no turn has changed files yet"
    assert not result.error


def test_undo_lists_restored_and_removed_files(setup):
    (setup.root / "a.txt").write_text("old\n")
    setup.script(
        read_call("a.txt"),
        write_call("a.txt", "new\n", "w1"),
        write_call("b.txt", "made\n", "w2"),
        Message.assistant("done"),
    )
    consume(setup.conversation.turn("change things"))
    assert shown(run_slash("/undo", setup.conversation)) == (
        "restored a.txt\nremoved b.txt (the turn had created it)"
    )
    assert (setup.root / "a.txt").read_text() == "old\n"


def test_undo_reports_a_file_changed_since_and_leaves_it(setup):
    setup.script(write_call("a.txt", "model\n"), Message.assistant("done"))
    consume(setup.conversation.turn("write"))
    (setup.root / "a.txt").write_text("mine\n")
    text = shown(run_slash("/undo", setup.conversation))
    assert text.startswith("left a.txt alone: changed since")
    assert (setup.root / "a.txt").read_text() == "mine\n"


def test_stats_of_a_new_session(setup):
    assert shown(run_slash("/stats", setup.conversation)).splitlines() == [
        f"session {setup.conversation.session.id}",
        "model rounds: 0",
        "prompt tokens: 0 · cached: unknown",
        "completion tokens: 0",
        "cache hit rate by round: first n/a · middle n/a · summary n/a",
        "messages in history: 0",
        "speculations accepted: 0 · time saved: 0.0 s",
        f"sandbox: {setup.conversation.session.tool_context.sandbox_mode}",
    ]


def test_stats_after_a_turn_counts_tokens_and_the_cached_share(setup):
    setup.script(Message.assistant("hi"))
    consume(setup.conversation.turn("hello"))
    lines = shown(run_slash("/stats", setup.conversation)).splitlines()
    assert lines[1:] == [
        "model rounds: 1",
        "prompt tokens: 10 · cached: 4 (40%)",
        "completion tokens: 2",
        "cache hit rate by round: first 40% · middle n/a · summary n/a",
        "messages in history: 2",
        "speculations accepted: 0 · time saved: 0.0 s",
        f"sandbox: {setup.conversation.session.tool_context.sandbox_mode}",
    ]


def test_stats_counts_cache_writes_and_reasoning_tokens_when_the_provider_reports_them(setup):
    usage = Usage(
        prompt_tokens=1000,
        completion_tokens=300,
        cached_tokens=600,
        cache_creation_tokens=350,
        reasoning_tokens=120,
    )

    def answer(request: ChatRequest, cancel: CancelToken) -> Iterator[StreamEvent]:
        yield StreamDone(Message.assistant("hi"), usage, "end_turn")

    setup.script(answer)
    consume(setup.conversation.turn("hello"))
    lines = shown(run_slash("/stats", setup.conversation)).splitlines()
    assert lines[2:4] == [
        "prompt tokens: 1,000 · cached: 600 (60%) · written to the cache: 350",
        "completion tokens: 300 (reasoning: 120)",
    ]


def test_compact_is_driven_like_a_turn(setup):
    setup.script(Message.assistant("hi"), Message.assistant("summary"))
    consume(setup.conversation.turn("hello"))
    result = run_slash("/compact keep the names", setup.conversation)
    assert result.next is Next.DRIVE and result.events is not None and not result.lines
    events = consume(result.events)
    assert isinstance(events[-1], HistoryCompacted)
    assert "keep the names" in setup.provider.requests[-1].messages[-1].text


def test_compact_of_an_empty_history_drives_an_input_failure(setup):
    result = run_slash("/compact", setup.conversation)
    events = consume(result.events or [])
    assert isinstance(events[-1], TurnFailed) and events[-1].kind is FailureKind.INPUT


def test_help_lists_every_command_and_the_input_keys(setup):
    result = run_slash("/help", setup.conversation)
    text = shown(result)
    assert result.lines[0] == "Commands:"
    for command in COMMANDS.values():
        assert any(
            line.strip().startswith(command.usage) and command.help in line for line in result.lines
        ), command.name
    assert "@path" in text and "Ctrl-D" in text


@pytest.mark.parametrize("line", ["/exit", "/quit", "/q", "  /q  "])
def test_exit_and_its_aliases_exit(setup, line):
    assert run_slash(line, setup.conversation).next is Next.EXIT


def test_every_alias_names_a_command():
    assert all(target in COMMANDS for target in ALIASES.values())


def test_the_question_mark_alias_shows_help(setup):
    assert is_slash("/?")
    assert run_slash("/?", setup.conversation).lines[0] == "Commands:"


def test_an_unknown_command_suggests_a_close_one(setup):
    result = run_slash("/modle x", setup.conversation)
    assert result.error
    assert shown(result) == "unknown command /modle. Did you mean /model? Type /help for the list."


def test_an_unknown_command_without_a_close_one_points_to_help(setup):
    result = run_slash("/frobnicate", setup.conversation)
    assert result.error
    assert shown(result) == "unknown command /frobnicate. Type /help for the list."
    assert setup.provider.requests == []


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("/help", True),
        ("  /model gpt-5  ", True),
        ("/approval-mode yolo", True),
        ("/frobnicate", True),
        ("/usr/bin/env is broken", False),
        ("/etc/hosts looks wrong", False),
        ("/", False),
        ("/ 2", False),
        ("//comment", False),
        ("/3 items", False),
        ("please run /help", False),
        ("", False),
        ("   ", False),
    ],
)
def test_is_slash_tells_commands_from_paths_and_prose(line, expected):
    assert is_slash(line) is expected


def test_a_tab_between_command_and_argument_still_parses(setup):
    run_slash("/model\tbig-model", setup.conversation)
    assert setup.conversation.model == "big-model"


def test_a_misspelt_command_gets_the_closest_suggestion(setup):
    result = run_slash("/hlep", setup.conversation)
    assert result.error and "Did you mean /help?" in shown(result)


def test_help_ends_with_the_front_ends_own_key_line(setup):
    text = shown(run_slash("/help", setup.conversation, keys_help="Keys: only here"))
    assert text.endswith("Keys: only here")


def test_a_second_undo_says_everything_is_undone_already(setup):
    (setup.root / "a.txt").write_text("old\n")
    setup.script(read_call("a.txt"), write_call("a.txt", "new\n", "w1"), Message.assistant("done"))
    consume(setup.conversation.turn("change it"))
    assert shown(run_slash("/undo", setup.conversation)) == "restored a.txt"
    assert shown(run_slash("/undo", setup.conversation)) == (
        "nothing more to undo: every turn that changed files is undone already"
    )
