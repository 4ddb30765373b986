"""Fixtures for the tool tests: a project root inside tmp_path and a ToolContext on it."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from qshell.cancel import CancelToken
from qshell.tools.base import ToolContext
from qshell.tools.paths import PathResolver


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """The project root; tmp_path itself stays free for files outside the root."""
    project = tmp_path / "project"
    project.mkdir()
    return project


@pytest.fixture
def ctx(root: Path, tmp_path: Path) -> ToolContext:
    return ToolContext(paths=PathResolver(root, home=tmp_path / "home"))


TreeSpec = dict[str, str | bytes]


@pytest.fixture
def make_tree(root: Path):
    """Write files under the root from a {relative path: content} mapping."""

    def build(spec: TreeSpec) -> Path:
        for rel, content in spec.items():
            path = root / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(content, bytes):
                path.write_bytes(content)
            else:
                path.write_text(content)
        return root

    return build


IGNORED_TREE: TreeSpec = {
    ".gitignore": "build/\n*.log\n!keep.log\n",
    "src/main.py": "print('needle')\n",
    "src/.gitignore": "generated.py\n",
    "src/generated.py": "needle = 1\n",
    "src/nested/deep.py": "# needle deep\n",
    "build/out.py": "needle = 2\n",
    "app.log": "needle in a log\n",
    "keep.log": "needle kept\n",
    ".hidden.py": "needle hidden\n",
    ".git/config": "needle in git\n",
    ".env": "TOKEN=needle\n",
    "certs/server.pem": "needle pem\n",
    "image.bin": b"needle\x00\x01\x02",
}


@pytest.fixture
def ignored_tree(make_tree) -> Path:
    """A tree exercising .gitignore (root, nested, negation), .git, dotfiles and secrets."""
    return make_tree(IGNORED_TREE)


@pytest.fixture
def cancelled_ctx(ctx: ToolContext) -> ToolContext:
    """The same context with its cancel token already cancelled."""
    token = CancelToken()
    token.cancel()
    return dataclasses.replace(ctx, cancel=token)
