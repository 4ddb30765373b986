"""Secrets judged by content: found in any text qshell sends a model, and kept out of it.

A leaf package: it knows text and secret formats, nothing of tools, sessions or the loop.
`scan(text)` finds the secrets (scanner.py: by shape in tokens.py — private keys, cloud,
forge and service tokens, JWTs, URLs with a password —, by name in assignments.py — values
of secret-sounding keys, in code, configuration, XML and connection strings —, by place in
command_lines.py — `mysql -p…`, `sshpass -p`, `curl -u user:…` —; judgement.py decides what a
match's value is); a session's `Vault` replaces each by a marker such as
`[redacted: aws-access-key #1]` and keeps the value, so the file tools can put it back in
place (`Vault.restore`) and never write a marker where the file held the secret.
`redact(text)` is the one-shot form, `(text, findings)`.

Why hand-written patterns rather than Yelp's detect-secrets 1.5.0: measured on this
repository's files in 100 kB chunks, detect-secrets' `scan_line` took 798 ms per 100 kB
(median) and its 27 plugins' `analyze_line` alone 132 ms, against a budget of 2 ms; it
works line by line in Python with filters, and cannot skip a text that holds no
candidate. These patterns run only where a literal anchor occurs; bench/secret_scan.py
prints their figures.
"""

from qshell.redaction.base import Detector, Finding
from qshell.redaction.scanner import DETECTORS, scan
from qshell.redaction.vault import MARKER_RE, Redaction, Restoration, Vault, counted, marker

__all__ = [
    "DETECTORS",
    "MARKER_RE",
    "Detector",
    "Finding",
    "Redaction",
    "Restoration",
    "Vault",
    "counted",
    "marker",
    "redact",
    "scan",
]


def redact(text: str) -> tuple[str, list[Finding]]:
    """`text` with its secrets replaced by markers, and what was found (in a fresh vault:
    a session keeps one `Vault` instead, to restore what it redacted)."""
    done = Vault().redact(text)
    return done.text, list(done.findings)
