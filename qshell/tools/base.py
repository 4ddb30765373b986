"""Tool, Kind, ToolResult and ToolContext: the contract every tool in this package meets.

A tool is a small object with a `name`, a `kind` (the seed-004 vocabulary), a
`description`, a pydantic `Args` model (its JSON schema is what the model sees) and a
`run(args, ctx)` that returns a `ToolResult`. Tools never raise for a failure the model
can cause: they return a result whose `error` is filled. They resolve every path through
`ctx.paths` (tools/paths.py), the one resolver. The file tools read, write, stat and list
files only through `ctx.view` (tools/fileview.py): the real disk by default, a
copy-on-write overlay when a speculation runs them (shell and web_fetch do not use it).
`ctx.reads` (tools/ledger.py) remembers what the model read, so an existing file is
overwritten only once it was read and has not changed since; `ctx.secrets` (the session's
redaction vault, qshell/redaction) holds what the model was shown redacted, so write_file
and edit put a value back where the model wrote its marker.
Tools hold no state and are thread-safe; the loop runs concurrency-safe kinds in parallel.
"""

from __future__ import annotations

import enum
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Protocol

from pydantic import BaseModel

from qshell.cancel import CancelToken
from qshell.config import DEFAULTS
from qshell.llm.messages import ToolSpec
from qshell.plugins import NO_PLUGINS, PluginHost
from qshell.redaction import Vault
from qshell.tools.fileview import REAL_VIEW, FileView
from qshell.tools.ledger import ReadLedger
from qshell.tools.paths import PathResolver


class Kind(enum.StrEnum):
    READ = "read"
    SEARCH = "search"
    FETCH = "fetch"
    EDIT = "edit"
    DELETE = "delete"
    MOVE = "move"
    EXECUTE = "execute"
    THINK = "think"
    OTHER = "other"


MAX_SHELL_TIMEOUT_S = 600.0
CONCURRENCY_SAFE_KINDS: frozenset[Kind] = frozenset(
    {Kind.READ, Kind.SEARCH, Kind.FETCH, Kind.THINK}
)


class ErrorType(enum.StrEnum):
    """Why a tool failed; every failure path of every tool names one."""

    INVALID_ARGS = "invalid_args"
    NOT_FOUND = "not_found"
    IS_DIRECTORY = "is_directory"
    NOT_A_DIRECTORY = "not_a_directory"
    BINARY_FILE = "binary_file"
    OUTSIDE_ROOT = "outside_root"
    PERMISSION_DENIED = "permission_denied"
    NO_MATCH = "no_match"
    AMBIGUOUS_MATCH = "ambiguous_match"
    NO_CHANGE = "no_change"
    NOT_READ = "not_read"  # an existing file overwritten without a read in this session
    CHANGED_SINCE_READ = "changed_since_read"  # it changed on disk since the model read it
    # a redaction marker that cannot be put back where the call would write it
    REDACTION_MARKER = "redaction_marker"
    TIMEOUT = "timeout"
    NONZERO_EXIT = "nonzero_exit"
    NETWORK = "network"
    HTTP_STATUS = "http_status"
    CANCELLED = "cancelled"
    DENIED = "denied"
    UNKNOWN_TOOL = "unknown_tool"
    IO = "io"


@dataclass(frozen=True, slots=True)
class ToolError:
    type: ErrorType
    message: str


@dataclass(frozen=True, slots=True)
class FileEdit:
    """What a file-changing call did to one file, for a front-end that shows it as a diff
    of whole texts (ACP's diff content): `old_text` is None for a file it created."""

    path: Path
    old_text: str | None
    new_text: str


@dataclass(frozen=True, slots=True)
class ToolResult:
    """What a tool produced: text for the model, text for the user, and an optional error.

    Two post-execution directives (seed 004, D1) say what the output is worth on its own:
    `skip_llm_round` — the output is the answer, so when every result of a batch says so
    the turn ends without another model round (latency/directives.py decides, and honours
    it for plugin tools only when allowlisted); `result_is_terminal` — the output is
    already in the form the user wants to see, so when every result of a batch says so
    the round that sums them up may stream while the REPL's prompt is back (D3,
    `summarizeInBackground`; agent/loop.py yields `SummaryStarted`).
    `edit` is the change of a successful edit or write, old and new text whole (the
    file's real text: it is for the user's editor, never sent to the model).
    `redacted` names the kind of each secret the loop replaced by a marker in
    `llm_content` and `display` (agent/calls.py `screened`).
    """

    llm_content: str
    display: str = ""
    error: ToolError | None = None
    skip_llm_round: bool = False
    result_is_terminal: bool = False
    edit: FileEdit | None = None
    redacted: tuple[str, ...] = ()

    @classmethod
    def fail(cls, type_: ErrorType, message: str) -> ToolResult:
        return cls(
            llm_content=f"Error: {message}", display=message, error=ToolError(type_, message)
        )


