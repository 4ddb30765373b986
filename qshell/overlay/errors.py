"""The exceptions of the overlay package that are not about applying (those are journal.py's).

`OverlayEscape` means a path would leave the project or go through a symlink inside the
overlay: the gate turns it into a boundary; so does `HardLinked`, a write to a real file
with other hard links (its other names would go on showing the old content).
`OverlayUnavailable` means there is no safe private directory (speculation turns itself
off) or the overlay was already discarded.
`ReadsUnrecorded` means a command would read more than the overlay can fingerprint: the
gate turns it into a boundary too. Values only; any thread.
"""

from __future__ import annotations

import os


class OverlayError(Exception):
    """Root of every exception the overlay package raises, so a caller can catch one type."""


class OverlayEscape(OverlayError):
    """A path resolves outside the project root, or through a symlink inside the overlay."""

    def __init__(self, path: os.PathLike[str] | str, reason: str) -> None:
        super().__init__(f"{path} {reason}")
        self.path, self.reason = str(path), reason


class HardLinked(OverlayError):
    """A speculated write would change a real file that has other hard links: the overlay's
    copy would be one name alone, so every other name would show the old content until
    accept (a real write changes them all)."""

    def __init__(self, path: os.PathLike[str] | str, reason: str) -> None:
        super().__init__(f"{path} {reason}")
        self.path, self.reason = str(path), reason


class ReadsUnrecorded(OverlayError):
    """A speculative command reads more files than the overlay can record for accept."""


class OverlayUnavailable(OverlayError):
    """No safe private directory for an overlay (speculation is off), or it was discarded."""


def os_error(code: int, path: object) -> OSError:
    """The OSError the OS itself would raise for `code` on `path`."""
    return OSError(code, os.strerror(code), str(path))
