"""The typed events of a turn: the whole vocabulary a front-end may see.

Events are frozen, slotted dataclasses: cheap at one per token, safe to buffer and replay.
Paired events share a key (`ToolStarted.key` is closed by the `ToolFinished` with the same
key): the call's id and its `response`, the history index of the message that made it,
since some servers number calls `call_0` in every response. A front-end is one `match` over `Event` ending in `case _: pass`, so adding an
event never breaks an old renderer. A `PermissionRequested` (and an `ApplyRequested`)
carries the future the front-end resolves; the turn blocks on it in its own thread. No I/O
here.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from concurrent.futures import Future
from dataclasses import dataclass, field

from qshell.errors import (
    AuthError,
    ConfigError,
    ContextTooLong,
    ExitCode,
    InputError,
    ModelNotFound,
    ProviderUnavailable,
    RateLimited,
    StreamBroken,
)
from qshell.llm.messages import FINISHED_STOPS, StopReason, Usage
from qshell.redaction import counted
from qshell.tools.base import ToolResult


class FailureKind(enum.StrEnum):
    AUTH = "auth"
    MODEL_NOT_FOUND = "model_not_found"
    CONTEXT_TOO_LONG = "context_too_long"
    RATE_LIMITED = "rate_limited"
    UNAVAILABLE = "unavailable"
    STREAM_BROKEN = "stream_broken"
    CONFIG = "config"
    INPUT = "input"
    MAX_TURNS = "max_turns"
    CANCELLED = "cancelled"
    ERROR = "error"

    @property
    def exit_code(self) -> ExitCode:
        return _EXIT_CODES.get(self, ExitCode.ERROR)

    @classmethod
    def of(cls, exc: BaseException) -> FailureKind:
        for exc_type, kind in _KINDS:
            if isinstance(exc, exc_type):
                return kind
        return cls.ERROR


_EXIT_CODES = {
    FailureKind.AUTH: ExitCode.AUTH,
    FailureKind.CONFIG: ExitCode.CONFIG,
    FailureKind.INPUT: ExitCode.INPUT,
    FailureKind.MAX_TURNS: ExitCode.MAX_TURNS,
    FailureKind.CANCELLED: ExitCode.CANCELLED,
}
_KINDS: tuple[tuple[type[BaseException], FailureKind], ...] = (
    (AuthError, FailureKind.AUTH),
    (ModelNotFound, FailureKind.MODEL_NOT_FOUND),
    (ContextTooLong, FailureKind.CONTEXT_TOO_LONG),
    (RateLimited, FailureKind.RATE_LIMITED),
    (ProviderUnavailable, FailureKind.UNAVAILABLE),
    (StreamBroken, FailureKind.STREAM_BROKEN),
    (ConfigError, FailureKind.CONFIG),
    (InputError, FailureKind.INPUT),
)


@dataclass(frozen=True, slots=True)
class TextDelta:
    text: str


@dataclass(frozen=True, slots=True)
class ReasoningDelta:
    """A fragment of the model's reasoning, shown apart from the answer (dimmed, foldable)."""

    text: str


NO_RESPONSE = -1  # a call event made outside a turn's history (a test's, a plugin's)
CallKey = tuple[int, str]  # (response, call_id): one call, wherever its id repeats


@dataclass(frozen=True, slots=True)
class ToolStarted:
    """A call starts. `response` is the history index of the assistant message that made
    it: with `call_id` it names the call within a session's turn (ids alone repeat across
    responses on some servers)."""

    call_id: str
    name: str
    args: Mapping[str, object]
    response: int = NO_RESPONSE

    @property
    def key(self) -> CallKey:
        return (self.response, self.call_id)


@dataclass(frozen=True, slots=True)
class ToolFinished:
    """A call ended with `result`; `response` as in its ToolStarted."""

    call_id: str
    name: str
    result: ToolResult
    response: int = NO_RESPONSE

    @property
    def key(self) -> CallKey:
        return (self.response, self.call_id)


class PermissionAnswer(enum.StrEnum):
    ALLOW_ONCE = "allow_once"
    ALLOW_ALWAYS = "allow_always"
    DENY = "deny"


@dataclass(frozen=True, slots=True)
class PermissionReply:
    answer: PermissionAnswer
    reason: str = ""


@dataclass(frozen=True, slots=True)
class PermissionRequested:
    """The loop needs the user's answer; the front-end resolves `future`."""

    call_id: str
    name: str
    args: Mapping[str, object]
    reason: str
    future: Future[PermissionReply] = field(compare=False)
    preview: str = ""  # what the call would do, e.g. the unified diff of an edit
    response: int = NO_RESPONSE  # as in ToolStarted

    @property
    def key(self) -> CallKey:
        return (self.response, self.call_id)


class ApplyChoice(enum.StrEnum):
    APPLY = "apply"  # keep the prepared answer: its file changes land in the project
    RERUN = "rerun"  # drop it and run the prompt for real, asking about each command
    DISCARD = "discard"  # drop it; the prompt does not run


class ChangeKind(enum.StrEnum):
    CHANGED = "changed"
    CREATED = "created"
    DELETED = "deleted"
    MODE = "mode"  # an existing directory's permission bits
    ATTRS = "attrs"  # an existing directory's xattrs or ACLs
    MODE_ATTRS = "mode+attrs"  # both


@dataclass(frozen=True, slots=True)
class FileChange:
    path: str  # relative to the project root
    kind: ChangeKind
    # the protected paths (protectedPaths) at or below `path` that the change touches
    protected: tuple[str, ...] = ()
    # the build cache it lies under (`__pycache__`, `.pytest_cache`, …), else "": the
    # apply question folds those into one line
    cache: str = ""