@dataclass(frozen=True, slots=True)
class Access:
    """One path a tool call would touch, for the read-scope and write rules in policy."""

    path: Path
    write: bool = False


class Launcher(Protocol):
    """How a shell command is started: its argv and environment, maybe wrapped (a sandbox)."""

    def wrap(
        self, argv: Sequence[str], environ: Mapping[str, str]
    ) -> tuple[list[str], dict[str, str]]:
        """The argv and environment that run `argv` (raises OSError when it cannot run)."""


@dataclass(frozen=True)
class ToolContext:
    """Everything a tool may use: the resolver, the file view, the cancel token and limits."""

    paths: PathResolver
    cancel: CancelToken = field(default_factory=CancelToken)
    environ: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))
    shell_timeout_s: float = DEFAULTS.shell_timeout_s
    # the longest a shell call may ask for (its `timeout` argument is capped to this)
    shell_timeout_cap_s: float = MAX_SHELL_TIMEOUT_S
    max_output_chars: int = 30_000
    view: FileView = field(default=REAL_VIEW)
    # how the shell tool starts this call's command (None: as is); `sandbox` is the jail
    # a command qshell runs on its own gets (policy.proven_context), `sandbox_missing` why
    # there is none when the settings require one
    launcher: Launcher | None = None
    sandbox: Launcher | None = None
    sandbox_missing: str = ""
    # work the user is not waiting for (a speculation's): its commands run at the lowest
    # priority, so they take only CPU nothing else wants (tools/shell.py)
    background: bool = False
    sandbox_mode: str = "off"  # for /stats and `qshell doctor`
    sandbox_note: str = ""  # said once at start-up: why there is no sandbox
    # the run's gate plugins (plugins/host.py): the policies and the shell proof ask them
    plugins: PluginHost = NO_PLUGINS
    # the files the model read in this session (tools/ledger.py), shared by every copy of
    # this context (`replace` keeps it): write_file and edit overwrite only those
    reads: ReadLedger = field(default_factory=ReadLedger)
    # the session's redactions (marker → value), shared the same way: every result is
    # redacted through it, and write_file and edit restore markers from it
    secrets: Vault = field(default_factory=Vault)

    @property
    def root(self) -> Path:
        return self.paths.root


class Tool(Protocol):
    """The shape of a tool. Implementations are plain classes, one per module."""

    name: ClassVar[str]
    kind: ClassVar[Kind]
    description: ClassVar[str]
    Args: ClassVar[type[BaseModel]]

    def run(self, args: Any, ctx: ToolContext) -> ToolResult:
        """Do the work; return a ToolResult (with `error` set on failure), never raise."""

    def accesses(self, args: Any, ctx: ToolContext) -> Sequence[Access]:
        """The paths this call would read or write (empty when none)."""


def tool_spec(tool: Tool, *, compact: bool = False) -> ToolSpec:
    """The model-facing description of a tool, from its Args model's JSON schema.
    `compact` keeps the first sentence of the description and drops the parameters'
    descriptions and titles: fewer prompt tokens for a small local model."""
    schema = tool.Args.model_json_schema()
    schema.pop("title", None)
    if not compact:
        return ToolSpec(name=tool.name, description=tool.description, parameters=schema)
    return ToolSpec(
        name=tool.name, description=_first_sentence(tool.description), parameters=_bare(schema)
    )


def _first_sentence(text: str) -> str:
    flat = " ".join(text.split())
    end = flat.find(". ")
    return flat if end < 0 else flat[: end + 1]


def _bare(schema: Any) -> Any:
    """`schema` without `description` and `title` keys, at every level."""
    if isinstance(schema, dict):
        return {
            key: _bare(value)
            for key, value in schema.items()
            if key not in ("description", "title") or not isinstance(value, str)
        }
    if isinstance(schema, list):
        return [_bare(item) for item in schema]
    return schema
