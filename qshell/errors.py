"""The exception tree of qshell, and the exit code each user-facing failure maps to.

Every message is safe to show a user: no API keys, no raw response bodies. This module
imports nothing heavy so that any layer may raise from it.

    QshellError                 message is safe to show
    ├── ConfigError             bad settings file, flag or environment value      (exit 52)
    ├── InputError              empty prompt, unknown --resume id, bad flag value (exit 42)
    ├── ProviderError           raised only by llm/; `retryable` applies before the first token
    │   ├── AuthError           401/403                                           (exit 41)
    │   ├── ModelNotFound       404 / unknown model                               (exit 1)
    │   ├── ContextTooLong      the request does not fit the model's context      (exit 1)
    │   ├── RateLimited         429, retryable                                    (exit 1)
    │   │   └── UsageLimited    out of credit or quota: 429/402/403/400, not retryable (exit 1)
    │   ├── ProviderUnavailable 5xx, connect errors, timeouts, retryable          (exit 1)
    │   ├── BadRequest          another 4xx the server rejected                   (exit 1)
    │   └── StreamBroken        malformed or cut stream after it started          (exit 1)

    ControlSignal               outside the tree, so `except QshellError` never swallows them
    ├── Cancelled               the user cancelled the running turn                (exit 130)
    ├── (followup.gate.Boundary) a speculation reached a call it may not make
    └── (ui.repl.Foreground)    a background summary's turn takes the screen

Errors of other modules join this tree (arguments.UsageError is an InputError,
followup.overlay_run's RunRefused and agent.compaction's CompactionError are QshellErrors). The leaf packages, which
import nothing of qshell, each have a root of their own instead: `overlay.OverlayError`,
`sandbox.SandboxError` (its SandboxUnavailable is an OSError too) and
`shellproof.ShellproofError`; tests/test_names.py keeps every exception class in one of these.
"""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    """The documented process exit codes (Gemini CLI's table, shared by Qwen Code)."""

    OK = 0
    ERROR = 1
    AUTH = 41
    INPUT = 42
    CONFIG = 52
    MAX_TURNS = 53
    INCOMPLETE = 54  # the answer did not finish: output limit, refusal, content filter
    CANCELLED = 130


class QshellError(Exception):
    """Root of every qshell error; `str(error)` is a message fit for a user."""

    exit_code: ExitCode = ExitCode.ERROR


class ConfigError(QshellError):
    """A settings file, environment variable or flag value is invalid or missing."""

    exit_code = ExitCode.CONFIG


class InputError(QshellError):
    """The user's input cannot be used: empty prompt, unknown session id, bad flag value."""

    exit_code = ExitCode.INPUT


class ProviderError(QshellError):
    """A model provider failed; `retryable` says whether backoff may apply."""

    retryable: bool = False

    def __init__(
        self, message: str, *, status: int | None = None, retry_after_s: float | None = None
    ):
        super().__init__(message)
        self.status = status
        self.retry_after_s = retry_after_s


class AuthError(ProviderError):
    """The API key was rejected (401/403)."""

    exit_code = ExitCode.AUTH


class ModelNotFound(ProviderError):
    """The server does not know the requested model."""


class ContextTooLong(ProviderError):
    """The request exceeds the model's context window."""


class RateLimited(ProviderError):
    """The server asked us to slow down (429)."""

    retryable = True


class UsageLimited(RateLimited):
    """The account is out of credit or quota (OpenAI `insufficient_quota`, Anthropic
    "credit balance is too low" or `billing_error`): waiting will not help, and background
    requests pause for longer than after a 429 (llm/background.py)."""

    retryable = False


class ProviderUnavailable(ProviderError):
    """The server could not be reached, timed out, or answered 5xx."""

    retryable = True


class BadRequest(ProviderError):
    """The server rejected the request for another reason (4xx)."""


class StreamBroken(ProviderError):
    """The response stream was malformed or cut after it had started."""


class ControlSignal(Exception):
    """Ends a turn on purpose; code that catches tool bugs must let these through."""


class Cancelled(ControlSignal):
    """The user cancelled the running turn. Not a QshellError, so it is never swallowed."""

    exit_code = ExitCode.CANCELLED
