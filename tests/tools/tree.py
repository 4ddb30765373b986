"""`snapshot`: what a tool call left under a root, to show that a preview (or a refused
call) wrote nothing."""

from __future__ import annotations

from pathlib import Path


def snapshot(root: Path) -> dict[str, bytes | None]:
    """Every path under the root with its bytes (None for directories)."""
    return {
        p.relative_to(root).as_posix(): None if p.is_dir() else p.read_bytes()
        for p in sorted(root.rglob("*"))
    }
