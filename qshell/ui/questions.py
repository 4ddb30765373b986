"""The questions both interactive front-ends ask, and how answers are read.

`question_text(request)` is the one line asked after the renderer has shown the call;
`parse_answer(text)` turns `y`, `a` or `n [reason]` (and their long forms) into a
PermissionReply, or None when the answer is not understood (the front-end asks again).
`ask_until` asks either until it is answered. `APPLY_QUESTION` is asked after the renderer has shown an accepted speculation's commands
and changes; `parse_apply` reads `a`, `r` or `d` (and their long forms) as an ApplyChoice.
Pure functions; any thread.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from qshell.agent.events import ApplyChoice, PermissionAnswer, PermissionReply, PermissionRequested

T = TypeVar("T")

_YES = {"y", "yes", "once", "ok"}
_ALWAYS = {"a", "always"}
_NO = {"n", "no", "deny"}
_APPLY_WORDS = {
    ApplyChoice.APPLY: {"a", "apply", "y", "yes"},
    ApplyChoice.RERUN: {"r", "rerun", "re-run", "run"},
    ApplyChoice.DISCARD: {"d", "discard", "n", "no"},
}
APPLY_QUESTION = "Use it? [a]pply its changes, [r]e-run for real (commands ask first), [d]iscard: "
APPLY_RETRY = "please answer a (apply), r (re-run for real) or d (discard)"
ANSWER_RETRY = "please answer y, a or n (optionally followed by a reason)"


def ask_until(
    read: Callable[[str], str],
    say: Callable[[str], None],
    question: str,
    parse: Callable[[str], T | None],
    *,
    retry: str,
    at_end: T,
) -> T:
    """Ask `question` with `read` until `parse` understands the answer (`say`ing `retry`
    after each it does not); `at_end` when input ends first."""
    while True:
        try:
            answer = parse(read(question))
        except EOFError:
            return at_end
        if answer is not None:
            return answer
        say(retry)


def question_text(request: PermissionRequested) -> str:
    return f"Allow {request.name}? [y]es, [a]lways this session, [n]o (n <reason> tells the model why): "


def parse_answer(text: str) -> PermissionReply | None:
    word, _, rest = text.strip().partition(" ")
    word = word.lower().rstrip(",.:;")
    if word in _YES and not rest.strip():
        return PermissionReply(PermissionAnswer.ALLOW_ONCE)
    if word in _ALWAYS and not rest.strip():
        return PermissionReply(PermissionAnswer.ALLOW_ALWAYS)
    if word in _NO:
        return PermissionReply(PermissionAnswer.DENY, rest.strip())
    return None


def parse_apply(text: str) -> ApplyChoice | None:
    word = text.strip().lower().rstrip(",.:;")
    for choice, words in _APPLY_WORDS.items():
        if word in words:
            return choice
    return None


def exit_text(session_id: str) -> str:
    return f"session {session_id} saved; resume it with: qshell --resume {session_id}"
