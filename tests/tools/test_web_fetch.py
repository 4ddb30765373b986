from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from qshell.tools import web_fetch as web_fetch_module
from qshell.tools.base import ErrorType, ToolContext
from qshell.tools.web_fetch import MAX_FETCH_BYTES, WebFetchArgs, WebFetchTool

TOOL = WebFetchTool()
PAGE = b"""<!doctype html><html><head><title>Test  Page</title>
<style>body { color: red }</style><script>var secret = "do not show";</script></head>
<body><h1>Welcome</h1><p>Hello   <b>world</b>,
 see <a href="/docs">the docs</a>.</p>
<ul><li>first</li><li>second</li></ul>
<pre>  indented
    code</pre></body></html>"""
BIG_CHUNK = b"a" * 65536
SLOW_RELEASE_S = 10.0


class Handler(BaseHTTPRequestHandler):
    release: threading.Event
    started: threading.Event

    def log_message(self, format: str, *args: object) -> None:
        return

    def _send(self, status: int, content_type: str, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        route = {
            "/page": lambda: self._send(200, "text/html; charset=utf-8", PAGE),
            "/plain": lambda: self._send(200, "text/plain", "caf\u00e9 plain\n".encode()),
            "/json": lambda: self._send(200, "application/json", b'{"a": 1}'),
            "/image": lambda: self._send(200, "image/png", b"\x89PNG\x00\x00"),
            "/untyped": lambda: self._send(200, "", b"untyped text"),
            "/missing": lambda: self._send(404, "text/plain", b"nope"),
            "/broken": lambda: self._send(500, "text/plain", b"boom"),
            "/big": self._big,
            "/slow": self._slow,
            "/redirect": self._redirect,
            "/loop": self._loop,
        }.get(self.path)
        if route is None:
            self._send(404, "text/plain", b"unknown")
        else:
            route()

    def _big(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.end_headers()
        sent = 0
        try:
            while sent < MAX_FETCH_BYTES * 3:
                self.wfile.write(BIG_CHUNK)
                sent += len(BIG_CHUNK)
        except OSError:
            return

    def _slow(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", "1000000")
        self.end_headers()
        self.wfile.write(b"first bytes\n")
        self.wfile.flush()
        self.started.set()
        self.release.wait(SLOW_RELEASE_S)

    def _redirect(self) -> None:
        self.send_response(302)
        self.send_header("Location", "/plain")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def _loop(self) -> None:
        self.send_response(302)
        self.send_header("Location", "/loop")
        self.send_header("Content-Length", "0")
        self.end_headers()


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, type[Handler]]]:
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy"):
        monkeypatch.delenv(name, raising=False)

    class BoundHandler(Handler):
        release = threading.Event()
        started = threading.Event()

    handler = BoundHandler
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}", handler
    finally:
        handler.release.set()
        httpd.shutdown()
        httpd.server_close()
        thread.join()


def fetch(ctx: ToolContext, url: str):
    return TOOL.run(WebFetchArgs(url=url), ctx)


def test_web_fetch_turns_html_into_readable_text(server, ctx: ToolContext) -> None:
    base, _ = server
    result = fetch(ctx, f"{base}/page")
    assert result.error is None
    text = result.llm_content
    assert "Title: Test Page" in text
    assert "# Welcome" in text
    assert "Hello world, see [the docs](" in text
    assert f"{base}/docs)" in text
    assert "- first\n- second" in text
    assert "  indented\n    code" in text
    assert "secret" not in text and "color" not in text


def test_web_fetch_returns_plain_text_as_is(server, ctx: ToolContext) -> None:
    base, _ = server
    result = fetch(ctx, f"{base}/plain")
    assert result.error is None
    assert result.llm_content.endswith("caf\u00e9 plain\n")


def test_web_fetch_returns_json_as_is(server, ctx: ToolContext) -> None:
    base, _ = server
    assert fetch(ctx, f"{base}/json").llm_content.endswith('{"a": 1}')


