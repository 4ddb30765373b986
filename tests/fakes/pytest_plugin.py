"""pytest fixtures for the scripted LLM server (loaded via `pytest_plugins` in conftest).

`llm_server` yields a started `ScriptedLLMServer` with `api_key=TEST_API_KEY`;
`llm_server_factory` builds extra servers with other settings. Both stop their servers at
teardown and then fail the test if a server recorded invariant violations. Fixtures are
function-scoped and never share a server between tests.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.fakes.llm_server import TEST_API_KEY, ScriptedLLMServer


def _check(servers: list[ScriptedLLMServer]) -> None:
    problems = [violation for server in servers for violation in server.violations]
    assert problems == [], "fake LLM server invariant violations:\n" + "\n".join(problems)


@pytest.fixture
def llm_server() -> Iterator[ScriptedLLMServer]:
    """A started fake LLM server; clients must send `llm_server.api_key`."""
    server = ScriptedLLMServer(api_key=TEST_API_KEY).start()
    try:
        yield server
    finally:
        server.stop()
    _check([server])


@pytest.fixture
def llm_server_factory() -> Iterator[Callable[..., ScriptedLLMServer]]:
    """`make(**ScriptedLLMServer kwargs)` → a started server, stopped at teardown."""
    servers: list[ScriptedLLMServer] = []

    def make(**kwargs: Any) -> ScriptedLLMServer:
        kwargs.setdefault("api_key", TEST_API_KEY)
        server = ScriptedLLMServer(**kwargs).start()
        servers.append(server)
        return server

    try:
        yield make
    finally:
        for server in servers:
            server.stop()
    _check(servers)
