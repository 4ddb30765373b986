"""Reading the append-only JSONL files qshell keeps: session transcripts and telemetry.

Both are written one whole JSON object per line and flushed, so a crash can leave at most a
torn last line; `read_objects` yields every line that is a JSON object, in order, and skips
anything else instead of failing. It only reads; the writers are `agent/transcript.py` and
`telemetry.py`. A missing file raises FileNotFoundError. Any thread.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any


def read_objects(path: Path) -> Iterator[dict[str, Any]]:
    """Every JSON object in the file at `path`, one per line, oldest first."""
    with path.open(encoding="utf-8", errors="replace") as handle:
        for line in handle:
            try:
                value = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(value, dict):
                yield value
