"""Local telemetry: append-only JSONL event files under the state directory.

This module is the only writer of telemetry files, and it sends nothing anywhere: events
stay in `<state>/telemetry/events.jsonl` (directories 0700, the file 0600) until the user
reads them with `qshell stats` or deletes them. Callers decide what goes into an event,
and pass whatever the user or the model wrote — a prompt, a command line, a path, a URL,
file contents, a reason quoting them — as `texts`: the file keeps those only when the
instance was built with `log_text` (`telemetry.logText`), so without it a record holds
only its safe shape (a command's program and word count: `command_shape`, a count of
paths, the tool's name, the verdict). Recording must never disturb the session, so
`record()` never raises: the first `OSError` disables the instance and is logged once at
debug level. Observers (`observe`, the plugins' `qshell_event`) see every record, written
or not, its texts included (a plugin runs in qshell and sees the tool calls anyway); what
they raise is logged and swallowed. Thread-safe: one lock
serialises writes, and each event is a single `write()` of one whole line, so a crash or
a second qshell process appending to the same file leaves whole lines only.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shlex
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from qshell.dirs import PRIVATE_FILE_MODE, ensure_private_dir
from qshell.jsonl import read_objects

log = logging.getLogger(__name__)

TELEMETRY_DIRNAME = "telemetry"
EVENTS_FILENAME = "events.jsonl"
TIMESTAMP_DECIMALS = 3  # seconds since the epoch, rounded to milliseconds
_RESERVED_KEYS = frozenset({"event", "timestamp"})
_OPEN_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_APPEND | getattr(os, "O_NOFOLLOW", 0)
Observer = Callable[[str, Mapping[str, Any]], None]  # (event, fields) of each record
_ASSIGNMENT_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")  # `NAME=value` before a program
_PROGRAM_RE = re.compile(r"[\w.+-]{1,64}")  # a name safe to keep; else UNKNOWN_PROGRAM
_OPENERS = frozenset({"(", "{", "!"})  # what may stand before a command's first word
UNKNOWN_PROGRAM = "?"


class Telemetry:
    """Appends events to one private JSONL file; `Telemetry.disabled()` records nothing."""

    def __init__(
        self,
        path: Path | None,
        *,
        clock: Callable[[], float] = time.time,
        log_text: bool = False,
    ) -> None:
        self.path = path
        self.log_text = log_text  # the file keeps a record's `texts` too
        self._clock = clock
        self._lock = threading.Lock()
        self._fd: int | None = None
        self._broken = False
        self._observers: list[Observer] = []

    @classmethod
    def disabled(cls) -> Telemetry:
        """An instance whose `record()` does nothing (telemetry turned off, or tests)."""
        return cls(None)

    @classmethod
    def for_state_dir(
        cls, state: Path, *, clock: Callable[[], float] = time.time, log_text: bool = False
    ) -> Telemetry:
        """The events file of a state directory: `<state>/telemetry/events.jsonl`."""
        return cls(state / TELEMETRY_DIRNAME / EVENTS_FILENAME, clock=clock, log_text=log_text)

    @property
    def enabled(self) -> bool:
        """False for `disabled()` and after a write failed."""
        return self.path is not None and not self._broken

    def observe(self, observer: Observer) -> None:
        """Call `observer(event, fields)` for every later record, before it is written."""
        self._observers.append(observer)

    def record(
        self, event: str, /, *, texts: Mapping[str, Any] | None = None, **fields: Any
    ) -> None:
        """Append `{"event": event, "timestamp": now, **fields}` as one line; never raises.

        `texts` (what the user or the model wrote) join the line only with `log_text`;
        observers see them either way. Values that JSON cannot encode are written as their
        `str()`; fields named `event` or `timestamp` are dropped, since those two keys
        belong to every line.
        """
        everything = {**fields, **texts} if texts else fields
        for observer in list(self._observers):
            try:
                observer(event, {k: v for k, v in everything.items() if k not in _RESERVED_KEYS})
            except Exception:
                log.debug("a telemetry observer failed", exc_info=True)
        if self.log_text:
            fields = everything
        path = self.path
        if path is None or not self.enabled:
            return
        try:
            record = {"event": event, "timestamp": round(self._clock(), TIMESTAMP_DECIMALS)}
            record.update((k, v) for k, v in fields.items() if k not in _RESERVED_KEYS)
            line = json.dumps(record, ensure_ascii=False, default=str) + "\n"
        except Exception:  # a bad clock or a circular value: skip this event only
            log.debug("telemetry event %r could not be encoded", event, exc_info=True)
            return
        data = line.encode("utf-8")
        with self._lock:
            if self._broken:
                return
            try:
                fd = self._open(path)
                written = os.write(fd, data)
                if written != len(data):  # a short write on a full disk: finish the line
                    os.write(fd, data[written:])
            except OSError:
                self._broken = True
                self._close_locked()
                log.debug("telemetry disabled: cannot write %s", path, exc_info=True)

    def close(self) -> None:
        """Close the file; a later `record()` opens it again."""
        with self._lock:
            self._close_locked()

    def _open(self, path: Path) -> int:
        if self._fd is None:
            ensure_private_dir(path.parent)
            fd = os.open(path, _OPEN_FLAGS, PRIVATE_FILE_MODE)
            try:
                os.fchmod(fd, PRIVATE_FILE_MODE)  # a file made earlier with a looser mode
            except OSError:
                os.close(fd)
                raise
            self._fd = fd
        return self._fd

    def _close_locked(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            try:
                os.close(fd)
            except OSError:
                log.debug("closing the telemetry file failed", exc_info=True)


def command_shape(command: str) -> dict[str, Any]:
    """What a record may keep of a command line without `log_text`: its program's name
    (the first word after any `NAME=value` assignments, its directory dropped) and how
    many words follow it, operators included — never an argument."""
    try:
        lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        words = list(lexer)
    except ValueError:  # an unclosed quote: words as the spaces cut them
        words = command.split()
    start = 0
    while start < len(words) and (words[start] in _OPENERS or _ASSIGNMENT_RE.match(words[start])):
        start += 1
    if start == len(words):
        return {"program": None, "arg_count": 0}
    name = words[start].rsplit("/", 1)[-1]
    program = name if _PROGRAM_RE.fullmatch(name) else UNKNOWN_PROGRAM
    return {"program": program, "arg_count": len(words) - start - 1}


def read_events(path: Path) -> list[dict[str, Any]]:
    """Every event in a telemetry file, oldest first; a missing file gives `[]`.

    Lines that are not JSON objects (a torn last line after a crash) are skipped.
    """
    try:
        return list(read_objects(path))
    except FileNotFoundError:
        return []
