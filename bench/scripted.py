"""Script pieces the benchmarks share for the scripted LLM server: pacing, matching, filler.

A bench scripts the server of tests/fakes by content: `asks(prompt)` matches the request
of a turn's first round, `after_call(id)` the round that carries a call's result,
`asked_to_predict` a request whose system prompt asks the answer to end with the next
prompt, and `suggestion_after(prompt, prompts)` a suggestion request (its marker) whose
history's newest prompt is `prompt` (`last_prompt`). `paced` gives a reply the latency that makes its whole stream take a given time,
and `filler` makes an answer of a given size. Values and pure functions only: no server,
no I/O, so any thread may use them.
"""

from __future__ import annotations

from qshell.agent.conversation import ON_SCREEN_NOTE
from qshell.agent.prediction import PREDICTION_PROMPT
from qshell.followup.suggestion import SUGGESTION_MARKER
from tests.fakes.llm_server import Latency, Match, RecordedRequest, Reply
from tests.fakes.wire import TOKEN_CHARS, reply_tokens

FILLER = "The change keeps the code small and every name says what it does. "


def paced(reply: Reply, *, ttft_s: float, total_s: float) -> Reply:
    """`reply` with a latency that makes its whole stream take `total_s`: `ttft_s` to the
    first token, the rest of its tokens spread evenly over the time left."""
    tokens = reply_tokens(reply)
    stream_s = max(total_s - ttft_s, 1e-3)
    return Reply(
        content=reply.content,
        calls=reply.calls,
        latency=Latency(ttft_s=ttft_s, tokens_per_s=max(tokens - 1, 1) / stream_s),
    )


def filler(mark: str, tokens: int) -> str:
    """Text of about `tokens` tokens that begins with `mark` (to wait for on a screen)."""
    body = f"{mark}. " + FILLER * (tokens * TOKEN_CHARS // len(FILLER) + 1)
    return body[: tokens * TOKEN_CHARS].rstrip() + "."


def after_call(call_id: str) -> Match:
    """The request carries the result of the call `call_id`."""

    def test(request: RecordedRequest) -> bool:
        return any(result.tool_call_id == call_id for result in request.last_tool_results)

    return Match(test, f"result of {call_id}")


def asks(prompt: str) -> Match:
    """The request's last message is the user's `prompt` (a turn's first round), maybe
    followed by the line saying which suggestion was on screen (a short reply's)."""
    noted = f"{prompt}\n\n{ON_SCREEN_NOTE} "

    def test(request: RecordedRequest) -> bool:
        turns = request.turns
        if not turns or turns[-1].role != "user":
            return False
        text = turns[-1].text
        return text == prompt or (text.startswith(noted) and "\n" not in text[len(noted) :])

    return Match(test, f"asks {prompt!r}")


def asked_to_predict_test(request: RecordedRequest) -> bool:
    first = (request.body.get("messages") or [{}])[0]
    return first.get("role") == "system" and PREDICTION_PROMPT in str(first.get("content"))


asked_to_predict = Match(asked_to_predict_test, "the system prompt asks for the next prompt")


def last_prompt(request: RecordedRequest, prompts: frozenset[str]) -> str:
    """The newest of `prompts` the request's history carries as a user message."""
    seen = [t.text for t in request.turns if t.role == "user" and t.text in prompts]
    return seen[-1] if seen else "?"


def suggestion_after(prompt: str, prompts: frozenset[str]) -> Match:
    """A suggestion request (the marker in its last user text) whose newest user message
    among `prompts` is `prompt`: the prediction of what comes after `prompt`."""

    def test(request: RecordedRequest) -> bool:
        marked = SUGGESTION_MARKER in request.last_user_text
        return marked and last_prompt(request, prompts) == prompt

    return Match(test, f"suggestion after {prompt!r}")
