"""Turning server answers into qshell's ProviderError tree, and scrubbing secrets from text.

This is the only place an HTTP status, an error body or an in-stream error object becomes
a `ProviderError`; both providers and the transport in `http.py` call it. Every message
it builds from server text passes through `redact` first, and auth errors never include
the body at all, so no API key can reach an exception, a log line or a repr. It does no
I/O and keeps no state, so any thread may call it.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any

from qshell.errors import (
    AuthError,
    BadRequest,
    ContextTooLong,
    ModelNotFound,
    ProviderError,
    ProviderUnavailable,
    RateLimited,
    UsageLimited,
)

SERVER_MESSAGE_MAX_CHARS = 400
REDACTED = "[redacted]"
MIN_SECRET_CHARS = 4

_KEY_PATTERNS: tuple[re.Pattern[str], ...] = (
    re.compile(r"sk-ant-[A-Za-z0-9_*\-]+"),
    re.compile(r"sk-[A-Za-z0-9_*\-]{6,}"),
    re.compile(r"(?i)\bBearer\s+[A-Za-z0-9._~+/=*\-]+"),
)
# A key-like token right after the word "key" or "token" ("API key provided: ab****yz").
_AFTER_KEY_WORD = re.compile(
    r"(?i)(\b(?:api[_ -]?)?(?:key|token)\b(?:\s+provided)?\s*[:=]?\s*)"
    r"((?=[A-Za-z_\-+/=.]*[0-9*])[A-Za-z0-9_*+/=.\-]{8,})"
)
_CONTEXT_PHRASES: tuple[str, ...] = (
    "context_length_exceeded",
    "maximum context length",
    "prompt is too long",
    "context window",
    "too many tokens",
    "context length",
    "context size",
)
# An account out of credit or quota, as the APIs say it: OpenAI's `insufficient_quota` (429,
# or 403 for some accounts), Anthropic's `billing_error` (402) and its 400 "credit balance
# is too low", DashScope's `Arrearage` (400); and any 402 Payment Required.
_USAGE_LIMIT_CODES = frozenset({"insufficient_quota", "billing_error", "Arrearage"})
_USAGE_LIMIT_PHRASES = ("credit balance is too low", "exceeded your current quota")
# Error `type`/`code` words both APIs put in error objects, mapped to the HTTP status they mean.
_ERROR_TYPE_STATUS: dict[str, int] = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "invalid_api_key": 401,
    "permission_error": 403,
    "not_found_error": 404,
    "model_not_found": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "rate_limit_exceeded": 429,
    "insufficient_quota": 429,
    "billing_error": 402,
    "api_error": 500,
    "server_error": 500,
    "overloaded_error": 529,
}


@dataclass(frozen=True)
class Endpoint:
    """Who we are talking to, for messages: provider name, base URL, env vars, secrets."""

    provider: str
    base_url: str
    key_env: str
    model_env: str
    secrets: tuple[str, ...] = field(default=(), repr=False)

    @property
    def has_key(self) -> bool:
        return any(self.secrets)


def redact(text: str, secrets: tuple[str, ...] | list[str] = ()) -> str:
    """Remove every exact secret and anything that looks like an API key from `text`."""
    for secret in secrets:
        if secret and len(secret) >= MIN_SECRET_CHARS:
            text = text.replace(secret, REDACTED)
    for pattern in _KEY_PATTERNS:
        text = pattern.sub(REDACTED, text)
    return _AFTER_KEY_WORD.sub(lambda m: m.group(1) + REDACTED, text)


def parse_retry_after(value: str | None, *, now: datetime | None = None) -> float | None:
    """Seconds to wait from a `Retry-After` header (delta seconds or an HTTP date)."""
    if not value:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError):
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        seconds = (when - (now or datetime.now(UTC))).total_seconds()
    if seconds != seconds:  # NaN
        return None
    return max(0.0, seconds)


def server_message(body: str, secrets: tuple[str, ...] = ()) -> str:
    """The human part of an error body (`error.message`, `message`, `detail`), scrubbed."""
    payload = _json_or_none(body)
    message = _message_of(payload) if payload is not None else ""
    if not message and not body.lstrip().startswith("<"):  # skip HTML error pages
        message = body
    return _clip(redact(" ".join(message.split()), secrets))


def error_for_status(
    status: int,
    body: str,
    endpoint: Endpoint,
    model: str,
    *,
    retry_after_s: float | None = None,
) -> ProviderError:
    """Translate a non-success HTTP answer into the matching ProviderError."""
    payload = _json_or_none(body)
    if isinstance(payload, list) and payload and isinstance(payload[0], dict):
        payload = payload[0]  # Gemini's `[{"error": {…}}]`
    error = payload.get("error") if isinstance(payload, dict) else None
    code = _error_code(error)
    message = server_message(body, endpoint.secrets) if body.strip() else ""
    return _build(status, code, message, endpoint, model, retry_after_s)


def error_from_payload(
    payload: Any, endpoint: Endpoint, model: str, *, in_stream: bool = False
) -> ProviderError:
    """Translate an error object sent as an answer's body or inside a stream
    (`{"error": {...}}`, or llama.cpp's flat `{"code", "message", "type"}`). An error the
    server streamed (`in_stream`) is retried before any content as its status says (a
    server error or a busy server, as OpenAI's own streamed `server_error` is), except when
    it says the context is full: llama.cpp streams that as a 500, and the same request
    would fill the same context again."""
    error = payload.get("error", payload) if isinstance(payload, dict) else payload
    code = _error_code(error)
    status = _status_of(error, code)
    message = _clip(redact(" ".join(_message_of(payload).split()), endpoint.secrets))
    # the status is the one its words mean, not one the server answered with: say so
    how = "an error in its stream" if in_stream else "an error as its answer"
    built = _build(status, code, message, endpoint, model, None, how=how)
    if in_stream and _is_context_error(code, message):
        built.retryable = False
    return built


def connect_error(endpoint: Endpoint, detail: str, *, timed_out: bool) -> ProviderUnavailable:
    """The server could not be reached at all."""
    if timed_out:
        reason = "no connection could be made in time"
    elif "refused" in detail.lower() or "errno 111" in detail.lower():
        reason = "connection refused — is the server running?"
    else:
        reason = _clip(redact(detail, endpoint.secrets)) or "connection failed"
    return ProviderUnavailable(f"cannot reach {endpoint.base_url}: {reason}")


def _build(
    status: int,
    code: str,
    message: str,
    endpoint: Endpoint,
    model: str,
    retry_after_s: float | None,
    *,
    how: str = "",
) -> ProviderError:
    """The error for `status` (`how` says where it came from when no HTTP status said
    it: "an error in its stream")."""
    said = f": {message}" if message else ""
    where = endpoint.base_url
    http = how or f"HTTP {status}"
    if _is_usage_limit(status, code, message):
        return UsageLimited(
            f"{endpoint.provider} at {where} refused the request: the account's usage limit "
            f"or credit is used up ({http}){said}",
            status=status,
            retry_after_s=retry_after_s,
        )
    if status in (401, 403):
        if not endpoint.has_key:
            text = (
                f"{endpoint.provider} at {where} requires an API key ({http}). "
                f"Set {endpoint.key_env}."
            )
        else:
            text = (
                f"The API key was rejected by {endpoint.provider} at {where} ({http}). "
                f"Check {endpoint.key_env}."
            )
        return AuthError(text, status=status)
    if status in (400, 413) and _is_context_error(code, message):
        return ContextTooLong(
            f"the conversation does not fit the context window of model '{model}' at {where}{said}",
            status=status,
        )
    if status == 404 or code == "model_not_found":
        return ModelNotFound(
            f"model '{model}' was not found at {where}; pick another with -m/--model "
            f"or {endpoint.model_env}" + (f" (server said: {message})" if message else ""),
            status=status,
        )
    if status == 429:
        return RateLimited(
            f"rate limited by {endpoint.provider} at {where}{said}",
            status=status,
            retry_after_s=retry_after_s,
        )
    if status >= 500:
        return ProviderUnavailable(
            f"{endpoint.provider} at {where} is unavailable ({http}){said}",
            status=status,
            retry_after_s=retry_after_s,
        )
    return BadRequest(
        f"{endpoint.provider} at {where} rejected the request ({http}){said}",
        status=status,
    )


def _is_usage_limit(status: int, code: str, message: str) -> bool:
    lowered = message.lower()
    return (
        status == 402
        or code in _USAGE_LIMIT_CODES
        or any(phrase in lowered for phrase in _USAGE_LIMIT_PHRASES)
    )


def _is_context_error(code: str, message: str) -> bool:
    lowered = message.lower()
    return code == "context_length_exceeded" or any(p in lowered for p in _CONTEXT_PHRASES)


def _error_code(error: Any) -> str:
    if not isinstance(error, dict):
        return ""
    for key in ("code", "type"):
        value = error.get(key)
        if isinstance(value, str) and (
            value in _ERROR_TYPE_STATUS or value == "context_length_exceeded"
        ):
            return value
    value = error.get("code") or error.get("type")
    return value if isinstance(value, str) else ""


def _status_of(error: Any, code: str) -> int:
    if isinstance(error, dict):
        for key in ("status", "code"):
            value = error.get(key)
            if isinstance(value, int) and 400 <= value <= 599:
                return value
            if isinstance(value, str) and value.isdigit() and 400 <= int(value) <= 599:
                return int(value)
    if code == "context_length_exceeded":
        return 400
    return _ERROR_TYPE_STATUS.get(code, 500)


def _message_of(payload: Any) -> str:
    """The human part of an error payload: `error.message`, `message`, `detail`; a list of
    errors (Gemini answers `[{"error": …}]`) by its first; a validation error's `detail`
    list (Mistral's 422: `{"message": {"detail": [{"type": "extra_forbidden", "loc":
    ["body", "stream_options"], "msg": …}]}}`) as `field: msg (type)` for each."""
    if isinstance(payload, str):
        return payload
    if isinstance(payload, list):
        return "; ".join(filter(None, (_problem(item) for item in payload[:3])))
    if not isinstance(payload, dict):
        return ""
    error = payload.get("error")
    if isinstance(error, dict | list):
        return _message_of(error)
    if isinstance(error, str):
        return error
    for key in ("message", "detail", "msg"):
        value = payload.get(key)
        if isinstance(value, str):
            return value
        if isinstance(value, dict | list) and (said := _message_of(value)):
            return said
    return ""


def _problem(item: Any) -> str:
    """One entry of an error list: a pydantic-style validation error, or an error object."""
    if not isinstance(item, dict) or "loc" not in item:
        return _message_of(item)
    where = ".".join(str(p) for p in item.get("loc") or () if p != "body")
    kind = f" ({item['type']})" if isinstance(item.get("type"), str) else ""
    return f"{where}: {item.get('msg') or 'invalid'}{kind}"


def _json_or_none(body: str) -> Any:
    try:
        return json.loads(body)
    except (ValueError, RecursionError):
        return None


def _clip(text: str) -> str:
    if len(text) <= SERVER_MESSAGE_MAX_CHARS:
        return text
    return text[: SERVER_MESSAGE_MAX_CHARS - 1] + "…"
