"""Shared test setup: every test gets a private HOME, XDG dirs, QSHELL_HOME and TMPDIR.

The private TMPDIR matters as much as the home: speculation overlays live under the temp dir
(qshell/overlay/base_dir.py) and every qshell start sweeps them, so a journal another qshell
process left in the machine's shared temp base would otherwise reach every test. Tests under
tests/e2e/ (and any that drive a terminal) carry the `e2e` marker: `pytest -m "not e2e"`."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest_plugins = ["tests.fakes.pytest_plugin"]

E2E_DIR = Path(__file__).parent / "e2e"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test under tests/e2e/ is an `e2e` test (the others that drive a terminal are
    marked where they are defined)."""
    for item in items:
        if item.path.is_relative_to(E2E_DIR):
            item.add_marker(pytest.mark.e2e)


@pytest.fixture(autouse=True)
def isolated_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Point HOME, XDG_*, QSHELL_HOME and TMPDIR at temporary directories; drop provider keys
    and XDG_RUNTIME_DIR.

    It uses a MonkeyPatch of its own, so a test that calls `monkeypatch.undo()` on its own
    patches never puts the real home directory back. `tempfile.tempdir` is reset so this
    process's own temp files follow TMPDIR too, as the subprocesses' do."""
    home = tmp_path_factory.mktemp("home")
    temp = tmp_path_factory.mktemp("tmp")
    patch = pytest.MonkeyPatch()
    for name in ("TMPDIR", "TEMP", "TMP"):
        patch.setenv(name, str(temp))
    patch.setattr(tempfile, "tempdir", None)
    patch.delenv("XDG_RUNTIME_DIR", raising=False)  # a shared overlay base too (base_dir.py)
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
