"""A scripted ACP client, as an editor is one, for driving `python -m qshell --acp`.

`Editor` implements the client side of the SDK: it records every session update, answers
permission questions with the options it is told to pick (in order), and holds unsaved
buffers that the agent's `fs/read_text_file` / `fs/write_text_file` calls read and write
(a path with no buffer is read from disk; a write only changes the buffer, as an editor's
does until the user saves). `spawn` starts the agent the way an editor does, with the
test's isolated environment and the scripted server as its provider, stderr to a file.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, cast

from acp import (
    PROTOCOL_VERSION,
    Client,
    ReadTextFileResponse,
    RequestPermissionResponse,
    WriteTextFileResponse,
    spawn_agent_process,
)
from acp.client.connection import ClientSideConnection
from acp.schema import (
    AllowedOutcome,
    ClientCapabilities,
    FileSystemCapabilities,
    PermissionOption,
    ToolCallUpdate,
)

from tests.acp.raw import agent_env
from tests.fakes.llm_server import ScriptedLLMServer


class Editor:
    def __init__(self, answers: list[str] | None = None) -> None:
        self.answers = list(answers or [])
        self.updates: list[Any] = []
        self.questions: list[tuple[ToolCallUpdate, list[PermissionOption]]] = []
        self.buffers: dict[str, str] = {}
        self.reads: list[str] = []
        self.writes: list[tuple[str, str]] = []

    async def session_update(self, session_id: str, update: Any, **_: Any) -> None:
        self.updates.append(update)

    async def request_permission(
        self, session_id: str, tool_call: ToolCallUpdate, options: list[PermissionOption], **_: Any
    ) -> RequestPermissionResponse:
        self.questions.append((tool_call, options))
        chosen = self.answers.pop(0)
        return RequestPermissionResponse(
            outcome=AllowedOutcome(outcome="selected", option_id=chosen)
        )

    async def read_text_file(self, session_id: str, path: str, **_: Any) -> ReadTextFileResponse:
        self.reads.append(path)
        text = self.buffers[path] if path in self.buffers else Path(path).read_text()
        return ReadTextFileResponse(content=text)

    async def write_text_file(
        self, session_id: str, path: str, content: str, **_: Any
    ) -> WriteTextFileResponse:
        self.writes.append((path, content))
        self.buffers[path] = content
        return WriteTextFileResponse()

    def of(self, kind: str) -> list[Any]:
        """The updates of one `sessionUpdate` kind, in order."""
        return [u for u in self.updates if u.session_update == kind]

    def text(self, kind: str = "agent_message_chunk") -> str:
        return "".join(u.content.text for u in self.of(kind))


FILES = ClientCapabilities(fs=FileSystemCapabilities(read_text_file=True, write_text_file=True))


@asynccontextmanager
async def spawn(
    editor: Editor, server: ScriptedLLMServer, project: Path, stderr: Path
) -> AsyncIterator[ClientSideConnection]:
    """`python -m qshell --acp` in `project`, connected to `editor` and initialized."""
    with stderr.open("ab") as log:
        async with spawn_agent_process(
            cast(Client, editor),  # it answers only the calls these tests make
            sys.executable,
            "-m",
            "qshell",
            "--acp",
            env=agent_env(server),
            cwd=project,
            transport_kwargs={"stderr": log.fileno()},
        ) as (conn, _process):
            reply = await conn.initialize(
                protocol_version=PROTOCOL_VERSION, client_capabilities=FILES
            )
            assert reply.protocol_version == 1
            yield conn
