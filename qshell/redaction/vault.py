"""The session's redactions: each secret replaced by a marker, and markers put back on write.

`Vault.redact` replaces every secret `scan` finds by a marker naming its kind and a number,
`[redacted: github-token #2]`; the same value always gets the same marker, and the vault
keeps marker → value for the session. `Vault.restore` is the way back for the file tools:
each marker in a text the model wrote becomes the value again, but only where the file
being written already holds that value (a marker is restored in place, never carried into
another file or a new one); a marker the vault never gave and the file does not hold, or
one whose value the file does not hold, makes the restoration refused, so no marker is
ever written where a secret was and no secret lands where none was. A value a read_file
page showed across numbered lines is kept as the file holds it (prefixes removed). The
values never leave this object: not in its repr, not in a log. Thread-safe: parallel tool
calls of one session redact through one vault, under its lock.
"""

from __future__ import annotations

import re
import threading
from collections import Counter
from dataclasses import dataclass

from qshell.redaction.base import Finding
from qshell.redaction.scanner import scan

MARKER_RE = re.compile(r"\[redacted: (?P<kind>[a-z0-9-]+) #(?P<number>\d+)\]")
_NUMBERED = re.compile(r"[ \t]*\d+\t")  # read_file's `cat -n` prefix of a line


def marker(kind: str, number: int) -> str:
    return f"[redacted: {kind} #{number}]"


def counted(kinds: tuple[str, ...]) -> str:
    """`2 secrets (github-token, password)`: how many, and of which kinds."""
    names = ", ".join(sorted(Counter(kinds)))
    return f"{len(kinds)} secret{'s' if len(kinds) != 1 else ''} ({names})"


@dataclass(frozen=True, slots=True)
class Redaction:
    """A text with its secrets replaced: the new text, and what was found in the old one
    (positions in the old text, in order)."""

    text: str
    findings: tuple[Finding, ...] = ()

    @property
    def kinds(self) -> tuple[str, ...]:
        return tuple(f.kind for f in self.findings)


@dataclass(frozen=True, slots=True)
class Restoration:
    """A text the model wrote with its markers put back. `unknown`: markers that stand
    for no value of this session; `elsewhere`: markers whose value the file does not hold.
    Either makes it refused: `text` must then not be written."""

    text: str
    unknown: tuple[str, ...] = ()
    elsewhere: tuple[str, ...] = ()
    exposed: tuple[str, ...] = ()  # markers whose value would stand where none can find it

    @property
    def refused(self) -> bool:
        return bool(self.unknown or self.elsewhere or self.exposed)

    def problem(self, shown: str) -> str:
        """Why `shown` was not written, and what to do instead."""
        if self.unknown:
            return (
                f"{', '.join(self.unknown)} in the text for {shown} stands for no secret qshell "
                "redacted in this session; it was not written. Write the file's real text, "
                "or read the file again and keep each redaction marker exactly as shown"
            )
        if self.exposed:
            return (
                f"{', '.join(self.exposed)} stands for a secret qshell hid from you; put back "
                f"where the text for {shown} has it, the secret would no longer read as one "
                "(glued to other text, or under another name). Nothing was written; keep "
                "each marker where the file had it, standing alone"
            )
        return (
            f"{', '.join(self.elsewhere)} stands for a secret qshell hid from you, and {shown} "
            "does not hold it: a marker is put back only into the file that holds its "
            "value, in place. Nothing was written; leave the value for the user to fill in"
        )


class Vault:
    """marker ↔ value for one session (see the module doc)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._marker_of: dict[str, str] = {}
        self._value_of: dict[str, str] = {}

    def __repr__(self) -> str:
        return f"Vault({len(self._value_of)} held)"

    def redact(self, text: str) -> Redaction:
        """`text` with every secret replaced by its marker (the same marker each time a
        value comes back)."""
        findings = scan(text)
        if not findings:
            return Redaction(text)
        parts: list[str] = []
        last = 0
        with self._lock:
            for finding in findings:
                parts += [text[last : finding.start], self._marker(finding, text)]
                last = finding.end
        parts.append(text[last:])
        return Redaction("".join(parts), tuple(findings))

    def _marker(self, finding: Finding, text: str) -> str:
        value = as_held(text[finding.start : finding.end])
        known = self._marker_of.get(value)
        if known is not None:
            return known
        made = marker(finding.kind, len(self._value_of) + 1)
        self._marker_of[value] = made
        self._value_of[made] = value
        return made

    def given(self, text: str) -> tuple[str, ...]:
        """The markers in `text` that this vault gave (each once, in order)."""
        with self._lock:
            known = [m.group() for m in MARKER_RE.finditer(text) if m.group() in self._value_of]
        return tuple(dict.fromkeys(known))

    def restore(self, text: str, *, held: str) -> Restoration:
        """`text` with each marker replaced by its value, where `held` (the file's current
        text) holds that value; a marker `held` holds literally, and the vault never gave,
        is the file's own text and stays. Each value put back must read as a secret where
        it lands (the scanner finds it there), or the file would show it to the next read:
        a marker moved into a word (`x[redacted: … #1]`) is refused."""
        unknown: list[str] = []
        elsewhere: list[str] = []
        spans: list[tuple[int, int, str]] = []  # where each value landed, and its marker
        parts: list[str] = []
        last = 0

        def value(match: re.Match[str]) -> str:
            found = match.group()
            with self._lock:
                secret = self._value_of.get(found)
            if secret is None:
                if found not in held:
                    unknown.append(found)
                return found
            if secret not in held and secret.replace("\n", "\r\n") not in held:
                elsewhere.append(found)
            return secret

        for match in MARKER_RE.finditer(text):
            parts.append(text[last : match.start()])
            at = sum(map(len, parts))
            put = value(match)
            if put != match.group():
                spans.append((at, at + len(put), match.group()))
            parts.append(put)
            last = match.end()
        restored = "".join(parts) + text[last:]
        exposed = _exposed(restored, spans)
        return Restoration(
            restored,
            tuple(dict.fromkeys(unknown)),
            tuple(dict.fromkeys(elsewhere)),
            tuple(dict.fromkeys(exposed)),
        )


def _exposed(text: str, spans: list[tuple[int, int, str]]) -> list[str]:
    """The markers of `spans` whose value, where it stands in `text`, no finding covers."""
    if not spans:
        return []
    findings = scan(text)
    return [
        made
        for start, end, made in spans
        if not any(f.start <= start and end <= f.end for f in findings)
    ]


def as_held(value: str) -> str:
    """A secret as its file holds it: a read_file page numbers each line (`   12\\t…`), so
    a value it showed across lines loses those prefixes."""
    lines = value.split("\n")
    if len(lines) > 1 and all(_NUMBERED.match(line) for line in lines[1:]):
        return "\n".join([lines[0], *(_NUMBERED.sub("", line, count=1) for line in lines[1:])])
    return value
