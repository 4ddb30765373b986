"""The values of an apply: what was written, why it cannot apply, and the journal's steps.

`Original` is a written file as it was before the overlay's first write, `Removal` a real
file, symlink or directory the overlay deletes (by its digest, trees.py); `Conflict` (with
one of the reason constants) is why a file cannot be applied, `ApplyConflict` carries them
all (nothing was applied), `ApplyFailed` means an apply was rolled back and
`ApplyCancelled` that it was stopped before its commit point (rolled back too); `Step`,
`Unlink`, `DirMode` and `JournalState` are what the journal records, `Phase` where an apply
stands. Values only, no I/O; any thread.
"""

from __future__ import annotations

import enum
import os
import stat as stat_module
from collections.abc import Sequence
from dataclasses import dataclass, field

from qshell.overlay.errors import OverlayError

JOURNAL_NAME = "journal.json"
JOURNAL_VERSION = 6  # 3: sealed (seal.py); 4: removals; 5: directory modes, in-place edits
# 6: directory attrs; a version 5 journal is one with none, recovered the same way
READABLE_VERSIONS = (5, JOURNAL_VERSION)
STAGE_PREFIX = ".qshell-stage-"
BACKUP_PREFIX = ".qshell-backup-"

CHANGED = "changed since it was copied"
DELETED = "was deleted since it was copied"
APPEARED = "appeared since the overlay created it"
BAD_COPY = "its overlay copy is missing or a symlink"
MODE_CHANGED = "its mode changed since it was copied"
ATTRS_CHANGED = "its extended attributes or ACLs changed since it was copied"
READ_ONLY = "is not writable for you"
DIR_READ_ONLY = "is in a directory that is not writable for you"
READ_CHANGED = "changed since the speculation read it"
SET_ID = "would get a setuid or setgid bit, which a speculation never applies"
CAPABILITY = "carries file capabilities, which a speculation never applies"
LINKED_TWICE = "has other hard links in the project, and the speculation linked it again"
UNJOINED = "shares its inode with a file the apply does not bring in"
UNLINKABLE = "cannot be hard-linked to the file it shares its inode with here"
SET_ID_BITS = stat_module.S_ISUID | stat_module.S_ISGID  # never applied from a speculation
ROOT_NAME = "the project directory"  # how a conflict names the root, whose path is ""


class Phase(enum.StrEnum):
    """Where an apply stands, as its journal records it (crash recovery reads it back)."""

    STAGING = "staging"  # removals moved aside, copies staged beside destinations: roll back
    RENAMING = "renaming"  # staged copies are being swapped in: roll back
    COMMITTED = "committed"  # every file is in: finish the clean-up


@dataclass(frozen=True, slots=True)
class Conflict:
    """A file that stops an apply, and why (one of the reason constants above); its `path`
    is root-relative, "" for the project's directory itself (a listing read there)."""

    path: str
    reason: str

    def __str__(self) -> str:
        return f"{self.path or ROOT_NAME} {self.reason}"


class ApplyConflict(OverlayError):
    """The overlay was not applied because of these conflicts; the real tree is untouched."""

    def __init__(self, conflicts: Sequence[Conflict]) -> None:
        self.conflicts = list(conflicts)
        super().__init__("; ".join(str(c) for c in self.conflicts))

    def __str__(self) -> str:  # conflicts found while rolling back join the list
        return "; ".join(str(c) for c in self.conflicts)


class ApplyFailed(OverlayError):
    """Applying failed and was rolled back (or, if rolling back failed too, will be at start)."""


class ApplyCancelled(OverlayError):
    """The apply was cancelled before its commit point and rolled back: nothing changed."""


@dataclass(frozen=True, slots=True)
class Original:
    """A written file as it was before the overlay's first write to it."""

    rel: str
    existed: bool
    sha256: str | None  # when it existed
    mode: int | None  # its permission bits; for a new file, those asked for (None: default)
    attrs: str | None = None  # metadata.attrs_digest of its xattrs and ACLs (None: unknown)


@dataclass(frozen=True, slots=True)
class Removal:
    """A real entry the overlay deletes, as it was when the deletion was recorded."""

    rel: str
    digest: str  # trees.digest_at of the real file, symlink or directory then


@dataclass(frozen=True, slots=True)
class ApplyReport:
    applied: tuple[str, ...]
    created_dirs: tuple[str, ...]
    seconds: float
    leftovers: tuple[str, ...] = ()  # backups that could not be removed afterwards
    removed: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Recovery:
    direction: str  # "rolled back" | "completed"
    kept: tuple[str, ...]  # destinations edited after the crash, left as they were
    # (kept file, the name beside it that holds what was there before the apply)
    beside: tuple[tuple[str, str], ...] = ()
    project: str = ""  # the root both are relative to


@dataclass
class Step:
    """One file of an apply, as the journal records it.

    `staged` first names the new copy beside the destination; once they are exchanged it
    names what was swapped out, until that moves to `backup`. `staged_ino` tells the new
    copy apart from anything else found under those names. Files that are one inode in the
    upper layer (a command's `ln`) share `link_group`: the first is staged as a copy, each
    other one as a hard link of that copy (same `staged_ino` and `sha256`), so the swaps
    leave one inode with every name, as the live command does.
    """

    rel: str
    staged: str
    backup: str | None  # None for a new file
    mode: int | None  # the staged file's mode; None = the default for a new file
    expect_sha256: str | None  # what the swapped-out original must hold (None: new file)
    sha256: str | None = None  # of the new content, once staged
    staged_ino: int | None = None  # of the new copy, once staged
    expect_mode: int | None = None  # the original's mode when not `mode` (a command's chmod)
    in_place: bool = False  # hard-linked: written into the destination's inode, `backup` a copy
    dest_ino: int | None = None  # the destination's inode, for an in-place edit
    link_group: str | None = None  # one inode in the upper layer: the rel staged first

    @property
    def follower(self) -> bool:
        """Staged as a hard link of its group's first file rather than as a copy."""
        return self.link_group is not None and self.link_group != self.rel

    @property
    def original_mode(self) -> int | None:
        return self.mode if self.expect_mode is None else self.expect_mode


@dataclass
class Unlink:
    """One deletion of an apply: the real entry at `rel` is moved to `backup` (in the same
    directory) and checked against `digest`; the backup is removed after the commit."""

    rel: str
    backup: str
    digest: str


@dataclass
class DirMode:
    """A directory's mode as the apply sets it: `before` is its mode until then, None for a
    directory the apply makes; `attrs` the xattrs and ACLs it gets (metadata.encode_attrs;
    None: it keeps its own), `attrs_before` an existing one's until then."""

    rel: str
    mode: int
    before: int | None = None
    attrs: dict[str, str] | None = None
    attrs_before: dict[str, str] | None = None


@dataclass
class JournalState:
    root: str
    phase: Phase
    dirs: list[str]
    files: list[Step]
    removals: list[Unlink] = field(default_factory=list)  # done before `dirs` are made
    modes: list[DirMode] = field(default_factory=list)  # of made dirs and retouched ones
    version: int = JOURNAL_VERSION
    pid: int = field(default_factory=os.getpid)
