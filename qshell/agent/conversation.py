"""Conversation: the controller an interactive front-end drives.

It owns the current session, the main ToolRunner (interactive, with checkpoints for
`/undo`), the Router its turns run with (built by composition: latency/router.py), the
per-turn CancelToken and the notes to pass to the model with the next prompt.
Front-ends call its verbs — `turn(text)`, `cancel()`, `compact()`, `undo()`,
`set_model()`, `set_approval_mode()`, `clear()`, `resume()`, `close()` — and render the
events the generators yield (shown to the gate plugins' observers first, with their
failures as notices: agent/plugin_events.py); they never touch the provider or the
tools. Work bound to the conversation's life (its suggestions and speculations) registers
with `on_close` and is ended first thing in `close()`. `t_user_idle` is how long after
its start a turn let the user type again (the front-end calls `user_idle()` at that
moment: the turn's end, or the start of a summary left to stream in background, D3).
A short reply typed while a suggestion showed (the front-end passes it to `turn`) is sent
with one bracketed line naming that suggestion, so the model knows what a "no" answers.
A turn's generator must be consumed in one thread (the
front-end's worker); `cancel()` may be called from any thread.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from datetime import datetime

from qshell.agent import transcript as transcripts
from qshell.agent.attachments import Expanded, expand_mentions
from qshell.agent.checkpoints import Checkpoints, UndoReport
from qshell.agent.compaction import compact, prepare_summary
from qshell.agent.events import Event, FailureKind, SecretsRedacted, TurnFailed
from qshell.agent.loop import run_turn
from qshell.agent.plugin_events import observed
from qshell.agent.session import Session, SessionFactory, SessionRequest
from qshell.cancel import CancelToken
from qshell.config import ApprovalMode
from qshell.errors import Cancelled, QshellError
from qshell.latency.retrieval import BUDGET_BYTES, shown_files
from qshell.latency.router import Router
from qshell.permissions.runner import MainToolRunner

MANUAL_COMPACT_REASON = "requested with /compact"
# a reply this short (both limits) to a suggestion on screen is ambiguous without it: "no"
SHORT_REPLY_WORDS = 4
SHORT_REPLY_CHARS = 30
# a turn prepared ahead: (main runner, cancel token, checkpoint-these-files) -> its events
PreparedTurn = Callable[[MainToolRunner, CancelToken, Callable[[list[str]], None]], Iterator[Event]]


@dataclass(frozen=True, slots=True)
class SessionSummary:
    """One earlier session of this project, for `/resume`."""

    session_id: str
    modified: datetime
    first_prompt: str
    current: bool


ON_SCREEN_NOTE = "[qshell note, not the user's words: the suggestion on screen was"


def on_screen_line(text: str, shown: str | None) -> str | None:
    """The line that tells the model which suggestion was on screen when the user typed
    `text`, or None: only for a short reply (at most SHORT_REPLY_WORDS words and
    SHORT_REPLY_CHARS characters, one line, not a slash command) that does not contain
    the suggestion itself (accepted, or filled and extended: the model sees its words)."""
    reply, suggestion = text.strip(), (shown or "").strip()
    if not suggestion or not reply or reply.startswith("/") or "\n" in reply:
        return None
    if len(reply) > SHORT_REPLY_CHARS or len(reply.split()) > SHORT_REPLY_WORDS:
        return None
    if suggestion.casefold() in reply.casefold():
        return None
    quoted = json.dumps(" ".join(suggestion.split()), ensure_ascii=False)
    return f"{ON_SCREEN_NOTE} {quoted}]"


def attach(session: Session, text: str) -> tuple[Expanded, list[SecretsRedacted]]:
    """`text` with the files it mentions (`@path`) attached, and for a small model the
    files it is about (latency/retrieval.py); each attached file is noted as read (the
    model sees it whole), each redaction in them comes back as an event, and the session
    keeps the result as this turn's typed prompt (what a small model's tool offer reads:
    not the piped data, editor context or notes the front-end puts around it)."""
    tools = session.tool_context
    implied = shown_files(text, tools.paths.root) if session.options.files_by_prompt else []
    expanded = expand_mentions(
        text, tools.paths, tools.secrets, implied=implied, implied_budget=BUDGET_BYTES
    )
    for path, seen in expanded.seen.items():
        tools.reads.note(tools.view, path, seen)
    session.typed_prompt = expanded.text
    redacted = [SecretsRedacted.of(f"@{name}", k) for name, k in expanded.redacted.items()]
    return expanded, redacted


class Conversation:
    """The interactive session's state and verbs."""

    def __init__(
        self,
        open_session: SessionFactory,
        request: SessionRequest,
        *,
        fast_model: str = "",
        show_reasoning: bool = True,
        router: Router | None = None,
    ) -> None:
        self._open = open_session
        # how its turns' rounds are routed and logged (latency/router.py), for every
        # session it opens; a prepared turn that runs live gets it too (`router`)
        self.router = router or Router()
        # what every later session of this conversation keeps (a new one for /clear)
        self._fresh = replace(request, continue_latest=False, resume_id=None)
        self.show_reasoning = show_reasoning  # a front-end setting the renderers read
        self.session = open_session(request)
        self.checkpoints = Checkpoints(self.session.project_root)
        self.runner = self._new_runner(self.session.approval_mode)
        self.fast_model = fast_model
        self._cancel = CancelToken()
        self._closing = CancelToken()  # fired by close(): what on_close registered runs
        self._notes: list[str] = []
        self.last_expansion: Expanded | None = None
        self._turn_started = time.monotonic()
        # seconds from the last turn's start until the user could type again; None until
        # the front-end says so (`user_idle`)
        self.t_user_idle: float | None = None

    def _new_runner(self, mode: ApprovalMode) -> MainToolRunner:
        return MainToolRunner(mode, interactive=True, checkpoints=self.checkpoints)

    # -- turns ---------------------------------------------------------------------------

    def turn(
        self, text: str, *, context: str = "", shown_suggestion: str | None = None
    ) -> Iterator[Event]:
        """Run one user turn: @mentions attached, pending notes prepended, files checkpointed.
        `context` (what the front-end sends along that the user did not type: an editor's
        embedded files) follows the text as it is; its @words attach nothing.
        `shown_suggestion` is the suggestion the user saw while typing `text`: a short
        reply gets one bracketed line naming it (`on_screen_line`), so the model knows what
        a "no" answers; the transcript keeps the message as sent.

        The cancel token is created here, eagerly, so a `cancel()` that arrives before the
        returned generator first runs is not lost.
        """
        cancel = self._cancel = CancelToken()
        self._started_turn()
        tools = self.session.tool_context
        expanded, redacted = attach(self.session, text)
        self.last_expansion = expanded
        if context:
            screened = tools.secrets.redact(context)
            if screened.findings:
                redacted.append(SecretsRedacted.of("the attached context", screened.kinds))
            context = screened.text
        prompt = f"{expanded.text}\n{context}" if context else expanded.text
        on_screen = on_screen_line(text, shown_suggestion)
        if on_screen is not None:
            prompt = f"{prompt}\n\n{on_screen}"
        if self._notes:
            prompt = "\n".join(self._notes) + "\n\n" + prompt
            self._notes.clear()
        return self._observed(self._turn(prompt, cancel, redacted))

    def _started_turn(self) -> None:
        self._turn_started = time.monotonic()
        self.t_user_idle = None

    def user_idle(self) -> None:
        """The user can type again now: notes `t_user_idle` for the turn (once)."""
        if self.t_user_idle is None:
            self.t_user_idle = time.monotonic() - self._turn_started

    def _observed(self, events: Iterator[Event]) -> Iterator[Event]:
        return observed(events, self.session.tool_context.plugins)

    def _turn(
        self, prompt: str, cancel: CancelToken, said: Sequence[Event] = ()
    ) -> Iterator[Event]:
        yield from said
        self.checkpoints.begin_turn()
        try:
            yield from run_turn(self.session, prompt, self.runner, cancel, router=self.router)
            prepare_summary(self.session)  # the next turn's compaction, if it nears
        finally:
            self.checkpoints.end_turn()

    def run_prepared(self, prepared: PreparedTurn) -> Iterator[Event]:
        """A turn whose work was prepared ahead (an accepted speculation): `prepared` gets the
        main runner, this turn's cancel token and a callback to checkpoint files before they
        are written, so `/undo` covers them like any edit."""
        cancel = self._cancel = CancelToken()
        self._started_turn()
        self.last_expansion = None
        return self._observed(self._prepared(prepared, cancel))

    def _prepared(self, prepared: PreparedTurn, cancel: CancelToken) -> Iterator[Event]:
        root = self.session.project_root
        self.checkpoints.begin_turn()
        try:

            def checkpoint(files: list[str]) -> None:
                for name in files:
                    self.checkpoints.save(root / name)

            yield from prepared(self.runner, cancel, checkpoint)
            prepare_summary(self.session)
        finally:
            self.checkpoints.end_turn()

    def compact(self, instructions: str = "") -> Iterator[Event]:
        """Replace the history with a summary, as a stream of events like a turn."""
        cancel = self._cancel = CancelToken()
        return self._observed(self._compact(instructions, cancel))

    def _compact(self, instructions: str, cancel: CancelToken) -> Iterator[Event]:
        if not self.session.history:
            yield TurnFailed(FailureKind.INPUT, "there is nothing to compact yet")
            return
        try:
            yield compact(
                self.session, cancel, reason=MANUAL_COMPACT_REASON, instructions=instructions
            )
        except Cancelled:
            yield TurnFailed(FailureKind.CANCELLED, "cancelled")
        except QshellError as exc:
            yield TurnFailed(FailureKind.of(exc), str(exc))

    def cancel(self) -> None:
        """Cancel the running turn or compaction (any thread)."""
        self._cancel.cancel()

    @property
    def cancel_token(self) -> CancelToken:
        return self._cancel

    # -- settings of this session ----------------------------------------------------------

    @property
    def model(self) -> str:
        return self.session.model

    def set_model(self, name: str) -> None:
        self.session.model = name

    def set_fast_model(self, name: str) -> None:
        self.fast_model = name

    @property
    def approval_mode(self) -> ApprovalMode:
        return self.runner.mode

    def set_approval_mode(self, mode: ApprovalMode) -> None:
        self.runner.mode = mode
        self.session.approval_mode = mode

    # -- history -------------------------------------------------------------------------------

    def undo(self) -> UndoReport:
        """Restore the files the last changing turn edited, and tell the model next time."""
        report = self.checkpoints.undo_last()
        changed = report.restored + report.deleted
        if changed:
            self._notes.append(
                "[The user undid your file changes from an earlier turn; these files are back "
                f"to their previous state: {', '.join(changed)}]"
            )
        return report

    def clear(self) -> str:
        """Start a new, empty session (the old one stays resumable); returns the old id."""
        old = self.session
        self._switch(self._open(self._fresh))
        return old.id

    def resume(self, session_id: str) -> None:
        """Switch to an earlier session of this project (InputError when unknown)."""
        self._switch(self._open(replace(self._fresh, resume_id=session_id)))

    def _switch(self, session: Session) -> None:
        model, mode = self.session.model, self.runner.mode
        self.session.close()
        self.session = session
        self.session.model = model
        self.session.approval_mode = mode
        self.checkpoints = Checkpoints(self.session.project_root)
        # a new session starts with no "always allow" answers and no undo history
        self.runner = self._new_runner(mode)
        self._notes.clear()

    def sessions(self) -> list[SessionSummary]:
        """This project's sessions, newest first."""
        transcript = self.session.transcript
        if transcript is None:
            return []
        summaries = []
        for path in transcript.path.parent.glob("*.jsonl"):
            summaries.append(
                SessionSummary(
                    session_id=path.stem,
                    modified=datetime.fromtimestamp(path.stat().st_mtime),
                    first_prompt=transcripts.first_prompt(path),
                    current=path.stem == self.session.id,
                )
            )
        return sorted(summaries, key=lambda s: s.modified, reverse=True)

    def on_close(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Run `callback` when the conversation closes (now, if it has); returns an
        unregister function. Errors in it are logged, never raised into `close`."""
        return self._closing.on_cancel(callback)

    def close(self) -> str:
        """End what `on_close` registered, then close the session; returns its id for the
        "resume with" hint."""
        self._closing.cancel()
        self.session.close()
        return self.session.id
