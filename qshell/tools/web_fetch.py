"""web_fetch: GET an http(s) URL and return its content as readable text.

It follows a few redirects, streams at most MAX_FETCH_BYTES, converts HTML to text
(tools/html_text.py), passes other text types through and refuses binary content. The
request runs on a worker thread so that cancellation and the overall deadline return at
once even while a connect or read is blocked; cancelling also closes the open response.
It touches no files and sends no credentials. Stateless: each call owns its client, so
concurrent calls are independent.
"""

from __future__ import annotations

import threading
import time
from typing import ClassVar
from urllib.parse import urlsplit

import httpx
from pydantic import BaseModel, ConfigDict, Field

from qshell.tools import files
from qshell.tools.base import Access, ErrorType, Kind, ToolContext, ToolResult
from qshell.tools.html_text import html_to_text

FETCH_TIMEOUT_S = 20.0
CONNECT_TIMEOUT_S = 10.0
WORKER_GRACE_S = 1.0
MAX_FETCH_BYTES = 2 * 1024 * 1024
MAX_REDIRECTS = 5
USER_AGENT = "qshell-web-fetch/0.1"
ALLOWED_SCHEMES = frozenset({"http", "https"})
HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})
TEXT_TYPES = frozenset(
    {
        "application/json",
        "application/xml",
        "application/javascript",
        "application/x-javascript",
        "application/ecmascript",
        "application/x-yaml",
        "application/yaml",
        "application/toml",
        "application/x-sh",
        "image/svg+xml",
    }
)


class WebFetchArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    url: str = Field(description="Absolute http:// or https:// URL to fetch.")


class _Call:
    """State shared by the caller and the worker thread of one fetch."""

    def __init__(self) -> None:
        self.done = threading.Event()
        self.result: ToolResult | None = None
        self._lock = threading.Lock()
        self._response: httpx.Response | None = None
        self._aborted = False

    def attach(self, response: httpx.Response) -> None:
        with self._lock:
            self._response = response
            aborted = self._aborted
        if aborted:
            response.close()

    def abort(self) -> None:
        """Close the open response (if any) and release the waiting caller."""
        with self._lock:
            self._aborted = True
            response = self._response
        if response is not None:
            response.close()
        self.done.set()

    def finish(self, result: ToolResult) -> None:
        self.result = result
        self.done.set()


class WebFetchTool:
    name: ClassVar[str] = "web_fetch"
    kind: ClassVar[Kind] = Kind.FETCH
    description: ClassVar[str] = (
        "Fetch a web page or other text resource over http(s) and return it as text. HTML is "
        "converted to readable text with links kept as [text](url); JSON, XML and plain text "
        f"are returned as-is; binary content is refused. At most {MAX_FETCH_BYTES // 2**20} MB "
        f"is downloaded and the call gives up after {FETCH_TIMEOUT_S:.0f} s."
    )
    Args: ClassVar[type[BaseModel]] = WebFetchArgs

    def accesses(self, args: WebFetchArgs, ctx: ToolContext) -> list[Access]:
        return []

    def run(self, args: WebFetchArgs, ctx: ToolContext) -> ToolResult:
        url = args.url.strip()
        parts = urlsplit(url)
        if parts.scheme.lower() not in ALLOWED_SCHEMES or not parts.netloc:
            return ToolResult.fail(
                ErrorType.INVALID_ARGS,
                f"only absolute http:// and https:// URLs can be fetched: {url}",
            )
        call = _Call()
        unregister = ctx.cancel.on_cancel(call.abort)
        worker = threading.Thread(
            target=_fetch, args=(url, call, ctx.max_output_chars), name="web-fetch", daemon=True
        )
        worker.start()
        finished = call.done.wait(FETCH_TIMEOUT_S + WORKER_GRACE_S)
        unregister()
        if ctx.cancel.cancelled:
            return ToolResult.fail(ErrorType.CANCELLED, f"fetching {url} was cancelled")
        if not finished or call.result is None:
            call.abort()
            return ToolResult.fail(
                ErrorType.TIMEOUT, f"fetching {url} took longer than {FETCH_TIMEOUT_S:.0f} s"
            )
        return call.result


