"""The permission question both interactive front-ends ask, and how answers are read.

`question_text(request)` is the one line asked after the renderer has shown the call;
`parse_answer(text)` turns `y`, `a` or `n [reason]` (and their long forms) into a
PermissionReply, or None when the answer is not understood (the front-end asks again).
Pure functions; any thread.
"""

from __future__ import annotations

from qshell.agent.events import PermissionAnswer, PermissionReply, PermissionRequested

_YES = {"y", "yes", "once", "ok"}
_ALWAYS = {"a", "always"}
_NO = {"n", "no", "deny"}


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


def exit_text(session_id: str) -> str:
    return f"session {session_id} saved; resume it with: qshell --resume {session_id}"
