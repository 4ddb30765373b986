"""Tab completion for the REPL's prompt: slash commands, their first argument, `@path` mentions.

`QshellCompleter` is the prompt_toolkit `Completer` the REPL's prompt session uses: at the
start of a one-line input a `/name` completes to the commands of slash.py (with their help
as meta) and, after a space, to the first argument that command offers; anywhere else a
word starting with `@` completes to paths the session may mention (agent/attachments.py,
gitignore-aware). It only proposes text: it never runs a command or reads a file's
content, and it knows nothing of the prompt's keys or the turn. prompt_toolkit calls it
on the prompt's thread (the main thread).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from prompt_toolkit.completion import Completer, Completion
from prompt_toolkit.document import Document

from qshell.agent.attachments import complete_mention
from qshell.agent.conversation import Conversation
from qshell.ui.slash import COMMANDS


class QshellCompleter(Completer):
    """Slash commands and their first argument; `@path` mentions (gitignore-aware)."""

    def __init__(self, conversation: Conversation) -> None:
        self.conversation = conversation

    def get_completions(self, document: Document, complete_event: Any) -> Iterable[Completion]:
        before = document.text_before_cursor
        if before.startswith("/") and "\n" not in before:
            name, space, arg = before.partition(" ")
            if not space:
                for command in COMMANDS.values():
                    if command.name.startswith(name):
                        yield Completion(command.name, -len(name), display_meta=command.help)
                return
            chosen = COMMANDS.get(name)
            if chosen is not None and " " not in arg:
                for choice in chosen.arguments:
                    if choice.startswith(arg):
                        yield Completion(choice, -len(arg))
                return
        word = before.split()[-1] if before.split() and not before[-1].isspace() else ""
        if word.startswith("@"):
            paths = self.conversation.session.tool_context.paths
            for candidate in complete_mention(word[1:], paths):
                yield Completion(candidate, -(len(word) - 1))
