"""The event-stream reader (llm/event_stream.py) on the text of bodies as servers send them:
the WHATWG grammar, a body cut mid-line, a bare JSON error line, a body that is no stream."""

from __future__ import annotations

import pytest

from qshell.errors import BadRequest, ProviderError, StreamBroken
from qshell.llm.errors_map import Endpoint
from qshell.llm.event_stream import events

ENDPOINT = Endpoint(
    "openai", "https://gw.example/v1", "OPENAI_API_KEY", "OPENAI_MODEL", ("sk-live-123456",)
)


def read(*chunks: str) -> list[tuple[str, str]]:
    return [(e.event, e.data) for e in events(iter(chunks), ENDPOINT, "m1")]


def test_events_follow_the_grammar_across_chunks_and_line_endings() -> None:
    body = (
        ": OPENROUTER PROCESSING\r\n\r\n"
        'event: message_start\r\ndata: {"a":\r\ndata: 1}\r\n\r\n'
        "id: 7\rretry: 10\rdata:[DONE]\r\r"
    )
    cut = [body[i : i + 5] for i in range(0, len(body), 5)]  # events split across reads
    assert read(*cut) == [("message_start", '{"a":\n1}'), ("message", "[DONE]")]


def test_an_event_not_ended_by_a_blank_line_is_dropped_as_the_cut_it_is() -> None:
    # llm/http.py's _FeedingStream ends a whole last line with the blank line; a line cut
    # mid-way reaches the reader without one, and must not become a malformed event
    assert read('data: {"x": 1}\n\ndata: {"choices":[{"del') == [("message", '{"x": 1}')]


def test_a_bare_json_error_line_after_events_raises_that_error_not_retried() -> None:
    stream = events(
        iter(['data: {"x": 1}\n\n{"error":{"message":"quota gone","type":"new_api_error"}}\n']),
        ENDPOINT,
        "m1",
    )
    assert next(stream).data == '{"x": 1}'
    with pytest.raises(ProviderError, match="quota gone") as raised:
        next(stream)
    assert raised.value.retryable is False


def test_an_error_as_the_whole_body_is_read_even_spread_over_lines_or_in_a_list() -> None:
    pretty = '{\n  "error": {\n    "message": "model is overloaded",\n    "type": "invalid_request_error"\n  }\n}'
    with pytest.raises(BadRequest, match="model is overloaded"):
        read(pretty)
    listed = '[{\n  "error": {"code": 400, "message": "missing a thought_signature"}\n}]'
    with pytest.raises(BadRequest, match="missing a thought_signature"):
        read(listed)
    with pytest.raises(ProviderError, match="no such model"):
        read('{"object":"error","message":"no such model","type":"NotFoundError","code":404}')


def test_a_body_with_no_line_of_the_grammar_is_no_event_stream_and_says_how_it_began() -> None:
    with pytest.raises(StreamBroken) as raised:
        read("<html><body>Sign in with key sk-live-123456</body></html>\n")
    message = str(raised.value)
    assert message.startswith("https://gw.example/v1 did not answer with an event stream")
    assert "<html><body>Sign in" in message and "sk-live-123456" not in message


def test_an_empty_body_is_an_empty_stream_for_the_parser_to_call_cut() -> None:
    assert read("") == [] and read("\n\n") == []


def test_one_json_object_as_the_whole_body_is_the_answer_s_one_event() -> None:
    # a server that answered `stream: true` with a whole completion, as text/plain
    whole = '{"choices":[{"index":0,"message":{"role":"assistant","content":"Hi"}}]}'
    assert read(whole[:20], whole[20:] + "\n") == [("message", whole)]


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ('event: message_start\r\ndata: {"a":1}\r\n\r\n', [("message_start", '{"a":1}')]),
        ('data: {"a":\r\ndata: 1}\r\n\r\n', [("message", '{"a":\n1}')]),
        ('data: {"a":1}\r\r', [("message", '{"a":1}')]),
    ],
)
def test_a_line_end_split_between_two_reads_is_still_one_line_end(
    body: str, expected: list[tuple[str, str]]
) -> None:
    # a CRLF whose CR ends one read and LF begins the next is one line end: read as two, an
    # empty line between them would dispatch the event half-read (its name, or the first
    # line of its data, alone)
    for cut in range(1, len(body)):
        assert read(body[:cut], body[cut:]) == expected, cut


def test_a_key_cut_by_the_quote_of_a_body_is_still_redacted() -> None:
    # the quote of a body that is no stream is cut to its first characters: a key the body
    # echoes, cut in two by that, must not show its first half
    key = "gw7Hq2Lm9Xc4Vb8Nz1Kd5Rt3Yp6Wf0Js"
    endpoint = Endpoint("openai", "https://gw.example/v1", "OPENAI_API_KEY", "OPENAI_MODEL", (key,))
    body = "<html><body><p>Your request to this gateway was refused, it says, for " + key + "</p>\n"
    with pytest.raises(StreamBroken) as raised:
        list(events(iter([body]), endpoint, "m1"))
    assert key[:8] not in str(raised.value) and "[reda" in str(raised.value)
