"""Fixtures the end-to-end tests share: `project`, a small project to start qshell in (one
`hello.txt` that says "hello world"). A test module that needs other files defines its
own `project`, which overrides this one."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    root.mkdir()
    (root / "hello.txt").write_text("hello world\n")
    return root
