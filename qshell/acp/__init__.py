"""The ACP front-end: qshell as an Agent Client Protocol agent for editors (`qshell --acp`).

Zed, JetBrains, Emacs agent-shell, Neovim and other ACP clients start `qshell --acp` and
talk JSON-RPC over its stdio. This package renders the loop's events as ACP session
updates and calls Conversation verbs, like the terminal front-ends in `ui/`; it never
reaches a provider, a tool or the wiring (composition hands it `open_conversation`). The
SDK (`agent-client-protocol`, the `acp` extra) is imported only by `run_acp`, which says
in one line how to install it when it is missing. Main thread (server.py: one asyncio
loop; turns in workers).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from qshell.errors import ConfigError
from qshell.extras import install_command

if TYPE_CHECKING:
    from qshell.acp.server import OpenConversation


def run_acp(open_conversation: OpenConversation, *, notes: Sequence[str] = ()) -> int:
    """Serve ACP on stdin/stdout until the client hangs up; the process's exit code."""
    try:
        import acp  # noqa: F401  (the SDK, not this package)
    except ImportError:
        raise ConfigError(
            "--acp needs the Agent Client Protocol SDK, which is not installed: "
            + install_command("acp")
        ) from None
    from qshell.acp.server import serve

    return serve(open_conversation, notes=notes)
