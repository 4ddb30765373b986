"""The ACP agent `qshell --acp` runs: JSON-RPC over stdio, one Conversation per session.

`QshellAgent` answers the client's requests: `initialize` (protocol version 1; it
advertises `loadSession`, text and embedded-context prompts, no images, audio or MCP, no
authentication methods), `authenticate` (success: there is nothing to authenticate, the
provider's key comes from the environment), `session/new` and `session/load` (a
qshell transcript resumed and replayed as updates before the answer), `session/prompt`
(prompting.py), `session/cancel` and `session/set_mode` (the approval modes). Each
session's conversation comes from the `open_conversation` composition built; when the
client can read or write text files, the session's tools do it through the client
(bridge.py `ClientFiles`), so the editor's unsaved buffers are what the agent sees. No
suggestions and no speculation run here. `serve` owns the process's stdio: stdout carries
only JSON-RPC (streams.py moves it off fd 1, which then is stderr's), logs go to stderr.
Everything runs on one asyncio loop in the main thread; turns run in workers.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol, cast

from acp import (
    InitializeResponse,
    LoadSessionResponse,
    NewSessionResponse,
    PromptResponse,
    RequestError,
    SetSessionModeResponse,
    run_agent,
    stdio_streams,
)
from acp.interfaces import Agent, Client
from acp.schema import (
    AuthenticateResponse,
    ClientCapabilities,
    Implementation,
    SessionMode,
    SessionModeState,
)
from pydantic import ValidationError

from qshell.acp import handshake, streams, updates
from qshell.acp.bridge import ClientFiles
from qshell.acp.prompting import INTERNAL_ERROR, INVALID_PARAMS, AcpSession, PromptRun, prompt_text
from qshell.agent.conversation import Conversation
from qshell.config import ApprovalMode, project_root_for
from qshell.errors import InputError, QshellError

log = logging.getLogger(__name__)

STDIO_LIMIT_BYTES = 50 * 1024 * 1024  # one JSON-RPC line: a whole file read through the client
MODES = {
    ApprovalMode.DEFAULT: ("Default", "asks before edits, commands and fetches"),
    ApprovalMode.AUTO_EDIT: ("Auto-edit", "edits files without asking; asks before commands"),
    ApprovalMode.PLAN: ("Plan", "reads and plans; changes nothing"),
    ApprovalMode.YOLO: ("Yolo", "runs every tool call without asking"),
}


class OpenConversation(Protocol):
    """The composition's factory of one session's conversation (compose.open_acp)."""

    def __call__(
        self,
        root: Path,
        *,
        resume_id: str | None = None,
        read: Callable[[Path], str] | None = None,
        write: Callable[[Path, str], None] | None = None,
    ) -> Conversation: ...


def modes(current: ApprovalMode) -> SessionModeState:
    available = [SessionMode(id=m.value, name=n, description=d) for m, (n, d) in MODES.items()]
    return SessionModeState(current_mode_id=current.value, available_modes=available)


def request_error(exc: QshellError) -> RequestError:
    code = INVALID_PARAMS if isinstance(exc, InputError) else INTERNAL_ERROR
    return RequestError(code, str(exc))


class QshellAgent:
    """qshell as an ACP agent: the client's requests mapped to Conversation verbs."""

    def __init__(self, open_conversation: OpenConversation) -> None:
        self._open = open_conversation
        self._client: Client | None = None
        self._caps = ClientCapabilities()
        self._sessions: dict[str, AcpSession] = {}

    def on_connect(self, conn: Client) -> None:
        self._client = conn

    @property
    def client(self) -> Client:
        assert self._client is not None, "on_connect runs before any request"
        return self._client

    async def initialize(
        self,
        protocol_version: int,
        client_capabilities: ClientCapabilities | None = None,
        client_info: Implementation | None = None,
        **_: Any,
    ) -> InitializeResponse:
        self._caps = client_capabilities or ClientCapabilities()
        # the protocol qshell speaks, whatever was asked, and what it can do: the answer
        # cli.py gives before the SDK loads when `initialize` comes first (handshake.py)
        return InitializeResponse.model_validate(handshake.initialize_result())

    def initialized(self, params: dict[str, Any]) -> None:
        """`initialize` was answered before the SDK loaded (handshake.py): keep what the
        client said it can do, as `initialize` does."""
        try:
            self._caps = ClientCapabilities.model_validate(params.get("clientCapabilities") or {})
        except ValidationError:
            self._caps = ClientCapabilities()

    async def authenticate(self, method_id: str, **_: Any) -> AuthenticateResponse | None:
        """Nothing to authenticate: qshell advertises no method, the provider's key comes
        from the environment. A client that asks anyway is told yes (a refusal would only
        stop it from starting a session)."""
        log.info("authenticate(%s): qshell needs no authentication", method_id)
        return AuthenticateResponse()

    async def new_session(self, cwd: str, mcp_servers: Any = None, **_: Any) -> NewSessionResponse:
        state = await self._start(cwd, None, mcp_servers)
        return NewSessionResponse(
            session_id=state.id, modes=modes(state.conversation.approval_mode)
        )

    async def load_session(
        self, cwd: str, session_id: str, mcp_servers: Any = None, **_: Any
    ) -> LoadSessionResponse:
        state = await self._start(cwd, session_id, mcp_servers)
        history = state.conversation.session.history
        shown = updates.replay(
            history, kinds=state.kinds(), root=state.root, id_of=state.tool_ids.of
        )
        for update in shown:
            await self.client.session_update(session_id=state.id, update=update)
        return LoadSessionResponse(modes=modes(state.conversation.approval_mode))

    async def _start(self, cwd: str, resume_id: str | None, mcp_servers: Any) -> AcpSession:
        if not Path(cwd).is_absolute():
            raise RequestError(INVALID_PARAMS, f"cwd must be an absolute path, not '{cwd}'")
        if not Path(cwd).is_dir():
            raise RequestError(INVALID_PARAMS, f"cwd '{cwd}' is not a directory")
        running = self._sessions.get(resume_id or "")
        if running is not None and running.running:
            raise RequestError(
                INVALID_PARAMS, f"session '{resume_id}' has a prompt running: cancel it first"
            )
        if mcp_servers:
            log.warning("qshell does not connect to MCP servers; ignoring %d", len(mcp_servers))
        files = ClientFiles(self.client, asyncio.get_running_loop())
        fs = self._caps.fs
        read = files.read if fs is not None and fs.read_text_file else None
        write = files.write if fs is not None and fs.write_text_file else None
        root = project_root_for(Path(cwd))
        try:
            conversation = await asyncio.to_thread(
                self._open, root, resume_id=resume_id, read=read, write=write
            )
        except QshellError as exc:
            raise request_error(exc) from None
        files.session_id = conversation.session.id
        state = AcpSession(conversation, files=files if read or write else None)
        old = self._sessions.pop(state.id, None)
        if old is not None:
            old.conversation.close()
        self._sessions[state.id] = state
        return state

    def _session(self, session_id: str) -> AcpSession:
        state = self._sessions.get(session_id)
        if state is None:
            raise RequestError(INVALID_PARAMS, f"no session '{session_id}' in this process")
        return state

    async def set_session_mode(
        self, mode_id: str, session_id: str, **_: Any
    ) -> SetSessionModeResponse | None:
        state = self._session(session_id)
        try:
            mode = ApprovalMode(mode_id)
        except ValueError:
            known = ", ".join(m.value for m in ApprovalMode)
            raise RequestError(INVALID_PARAMS, f"no mode '{mode_id}' (modes: {known})") from None
        state.conversation.set_approval_mode(mode)
        return SetSessionModeResponse()

    async def prompt(self, prompt: Sequence[Any], session_id: str, **_: Any) -> PromptResponse:
        state = self._session(session_id)
        if state.running:
            raise RequestError(INVALID_PARAMS, "a prompt is already running in this session")
        text = prompt_text(prompt)
        if text.empty:
            raise RequestError(INVALID_PARAMS, "the prompt is empty")
        state.running, state.cancelled = True, False
        try:
            stop = await PromptRun(self.client, state).run(text)
        except QshellError as exc:  # raised before the turn started (its @mentions)
            raise request_error(exc) from None
        finally:
            state.running = False
        return PromptResponse(stop_reason=stop)

    async def cancel(self, session_id: str, **_: Any) -> None:
        state = self._sessions.get(session_id)
        if state is not None and state.running:
            state.cancelled = True
            state.conversation.cancel()
            if state.asking is not None:  # an editor need not answer its open question
                state.asking.cancel()
            if state.files is not None:  # nor a read or write it was asked for
                state.files.cancel()

    def close(self) -> None:
        """End every session (their transcripts closed, their turns cancelled)."""
        for state in self._sessions.values():
            state.conversation.cancel()
            state.conversation.close()
        self._sessions.clear()


async def _serve(agent: QshellAgent) -> None:
    with streams.opened():  # a stray print or a child's output cannot reach the client
        reader, writer = await stdio_streams(limit=STDIO_LIMIT_BYTES)
    early = handshake.taken()  # cli.py answered `initialize` before qshell loaded
    if early.rest:
        reader.feed_data(early.rest)
    if early.params is not None:
        agent.initialized(early.params)
    try:
        # the SDK answers "method not found" for what the agent does not define
        await run_agent(cast(Agent, agent), writer, reader)
    finally:
        agent.close()


def serve(open_conversation: OpenConversation, *, notes: Sequence[str] = ()) -> int:
    """Run the agent until the client closes stdin; 0, or 130 when interrupted."""
    streams.claim()  # cli claimed them before loading plugins; this is for other callers
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING, format="qshell: %(message)s")
    for note in notes:
        log.warning("%s", note)
    try:
        asyncio.run(_serve(QshellAgent(open_conversation)))
    except KeyboardInterrupt:
        return 130
    return 0