@dataclass(frozen=True, slots=True)
class ApplyRequested:
    """An accepted speculation did what a live turn in the same mode would have asked about
    (a command not proven read-only, a protected path…): before anything of it is shown or
    applied, the user chooses; the front-end resolves `future`. `commands` are the shell
    commands asked about, `calls` the other calls (as `tool {args}`), `changes` what
    applying would do to the project, deletions and protected paths among them."""

    prompt: str
    commands: tuple[str, ...]
    changes: tuple[FileChange, ...]
    future: Future[ApplyChoice] = field(compare=False)
    calls: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ApplyProgress:
    """Accept is applying a large prepared answer: `done` of `total` steps so far (each
    file is staged, then swapped in, so `total` is twice the files). Ctrl-C still cancels
    until the commit point, and nothing changes then."""

    done: int
    total: int

    @property
    def percent(self) -> int:
        return self.done * 100 // self.total if self.total else 100


@dataclass(frozen=True, slots=True)
class HistoryCompacted:
    """The history was replaced by a model-written summary (by /compact or automatically)."""

    reason: str
    messages_before: int
    messages_after: int


@dataclass(frozen=True, slots=True)
class Notice:
    """A one-line remark for the user that is not model output (e.g. why a shortcut was not taken)."""

    text: str


@dataclass(frozen=True, slots=True)
class SecretsRedacted(Notice):
    """Secrets were replaced by markers before `source` (a tool's result, an attachment)
    reached the model: `kinds` names each one's kind. Every front-end shows it as the
    Notice it is (one dim line); the values are in no event."""

    source: str
    kinds: tuple[str, ...]

    @classmethod
    def of(cls, source: str, kinds: tuple[str, ...]) -> SecretsRedacted:
        return cls(f"redacted {counted(kinds)} from {source}", source, kinds)


@dataclass(frozen=True, slots=True)
class TentativeText:
    """The text of the round that starts now may be withdrawn (a summary round on the fast
    model, D2): a front-end that can should keep it erasable until the turn ends."""


@dataclass(frozen=True, slots=True)
class TextWithdrawn:
    """The text since the last `TentativeText` is not the answer (the fast model started a
    tool call; the round runs again on the main model): take it off the screen if possible,
    and say `text` in one line."""

    text: str


@dataclass(frozen=True, slots=True)
class SpeculationAccepted:
    """The submitted prompt had already been run speculatively; its work was applied."""

    saved_s: float  # seed 000: min(accepted_at, completed_at) - started_at
    files: tuple[str, ...]  # files the speculation changed, now written to the project
    completed: bool  # False: it stopped at a boundary or was still running; the turn goes on


class RoundPosition(enum.StrEnum):
    """Where a round stands in its turn (its transcript usage record's `position`)."""

    FIRST = "first"  # no tool batch before it in the turn
    MIDDLE = "middle"  # after a batch, and asks for more calls
    SUMMARY = "summary"  # after a batch, and answers without calls


@dataclass(frozen=True, slots=True)
class RoundFinished:
    round: int
    usage: Usage


@dataclass(frozen=True, slots=True)
class SummaryStarted:
    """Every result of the last tool batch is terminal (`result_is_terminal`) and the next
    round only sums them up (D3, `summarizeInBackground`): an interactive front-end may give
    the prompt back now; a new message then cancels this round and its text is dropped."""

    round: int  # the number the summary round will have in its RoundFinished


@dataclass(frozen=True, slots=True)
class PredictionStarted:
    """The answer's visible text is complete: what still streams is its hidden next-prompt
    line (agent/prediction.py), a few dozen tokens. An interactive front-end may give the
    prompt back now; a line submitted meanwhile waits for the turn's end (never cancels it:
    the answer is the turn). A speculation never passes it on."""


@dataclass(frozen=True, slots=True)
class TurnFinished:
    """The model stopped. `stop_reason` says whether its answer finished (`end_turn`) or
    not (`max_tokens`, `refusal`, `content_filter`, …); `note` then says so in one line."""

    text: str
    usage: Usage
    rounds: int
    stop_reason: StopReason = "end_turn"
    note: str = ""
    # the next prompt the answer predicts (agent/prediction.py): "" when it left it empty,
    # None when the session does not ask for one or the answer had none
    prediction: str | None = None
    # how sure the answer's prediction line says it is (0–1); None: it did not say
    prediction_confidence: float | None = None
    # the answer is the last tool batch's output, no model round read it (latency/directives.py)
    skipped_round: bool = False
    # the sources the answer cites, numbered as its [n] marks (Perplexity's `citations`)
    citations: tuple[str, ...] = ()

    @property
    def finished(self) -> bool:
        return self.stop_reason in FINISHED_STOPS


@dataclass(frozen=True, slots=True)
class TurnFailed:
    kind: FailureKind
    message: str
    usage: Usage = field(default_factory=Usage)
    rounds: int = 0


Event = (
    TextDelta
    | ReasoningDelta
    | ToolStarted
    | ToolFinished
    | PermissionRequested
    | ApplyRequested
    | ApplyProgress
    | HistoryCompacted
    | Notice
    | SecretsRedacted
    | TentativeText
    | TextWithdrawn
    | SpeculationAccepted
    | RoundFinished
    | SummaryStarted
    | PredictionStarted
    | TurnFinished
    | TurnFailed
)
