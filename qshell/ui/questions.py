"""The questions both interactive front-ends ask, and how answers are read.

`question_text(request, keyed=…)` is the one line asked after the renderer has shown the
call, and `apply_question(keyed=…)` the one asked after an accepted speculation's commands
and changes: keyed, for the full REPL, where one key answers (`PERMISSION_KEYS`,
`REASON_KEY`, `APPLY_KEYS`: keyed.py reads them), else for a front-end that reads a line
(plain mode, Emacs), which the text says ends with Enter. There `parse_answer(text)` turns
`y`, `a` or `n [reason]` (and their long forms) into a PermissionReply, and `parse_apply`
`a`, `r` or `d` into an ApplyChoice, or None when the answer is not understood; `ask_until`
asks until it is answered. Pure functions; any thread.
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
_APPLY_CHOICES = "[a]pply its changes, [r]e-run for real (commands ask first), [d]iscard"
APPLY_KEYS = {
    "a": ("apply", ApplyChoice.APPLY),
    "r": ("re-run for real", ApplyChoice.RERUN),
    "d": ("discard", ApplyChoice.DISCARD),
}
PERMISSION_KEYS = {
    "y": ("yes", PermissionReply(PermissionAnswer.ALLOW_ONCE)),
    "a": ("always", PermissionReply(PermissionAnswer.ALLOW_ALWAYS)),
    "n": ("no", PermissionReply(PermissionAnswer.DENY)),
}
REASON_KEY = "t"
REASON_PROMPT = "No. Tell the model why (Enter sends it): "
KEYED = "press one key: "
LINED = "then Enter: "
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


def question_text(request: PermissionRequested, *, keyed: bool) -> str:
    """The permission question: one key answers it (`keyed`), or a line and Enter."""
    asked = f"Allow {request.name}? [y]es, [a]lways this session, "
    if keyed:
        return f"{asked}[n]o, [{REASON_KEY}]ell the model why not — {KEYED}"
    return f"{asked}[n]o (n <reason> tells the model why), {LINED}"


def apply_question(*, keyed: bool) -> str:
    """The question before an accepted speculation's changes are applied."""
    return f"Use it? {_APPLY_CHOICES} — {KEYED if keyed else LINED}"


def denied_because(reason: str) -> PermissionReply:
    return PermissionReply(PermissionAnswer.DENY, reason.strip())


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
