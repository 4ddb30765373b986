"""The generation guards one by one, the enable switch and the assistant-turn count."""

from __future__ import annotations

from dataclasses import replace

import pytest

from qshell.config import ApprovalMode
from qshell.followup.guards import (
    GuardInputs,
    background_enabled,
    count_assistant_turns,
    guard_reason,
)
from qshell.llm.messages import Message, ToolCall, ToolResultBlock, Usage

READY = GuardInputs(
    enabled=True,
    interactive=True,
    assistant_turns=2,
    last_turn_failed=False,
    approval_mode=ApprovalMode.DEFAULT,
    permission_pending=False,
    last_usage=Usage(prompt_tokens=20_000, completion_tokens=300, cached_tokens=18_000),
)


def test_a_ready_session_passes_every_guard():
    assert guard_reason(READY) is None


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"enabled": False}, "disabled"),
        ({"interactive": False}, "non_interactive"),
        ({"assistant_turns": 1}, "early_conversation"),
        ({"assistant_turns": 0}, "early_conversation"),
        ({"last_turn_failed": True}, "last_turn_error"),
        ({"approval_mode": ApprovalMode.PLAN}, "plan_mode"),
        ({"permission_pending": True}, "permission_pending"),
        ({"aborted": True}, "aborted"),
    ],
)
def test_each_guard_suppresses_with_its_own_reason(change, reason):
    assert guard_reason(replace(READY, **change)) == reason


@pytest.mark.parametrize("mode", [ApprovalMode.DEFAULT, ApprovalMode.AUTO_EDIT, ApprovalMode.YOLO])
def test_modes_other_than_plan_allow_suggestions(mode):
    assert guard_reason(replace(READY, approval_mode=mode)) is None


def test_the_first_applicable_guard_names_the_reason():
    both = replace(READY, enabled=False, interactive=False, aborted=True)
    assert guard_reason(both) == "disabled"


def test_cache_is_cold_when_uncached_input_plus_output_exceeds_the_threshold():
    usage = Usage(prompt_tokens=30_000, completion_tokens=1, cached_tokens=20_000)
    assert guard_reason(replace(READY, last_usage=usage)) == "cache_cold"


def test_cache_exactly_at_the_threshold_is_not_cold():
    usage = Usage(prompt_tokens=29_000, completion_tokens=1_000, cached_tokens=20_000)
    assert guard_reason(replace(READY, last_usage=usage)) is None


def test_output_tokens_count_towards_a_cold_cache():
    usage = Usage(prompt_tokens=20_000, completion_tokens=10_001, cached_tokens=20_000)
    assert guard_reason(replace(READY, last_usage=usage)) == "cache_cold"


def test_the_cache_cold_threshold_is_configurable():
    usage = Usage(prompt_tokens=5_000, completion_tokens=100, cached_tokens=4_000)
    assert guard_reason(replace(READY, last_usage=usage, cache_cold_tokens=1_000)) == "cache_cold"
    assert guard_reason(replace(READY, last_usage=usage, cache_cold_tokens=1_100)) is None


def test_the_cache_is_never_cold_when_the_provider_does_not_report_cached_tokens():
    usage = Usage(prompt_tokens=90_000, completion_tokens=5_000, cached_tokens=None)
    assert guard_reason(replace(READY, last_usage=usage)) is None


def test_unknown_usage_is_not_a_cold_cache():
    assert guard_reason(replace(READY, last_usage=None)) is None


def test_suggestions_follow_the_setting_without_an_override():
    assert background_enabled(True, "openai") is True
    assert background_enabled(False, "anthropic") is False


def test_the_embedded_local_provider_is_off_unless_the_user_turns_it_on():
    assert background_enabled(None, "local") is False
    assert background_enabled(None, "openai") is True
    assert background_enabled(True, "local") is True


def test_assistant_turns_count_every_assistant_message_including_tool_rounds():
    call = ToolCall(id="c1", name="ls")
    history = [
        Message.user("look around"),
        Message.assistant("", [call]),
        Message(role="user", content=[ToolResultBlock(tool_call_id="c1", content="a b")]),
        Message.assistant("two files"),
        Message.user("thanks"),
    ]
    assert count_assistant_turns(history) == 2
    assert count_assistant_turns([]) == 0
