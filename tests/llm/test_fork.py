"""What a fork request asks for beyond the main request's prefix (llm/fork.py): reasoning
off unless forks inherit, and no ban on tool calls for a speculation's rounds."""

from __future__ import annotations

import pytest

from qshell.config import BackgroundReasoning
from qshell.llm.fork import CacheSafeParams
from qshell.llm.messages import ChatRequest, Message


def lean_main(*, reasoning_off: bool = False) -> ChatRequest:
    """A main round the loop predicted to be a pure summary (`leanSummaryRounds`)."""
    return ChatRequest(
        model="m1",
        system="sys",
        messages=[Message.user("sum up")],
        no_tool_calls=True,
        reasoning_off=reasoning_off,
    )


@pytest.mark.parametrize(
    ("setting", "main_off", "fork_off"),
    [
        (BackgroundReasoning.OFF, False, True),
        (BackgroundReasoning.OFF, True, True),
        (BackgroundReasoning.INHERIT, False, False),
        (BackgroundReasoning.INHERIT, True, True),
    ],
)
def test_a_fork_asks_for_reasoning_off_unless_it_inherits_the_main_requests(
    setting, main_off, fork_off
) -> None:
    params = CacheSafeParams.capture(
        lean_main(reasoning_off=main_off), Message.assistant("Done."), background_reasoning=setting
    )
    assert params.fork("suggest").reasoning_off is fork_off
    assert params.continued(params.prefix).reasoning_off is fork_off


def test_a_suggestion_keeps_the_mains_no_tool_calls_and_a_speculation_may_call_tools() -> None:
    params = CacheSafeParams.capture(lean_main(), Message.assistant("Done."))
    assert params.fork("suggest").no_tool_calls  # the same tool_choice keeps its cache
    assert not params.continued([*params.prefix, Message.user("run it")]).no_tool_calls
