"""Drive the real `qshell` in a pseudo-terminal with pexpect, against the scripted server."""

from __future__ import annotations

import os
import re
import sys
import time
from pathlib import Path

import pexpect
import pyte

from tests.fakes.llm_server import ScriptedLLMServer

TIMEOUT_S = 20
ROWS, COLUMNS = 40, 160


def spawn_qshell(
    server: ScriptedLLMServer | None,
    cwd: Path,
    *args: str,
    term: str = "xterm-256color",
    extra_env: dict[str, str] | None = None,
    columns: int = COLUMNS,
    answer_cpr: bool = False,
) -> Term:
    """qshell in a pty of ROWS x `columns`. prompt_toolkit's cursor position requests are
    off (PROMPT_TOOLKIT_NO_CPR), so it never knows how many rows are below the prompt and
    draws no bottom toolbar; `answer_cpr` turns them on and has Term answer each request
    as a terminal would, from the emulated screen."""
    # suggestions are off unless a test turns them on, so requests stay predictable
    env = {
        **os.environ,
        "TERM": term,
        "PROMPT_TOOLKIT_NO_CPR": "0" if answer_cpr else "1",
        "QSHELL_MAX_RETRIES": "0",
        "QSHELL_SUGGESTIONS": "0",
    }
    env.pop("INSIDE_EMACS", None)
    env.pop("NO_COLOR", None)
    if server is not None:
        env |= {
            "OPENAI_BASE_URL": server.openai_base_url,
            "OPENAI_API_KEY": server.api_key or "",
            "OPENAI_MODEL": "m1",
        }
    env |= extra_env or {}
    child = pexpect.spawn(
        sys.executable,
        ["-m", "qshell", *args],
        cwd=str(cwd),
        env=env,
        encoding="utf-8",
        codec_errors="replace",
        timeout=TIMEOUT_S,
        dimensions=(ROWS, columns),
    )
    return Term(child, columns, answer_cpr=answer_cpr)


CPR_REQUEST = "\x1b[6n"  # where is the cursor? (answered ESC [ row ; column R)
PROMPT_ACTIVE = "\x1b[?2004h"  # prompt_toolkit turns bracketed paste on for a prompt
PROMPT_CLOSED = "\x1b[?2004l"  # ... and off when the prompt returns
_CURSOR_FORWARD = re.compile(r"\x1b\[(\d*)C")
_ESCAPES = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[()][0-9A-Za-z]|\x1b."
)


def screen_text(raw: str) -> str:
    """What a reader sees of terminal output, roughly: escapes dropped, moves as spaces."""
    text = _CURSOR_FORWARD.sub(lambda m: " " * int(m.group(1) or 1), raw)
    text = _ESCAPES.sub("", text)
    return text.replace("\r", "").replace("\x08", "")


