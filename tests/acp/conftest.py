"""The ACP tests drive `qshell --acp` with the ACP SDK, the `acp` extra. Each carries the
`acp` marker; without the SDK those that need it skip, saying so (sdk.py), and the one that
checks the start without it runs."""

from __future__ import annotations

from pathlib import Path

import pytest


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if item.path.is_relative_to(here):
            item.add_marker(pytest.mark.acp)
