"""Property: however a server splits tool-call deltas, the accumulated calls are the same."""

from __future__ import annotations

import itertools
import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from qshell.cancel import CancelToken
from qshell.llm.base import StreamDone
from qshell.llm.messages import ChatRequest, Message
from qshell.llm.openai import OpenAIProvider
from tests.llm.sse import Script, chunk, event, sse_response

ARGS = st.dictionaries(
    st.text(min_size=1, max_size=8), st.one_of(st.integers(), st.text(max_size=20)), max_size=4
)


def pieces(text: str, cuts: list[int]) -> list[str]:
    points = sorted({c % (len(text) + 1) for c in cuts} | {0, len(text)})
    return [text[a:b] for a, b in itertools.pairwise(points)] or [""]


@given(
    calls=st.lists(ARGS, min_size=1, max_size=3),
    cuts=st.lists(st.integers(min_value=0, max_value=500), max_size=6),
    repeat=st.booleans(),
)
def test_split_and_repeated_deltas_accumulate_to_the_sent_calls(calls, cuts, repeat):
    events = []
    for index, arguments in enumerate(calls):
        text = json.dumps(arguments)
        for n, piece in enumerate(pieces(text, cuts)):
            head = n == 0 or repeat
            delta: dict[str, Any] = {"index": index, "function": {"arguments": piece}}
            if head:
                delta["id"] = f"call_{index}"
                delta["type"] = "function"
                delta["function"]["name"] = f"tool_{index}"
            events.append(chunk(tool_calls=[delta]))
    events += [chunk(finish="tool_calls"), event("[DONE]")]
    script = Script(sse_response(*events))
    provider = OpenAIProvider("http://test/v1", "k", transport=script.transport)
    request = ChatRequest(model="m", system="s", messages=[Message.user("hi")])
    done = list(provider.stream(request, CancelToken()))[-1]
    assert isinstance(done, StreamDone)
    got = done.message.tool_calls
    assert [c.id for c in got] == [f"call_{i}" for i in range(len(calls))]
    assert [c.name for c in got] == [f"tool_{i}" for i in range(len(calls))]
    assert [json.loads(c.arguments) for c in got] == calls
    assert done.stop_reason == "tool_use"