class Term:
    """Matches patterns against the escape-free text of everything the child printed."""

    def __init__(
        self, child: pexpect.spawn, columns: int = COLUMNS, *, answer_cpr: bool = False
    ) -> None:
        self.child = child
        self.columns = columns
        self.answer_cpr = answer_cpr
        self.raw = ""
        self.pos = 0
        self.raw_pos = 0
        # the emulated screen, fed only what was read since it was last looked at
        self._screen = pyte.Screen(columns, ROWS)
        self._stream = pyte.Stream(self._screen)
        self._drawn = 0

    def wait_prompt(self, timeout_s: float = TIMEOUT_S) -> None:
        """Wait until a prompt is active: prompt_toolkit turns bracketed paste on for it."""
        self._wait_raw(PROMPT_ACTIVE, timeout_s)

    def submit(self, text: str, timeout_s: float = TIMEOUT_S) -> None:
        """Type `text` and Enter at the active prompt, and wait until that prompt has closed."""
        self.child.send(text + "\r")
        self._wait_raw(PROMPT_CLOSED, timeout_s)

    def wait_for(self, marker: str, timeout_s: float = TIMEOUT_S) -> None:
        """Wait for a raw `marker` (e.g. an escape sequence) after the last one waited for."""
        self._wait_raw(marker, timeout_s)

    def _wait_raw(self, marker: str, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while (found := self.raw.find(marker, self.raw_pos)) < 0:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(
                    f"{marker!r} did not appear; screen tail:\n{self.text[-1500:]}"
                )
            try:
                self._read(min(remaining, 0.5))
            except pexpect.TIMEOUT:
                continue
        self.raw_pos = found + len(marker)
        self.pos = len(screen_text(self.raw[: self.raw_pos]))

    def _read(self, timeout_s: float) -> None:
        """Read what the child wrote (pexpect.TIMEOUT / EOF when nothing comes), answering
        its cursor position requests when asked to."""
        before = len(self.raw)
        self.raw += self.child.read_nonblocking(size=65536, timeout=timeout_s)
        if not self.answer_cpr:
            return
        start = max(before - len(CPR_REQUEST) + 1, 0)
        while (found := self.raw.find(CPR_REQUEST, start)) >= 0:
            screen = pyte.Screen(self.columns, ROWS)
            pyte.Stream(screen).feed(self.raw[:found])
            self.child.send(f"\x1b[{screen.cursor.y + 1};{screen.cursor.x + 1}R")
            start = found + len(CPR_REQUEST)

    @property
    def text(self) -> str:
        return screen_text(self.raw)

    def screen(self) -> list[str]:
        """The terminal's screen now, as an emulator (pyte) draws what was read so far;
        lines right-trimmed, blank ones kept."""
        return [line.rstrip() for line in self._emulated().display]

    def ghost(self) -> str:
        """The ghost text on screen at this moment, without waiting for one: everything the
        child wrote is read, and the italic text after the cursor on its line is returned
        ("" when none shows)."""
        self.drain()
        screen = self._emulated()
        row = screen.buffer[screen.cursor.y]
        after = range(screen.cursor.x, screen.columns)
        return "".join(row[x].data for x in after if row[x].italics).strip()

    def drain(self) -> None:
        """Read whatever the child has written by now, without waiting for more."""
        while True:
            try:
                self._read(0)
            except (pexpect.TIMEOUT, pexpect.EOF):
                return

    def _emulated(self) -> pyte.Screen:
        self._stream.feed(self.raw[self._drawn :])
        self._drawn = len(self.raw)
        return self._screen

    def pass_over(self, quiet_s: float = 0.1) -> None:
        """Read until the child is quiet, and have later waits look only past all of it: a
        prompt redrawn since (under a streaming tail's output) is then not taken for the
        next one."""
        self.settle(quiet_s)
        self.raw_pos = len(self.raw)
        self.pos = len(self.text)

    def settle(self, quiet_s: float = 0.3) -> None:
        """Read until the child has written nothing for `quiet_s`."""
        while True:
            try:
                self._read(quiet_s)
            except pexpect.TIMEOUT:
                return

    def expect(self, *patterns: str, timeout_s: float = TIMEOUT_S) -> int:
        """Wait until one of `patterns` (regexes) appears after the last match; its index."""
        compiled = [re.compile(p) for p in patterns]
        deadline = time.monotonic() + timeout_s
        while True:
            text = self.text
            found = [
                (m.start(), i, m) for i, c in enumerate(compiled) if (m := c.search(text, self.pos))
            ]
            if found:
                _, index, match = min(found)
                self.pos = match.end()
                return index
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(f"none of {patterns} appeared; screen tail:\n{text[-1500:]}")
            try:
                self._read(min(remaining, 0.5))
            except pexpect.TIMEOUT:
                continue
            except pexpect.EOF:
                text = self.text
                if any(c.search(text, self.pos) for c in compiled):
                    continue
                raise AssertionError(
                    f"qshell exited before {patterns}; screen tail:\n{text[-1500:]}"
                ) from None

    def send(self, text: str) -> None:
        self.child.send(text)

    def finish(self) -> int:
        """Read to the end and return the exit status."""
        while True:
            try:
                self._read(TIMEOUT_S)
            except pexpect.EOF:
                break
        self.child.close()
        status = self.child.exitstatus
        return status if status is not None else -(self.child.signalstatus or 0)