def test_web_fetch_sniffs_content_without_a_type(server, ctx: ToolContext) -> None:
    base, _ = server
    assert fetch(ctx, f"{base}/untyped").llm_content.endswith("untyped text")


def test_web_fetch_follows_redirects(server, ctx: ToolContext) -> None:
    base, _ = server
    result = fetch(ctx, f"{base}/redirect")
    assert result.error is None
    assert f"URL: {base}/plain" in result.llm_content


def test_web_fetch_gives_up_on_a_redirect_loop(server, ctx: ToolContext) -> None:
    base, _ = server
    result = fetch(ctx, f"{base}/loop")
    assert result.error is not None and result.error.type is ErrorType.NETWORK
    assert "redirects" in result.error.message


def test_web_fetch_refuses_binary_content(server, ctx: ToolContext) -> None:
    base, _ = server
    result = fetch(ctx, f"{base}/image")
    assert result.error is not None and result.error.type is ErrorType.BINARY_FILE


@pytest.mark.parametrize(("route", "status"), [("/missing", "404"), ("/broken", "500")])
def test_web_fetch_reports_http_error_statuses(
    server, ctx: ToolContext, route: str, status: str
) -> None:
    base, _ = server
    result = fetch(ctx, f"{base}{route}")
    assert result.error is not None and result.error.type is ErrorType.HTTP_STATUS
    assert status in result.error.message


def test_web_fetch_stops_reading_at_the_size_cap(server, ctx: ToolContext) -> None:
    base, _ = server
    big_ctx = ToolContext(paths=ctx.paths, max_output_chars=MAX_FETCH_BYTES * 2)
    result = fetch(big_ctx, f"{base}/big")
    assert result.error is None
    assert "Download stopped" in result.llm_content
    assert result.llm_content.count("a") <= MAX_FETCH_BYTES + 100


def test_web_fetch_caps_the_text_given_to_the_model(server, ctx: ToolContext) -> None:
    base, _ = server
    small = ToolContext(paths=ctx.paths, max_output_chars=500)
    result = fetch(small, f"{base}/big")
    assert "Content cut at 500" in result.llm_content
    assert len(result.llm_content) < 1000


@pytest.mark.parametrize("url", ["ftp://example.com/file", "file:///etc/passwd", "not a url"])
def test_web_fetch_rejects_non_http_urls(ctx: ToolContext, url: str) -> None:
    result = fetch(ctx, url)
    assert result.error is not None and result.error.type is ErrorType.INVALID_ARGS


def test_web_fetch_reports_a_refused_connection(ctx: ToolContext) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    result = fetch(ctx, f"http://127.0.0.1:{port}/")
    assert result.error is not None and result.error.type is ErrorType.NETWORK


def test_web_fetch_cancel_from_another_thread_returns_cancelled(server, ctx: ToolContext) -> None:
    base, handler = server

    def cancel_once_streaming() -> None:
        handler.started.wait(SLOW_RELEASE_S)
        ctx.cancel.cancel()

    canceller = threading.Thread(target=cancel_once_streaming)
    canceller.start()
    result = fetch(ctx, f"{base}/slow")
    canceller.join()
    assert result.error is not None and result.error.type is ErrorType.CANCELLED


def test_web_fetch_reports_a_stalled_server_as_timeout(
    server, ctx: ToolContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    base, _ = server
    monkeypatch.setattr(web_fetch_module, "FETCH_TIMEOUT_S", 0.3)
    monkeypatch.setattr(web_fetch_module, "WORKER_GRACE_S", 0.2)
    result = fetch(ctx, f"{base}/slow")
    assert result.error is not None and result.error.type is ErrorType.TIMEOUT


def test_web_fetch_accesses_no_paths(ctx: ToolContext) -> None:
    assert TOOL.accesses(WebFetchArgs(url="https://example.com"), ctx) == []
