"""Session transcripts: append-only JSONL files, one per session, per project directory.

Files live at `<state>/projects/<cwd-slug>/<session-id>.jsonl` (directories 0700, files
0600). The first record is a header with the system prompt the model saw; each later
record is one complete message (never a half-written one) or a note such as a failed
turn or a usage count. A `compacted` note means the history restarts there (the messages
after it replace all earlier ones). Reading a transcript back gives exactly the history
the model saw, and what its rounds used (a resumed session goes on counting from there). One writer per
file; appends are line-buffered and flushed, so a crash leaves whole lines only.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from pydantic import TypeAdapter, ValidationError

from qshell.dirs import PRIVATE_FILE_MODE, ensure_private_dir
from qshell.errors import InputError
from qshell.jsonl import read_objects
from qshell.llm.messages import Message, Usage

SESSION_ID_RE = re.compile(r"^[A-Za-z0-9_-]{1,80}$")
_MESSAGES = TypeAdapter(Message)


def project_slug(root: Path) -> str:
    """A directory name for a project: its path with every other character turned into '-'."""
    return re.sub(r"[^A-Za-z0-9]", "-", str(root))


def transcripts_dir(state_dir: Path, root: Path) -> Path:
    return state_dir / "projects" / project_slug(root)


@dataclass(frozen=True, slots=True)
class LoadedTranscript:
    session_id: str
    system_prompt: str
    messages: list[Message]
    last_prompt_tokens: int = 0  # size of the last round (prompt + completion), for compaction
    predict_next: bool = False  # its answers end with a prediction line (agent/prediction.py)
    # what the session's rounds so far used: the sum, the count, the sums by position
    usage: Usage = field(default_factory=Usage)
    rounds: int = 0
    position_usage: dict[str, Usage] = field(default_factory=dict)


class Transcript:
    """The open, append-only transcript of one session."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._file: IO[str] | None = None

    @classmethod
    def create(cls, directory: Path, session_id: str, header: dict[str, Any]) -> Transcript:
        transcript = cls(ensure_private_dir(directory) / f"{session_id}.jsonl")
        transcript.write({"type": "session", "session_id": session_id, **header})
        return transcript

    def _handle(self) -> IO[str]:
        if self._file is None:
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, PRIVATE_FILE_MODE)
            os.fchmod(fd, PRIVATE_FILE_MODE)
            self._file = os.fdopen(fd, "a", encoding="utf-8")
        return self._file

    def write(self, record: dict[str, Any]) -> None:
        record = {**record, "timestamp": round(time.time(), 3)}
        handle = self._handle()
        handle.write(json.dumps(record, ensure_ascii=False) + "\n")
        handle.flush()

    def write_message(self, message: Message) -> None:
        self.write({"type": "message", "message": message.model_dump(mode="json")})

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


def records(path: Path) -> Iterator[dict[str, Any]]:
    """Every whole record of the transcript at `path`, in order: the one reader of the
    format (`load`, `first_prompt`, `qshell stats`); a torn last line is skipped."""
    return read_objects(path)


def load(path: Path) -> LoadedTranscript:
    """Read a transcript back: the history the model saw, from its last `compacted` note."""
    session_id = path.stem
    system_prompt = ""
    predict_next = False
    messages: list[Message] = []
    last_tokens = 0
    total, rounds, by_position = Usage(), 0, dict[str, Usage]()
    for record in records(path):
        kind = record.get("type")
        if kind == "session":
            system_prompt = record.get("system_prompt", "")
            predict_next = record.get("predict_next") is True
        elif kind == "compacted":
            messages.clear()
            last_tokens = _int(record.get("estimated_tokens"))
        elif kind == "usage" and isinstance(record.get("usage"), dict):
            usage = record["usage"]
            last_tokens = _int(usage.get("prompt_tokens")) + _int(usage.get("completion_tokens"))
            try:
                counted = Usage.model_validate(usage)
            except ValidationError:
                continue
            total, rounds = total + counted, rounds + 1
            position = record.get("position")
            if isinstance(position, str):
                by_position[position] = by_position.get(position, Usage()) + counted
        elif kind == "message":
            try:
                messages.append(_MESSAGES.validate_python(record["message"]))
            except (ValidationError, KeyError):
                continue
    return LoadedTranscript(
        session_id, system_prompt, messages, last_tokens, predict_next, total, rounds, by_position
    )


def first_prompt(path: Path, *, max_chars: int = 80) -> str:
    """The first text the user sent in a transcript, on one line (for `/resume`); "" when
    there is none or the file cannot be read."""
    try:
        for record in records(path):
            message = record.get("message") if record.get("type") == "message" else None
            if not isinstance(message, dict) or message.get("role") != "user":
                continue
            for block in message.get("content", []):
                if isinstance(block, dict) and block.get("type") == "text":
                    return " ".join(str(block.get("text", "")).split())[:max_chars]
    except OSError:
        return ""
    return ""


def _int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def find(directory: Path, session_id: str | None) -> Path:
    """The transcript for `session_id`, or the latest one when None; InputError if none."""
    if session_id is None:
        candidates = sorted(directory.glob("*.jsonl"), key=lambda p: p.stat().st_mtime_ns)
        if not candidates:
            raise InputError("there is no earlier session in this directory to continue")
        return candidates[-1]
    if not SESSION_ID_RE.match(session_id):
        raise InputError(f"'{session_id}' is not a valid session id")
    path = directory / f"{session_id}.jsonl"
    if not path.is_file():
        raise InputError(
            f"no session '{session_id}' in this directory; list them with `ls {directory}`"
        )
    return path
