"""Shared test setup: every test gets a private HOME, XDG dirs and QSHELL_HOME."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

pytest_plugins = ["tests.fakes.pytest_plugin"]


@pytest.fixture(autouse=True)
def isolated_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Point HOME, XDG_* and QSHELL_HOME at a temporary directory; drop provider keys.

    It uses a MonkeyPatch of its own, so a test that calls `monkeypatch.undo()` on its own
    patches never puts the real home directory back."""
    home = tmp_path_factory.mktemp("home")
    patch = pytest.MonkeyPatch()
    patch.setenv("HOME", str(home))
    patch.setenv("QSHELL_HOME", str(home / "qshell"))
    for name in ("XDG_CONFIG_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME", "XDG_DATA_HOME"):
        patch.setenv(name, str(home / name.lower()))
    for name in (
        "OPENAI_API_KEY",
        "OPENAI_BASE_URL",
        "OPENAI_API_BASE",
        "OPENAI_MODEL",
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_BASE_URL",
        "ANTHROPIC_MODEL",
    ):
        patch.delenv(name, raising=False)
    patch.setenv("QSHELL_PLUGINS", "")  # no installed or user-folder plugin loads
    yield home
    patch.undo()


def _hypothesis_profile() -> None:
    """Hypothesis never applies a deadline here: machines are noisy, timing is not asserted."""
    from hypothesis import settings

    settings.register_profile("qshell", deadline=None, max_examples=60)
    settings.load_profile("qshell")


_hypothesis_profile()