def _fetch(url: str, call: _Call, max_chars: int) -> None:
    """Worker body: always ends with `call.finish` (or the caller has given up already)."""
    try:
        result = _request(url, call, max_chars)
    except httpx.TooManyRedirects:
        result = ToolResult.fail(ErrorType.NETWORK, f"{url}: more than {MAX_REDIRECTS} redirects")
    except httpx.TimeoutException:
        result = ToolResult.fail(ErrorType.TIMEOUT, f"{url}: the server did not answer in time")
    except (httpx.UnsupportedProtocol, httpx.InvalidURL) as exc:
        result = ToolResult.fail(ErrorType.INVALID_ARGS, f"{url}: {exc}")
    except (httpx.HTTPError, httpx.StreamError, OSError) as exc:
        result = ToolResult.fail(ErrorType.NETWORK, f"{url}: {str(exc) or type(exc).__name__}")
    except Exception as exc:  # a worker must always report back
        result = ToolResult.fail(ErrorType.NETWORK, f"{url}: {type(exc).__name__}: {exc}")
    call.finish(result)


def _request(url: str, call: _Call, max_chars: int) -> ToolResult:
    timeout = httpx.Timeout(FETCH_TIMEOUT_S, connect=CONNECT_TIMEOUT_S)
    deadline = time.monotonic() + FETCH_TIMEOUT_S
    with (
        httpx.Client(
            follow_redirects=True,
            max_redirects=MAX_REDIRECTS,
            timeout=timeout,
            headers={"User-Agent": USER_AGENT},
        ) as client,
        client.stream("GET", url) as response,
    ):
        call.attach(response)
        if response.status_code >= 400:
            return ToolResult.fail(
                ErrorType.HTTP_STATUS,
                f"{response.url} answered HTTP {response.status_code} {response.reason_phrase}",
            )
        media_type = response.headers.get("content-type", "").split(";")[0].strip().lower()
        if media_type and not _is_text_type(media_type):
            return ToolResult.fail(
                ErrorType.BINARY_FILE, f"{response.url} is {media_type}, not text; not fetched"
            )
        body = bytearray()
        for chunk in response.iter_bytes():
            body += chunk
            if len(body) >= MAX_FETCH_BYTES:
                break
            if time.monotonic() > deadline:
                return ToolResult.fail(ErrorType.TIMEOUT, f"{url}: download took too long")
        cut = len(body) >= MAX_FETCH_BYTES
        return _render(response, media_type, bytes(body[:MAX_FETCH_BYTES]), cut, max_chars)


def _is_text_type(media_type: str) -> bool:
    return (
        media_type.startswith("text/")
        or media_type in HTML_TYPES
        or media_type in TEXT_TYPES
        or media_type.endswith(("+json", "+xml"))
    )


def _decode(data: bytes, encoding: str | None) -> str:
    try:
        return data.decode(encoding or "utf-8", errors="replace")
    except LookupError:
        return data.decode("utf-8", errors="replace")


def _render(
    response: httpx.Response, media_type: str, data: bytes, cut: bool, max_chars: int
) -> ToolResult:
    if not media_type and files.looks_binary(data[: files.SNIFF_BYTES]):
        return ToolResult.fail(ErrorType.BINARY_FILE, f"{response.url} is binary content")
    text = _decode(data, response.charset_encoding)
    if media_type in HTML_TYPES:
        text = html_to_text(text, str(response.url))
    notes: list[str] = []
    if cut:
        notes.append(f"[Download stopped at {MAX_FETCH_BYTES} bytes; the rest was not read.]")
    if len(text) > max_chars:
        notes.append(f"[Content cut at {max_chars} of {len(text)} characters.]")
        text = text[:max_chars]
    header = f"URL: {response.url}\nContent-Type: {media_type or 'unknown'}\n\n"
    body = header + text + ("\n\n" + "\n".join(notes) if notes else "")
    display = f"Fetched {response.url} ({response.status_code}, {len(data)} bytes)"
    return ToolResult(llm_content=body, display=display)
