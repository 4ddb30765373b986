"""The copy-on-write overlay a speculation writes into, and the record of what it read.

Writes land in a private directory outside the project (base_dir.py) laid out as a Linux
overlayfs upper directory: `upper/<project-relative path>` holds each written file and
nothing else (a tool's copy is written beside its name, then renamed over it); `meta.jsonl`
(each original's sha256, mode and attrs, or that it did not exist), `lock` (held for the
overlay's life, lease.py) and `journal.json` sit beside it. Its `view` (view.py) is the
FileView tools get during a speculation; every real file read through it, and every file a
speculative shell command was known to read (`record_path`), leaves a fingerprint (reads.py)
that `apply` checks with the written files — and so does each symlink such a read went
through. A tool's first write to a real file copies it up with its xattrs and ACLs, and each
real directory on its way with its mode and attrs, as overlayfs copies one up (upper.py):
the upper copy is the one source of what apply gives each (dirnotes.py, staging.py). Before
a command runs on the kernel overlay, `record_base` notes the whole tree (baseline.py): what
the command touched that the user changed meanwhile spoils the overlay at `absorb`. Every
path is resolved with symlinks followed; one outside the project root, through a symlink
loop, or a symlink inside the overlay, raises OverlayEscape here, and is a Conflict again at
apply time (plan.py); a tool's write to a real file with other hard links raises HardLinked
(the copy would be that name alone, the others showing the old content: the gate makes it a
boundary). Deletions are recorded as overlayfs records them — a whiteout, or an opaque
directory replacing the real one — when a command run on the kernel overlay leaves them in
`upper/` (`absorb`, upper.py); the view then shows them deleted and `apply` deletes them. It
never writes the real tree except through `apply`, and never uses a directory it does not
own. Thread-safe: one speculation thread writes and applies while parallel tool calls read;
a lock guards the bookkeeping and copies are renamed in whole, so a read sees one version
(but of a file a command hard-linked, written in place as a real write is).
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import stat as stat_module
import threading
from collections.abc import Callable, Collection, Iterable, Iterator
from dataclasses import asdict
from pathlib import Path
from types import TracebackType

from qshell.dirs import PRIVATE_FILE_MODE
from qshell.overlay import baseline, journal, reads
from qshell.overlay.base_dir import (
    UPPER_DIR_NAME,
    candidate_bases,
    choose_base,
    new_overlay_dir,
    remove_overlay,
)
from qshell.overlay.dirfd import PathRefused, open_chain, open_dir
from qshell.overlay.dirnotes import DirNotes
from qshell.overlay.errors import OverlayEscape, OverlayUnavailable, ReadsUnrecorded, os_error
from qshell.overlay.lease import Lease
from qshell.overlay.plan import plan
from qshell.overlay.reads import Fingerprint
from qshell.overlay.records import (
    ApplyConflict,
    ApplyFailed,
    ApplyReport,
    Conflict,
    DirMode,
    JournalState,
    Original,
    Phase,
    Removal,
)
from qshell.overlay.sweep import recover_overlay
from qshell.overlay.trees import TreeTooLarge
from qshell.overlay.upper import (
    OPAQUE_XATTR,
    UpperRefused,
    changed_paths,
    copy_up_dir,
    covered,
    dress_top,
    drop,
    merge,
    note_dirs,
    put_copy,
    reconcile,
    refuse_privileged,
    retouched,
    scan,
    snapshot,
    top_changed,
)
from qshell.overlay.view import OverlayView
from qshell.tools.paths import PathResolver

META_NAME = "meta.jsonl"
TOP_CHANGED = "holds a change to the project directory's own mode or attributes (not applied)"
_APPEND_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC


class Overlay:
    """One speculation's copy-on-write layer over the project at `resolver.root`."""

    def __init__(self, resolver: PathResolver, directory: Path, lease: Lease | None = None) -> None:
        self.resolver = resolver
        self.root = resolver.root
        self.directory = directory
        self.upper = directory / UPPER_DIR_NAME
        self.view = OverlayView(self)
        self.lease = lease  # held until discard: while it is, no sweep takes this overlay
        self._lock = threading.Lock()
        self._originals: dict[str, Original] = {}
        self._removed: dict[str, Removal] = {}  # real entries deleted (or replaced)
        self._reads: dict[str, Fingerprint] = {}
        self._dirs: dict[str, set[str]] = {"": set()}  # each upper directory → child names
        self._dir_notes = DirNotes()  # directories' modes and attrs before the speculation
        self._discarded = False
        self._spoiled: Conflict | None = None  # why nothing of it may be applied any more
        self._base: baseline.Base | None = None  # the tree before the running command
        self._tops: dict[Path, tuple[int, str]] = {}  # command layers' tops, as prepared
        self._bases = [
            Path(os.path.realpath(b)) for b in {*candidate_bases(), directory.parent.parent}
        ]

    @classmethod
    def create(cls, root: Path, resolver: PathResolver, *, base_dir: Path | None = None) -> Overlay:
        """A fresh overlay, in a private base outside the project root; OverlayUnavailable
        when the base is unsafe or every candidate is inside the root (base_dir.py)."""
        if Path(root).resolve() != resolver.root:
            raise OverlayUnavailable(f"{root} is not the resolver's root {resolver.root}")
        directory, lease = new_overlay_dir(choose_base(resolver.root, base_dir))
        overlay = cls(resolver, directory, lease)
        dress_top(overlay.upper, overlay.root, mode=False)  # its default ACL, to inherit
        return overlay

    def __enter__(self) -> Overlay:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.discard()

    @property
    def written(self) -> list[str]:
        """Root-relative paths of every file written or deleted so far, sorted."""
        with self._lock:
            return sorted({*self._originals, *self._removed})

    @property
    def removed(self) -> list[str]:
        """Root-relative paths of every real file or directory deleted so far, sorted."""
        with self._lock:
            return sorted(self._removed)

    @property
    def directories(self) -> list[str]:
        """Root-relative paths of every directory of the upper layer (made or already
        there), sorted; apply makes each one exist, empty ones included."""
        with self._lock:
            return sorted(d for d in self._dirs if d)

    @property
    def spoiled(self) -> Conflict | None:
        """Why nothing of it may be applied any more (the user changed what a command
        touched, since its base), else None."""
        with self._lock:
            return self._spoiled

    @property
    def has_writes(self) -> bool:
        with self._lock:
            return bool(self._originals or self._removed or len(self._dirs) > 1)

    def original(self, rel: str) -> Original | None:
        with self._lock:
            return self._originals.get(rel)

    @property
    def reads(self) -> list[Fingerprint]:
        """The fingerprint of every real file read so far, by path."""
        with self._lock:
            return sorted(self._reads.values(), key=lambda f: f.rel)

    def record_read(self, print_: Fingerprint) -> None:
        """Note a read of a real file: the first one of a file counts, unless a later one
        saw the same file state and more of it."""
        self.record_reads((print_,))

    def record_reads(self, prints: Iterable[Fingerprint]) -> None:
        """`record_read` of each of `prints`, under one hold of the lock."""
        with self._lock:
            for print_ in prints:
                known = self._reads.get(print_.rel)
                if known is None or print_.stronger_than(known):
                    self._reads[print_.rel] = print_

    def record_path(self, path: os.PathLike[str] | str, *, stop: Callable[[], bool]) -> None:
        """Note that a shell command will read `path` (absolute): a file is fingerprinted by
        content, a directory by the signature of every file below it (`stop()` ends that
        walk early). Paths outside the root, missing or special are skipped.
        ReadsUnrecorded when a tree has too many files to record."""
        try:
            rel, resolved = self.locate(path)
        except (OverlayEscape, OSError):
            return
        try:
            found = reads.of_path(rel, resolved, self.root, stop)
        except reads.TooManyReads as exc:
            raise ReadsUnrecorded(str(exc)) from None
        if found is None:
            return
        self.record_links(path)
        for print_ in found:
            self.record_read(print_)

    def record_base(self, *, stop: Callable[[], bool]) -> None:
        """Before a shell command runs on the kernel overlay: note the project tree as it is
        (baseline.py) for `absorb` to compare what the command changed with, and
        fingerprint every file in it by its stat signature and every directory by its
        names, since the command may read or look up any (`stop()` ends the walk early).
        ReadsUnrecorded when there are too many files."""
        try:
            base = baseline.take(self.root, stop)
        except reads.TooManyReads as exc:
            raise ReadsUnrecorded(str(exc)) from None
        self.record_reads(list(base.prints(self.root)))  # read before the lock is held
        with self._lock:
            self._base = base

    def record_links(self, path: os.PathLike[str] | str) -> None:
        """Note the symlinks inside the project that a read of `path` (absolute) goes
        through, by their targets: re-pointed, the read would see another file."""
        for print_ in reads.links_on(self.root, Path(path)):
            self.record_read(print_)

    def check_conflicts(self) -> list[Conflict]:
        """Why the overlay could not be applied now (empty: apply would go through)."""
        return self.preview()[1]

    def mode_changes(self) -> list[DirMode]:
        """The existing directories whose mode or attrs applying now would change (a chmod,
        setfattr or setfacl the speculation made), as the apply's plan has them."""
        return [m for m in self.preview()[0].modes if m.before is not None]

    def preview(self) -> tuple[JournalState, list[Conflict]]:
        """The plan an apply now would follow, and what stops it; touches nothing."""
        with self._lock:
            self._check_open()
            if self._spoiled is not None:
                return JournalState(str(self.root), Phase.STAGING, [], []), [self._spoiled]
            try:
                originals, read = list(self._originals.values()), list(self._reads.values())
                removals, made = list(self._removed.values()), [d for d in self._dirs if d]
                return plan(self.root, self.upper, originals, read, removals, made, self._dir_notes)
            except (OSError, PathRefused) as exc:
                raise ApplyFailed(f"cannot check the overlay: {exc}") from exc

    def apply(
        self,
        *,
        progress: journal.Progress | None = None,
        cancelled: Callable[[], bool] | None = None,
    ) -> ApplyReport:
        """Apply every written file, all or nothing; the overlay stays until `discard()`.

        `progress(done, total)` is called as files are staged and swapped in; `cancelled()`
        is asked between them and, when true before the commit point, the apply is rolled
        back and ApplyCancelled raised. Raises ApplyConflict (nothing applied: a written
        file changed since it was copied, or a file read since it was read) or ApplyFailed
        (rolled back).
        """
        with self._lock:
            self._check_open()
            if self._spoiled is not None:
                raise ApplyConflict([self._spoiled])
            target = self.directory / journal.JOURNAL_NAME
            originals, read = list(self._originals.values()), list(self._reads.values())
            removals, made = list(self._removed.values()), [d for d in self._dirs if d]
            return journal.apply_files(
                self.root,
                self.upper,
                target,
                originals,
                read,
                removals=removals,
                made=made,
                notes=self._dir_notes,
                progress=progress,
                cancelled=cancelled,
            )

    def prepare_layer(self, layer: Path) -> None:
        """Before a command runs with the fresh `layer` as its upper layer: its top
        directory gets the project directory's mode and attrs (upper.dress_top), and
        `changes_in` refuses the layer if the command changed them (never applied)."""
        dressed = dress_top(layer, self.root)
        with self._lock:
            self._tops[layer] = dressed

    def changes_in(self, layer: Path) -> list[str]:
        """The files and deletions a command left in its own upper `layer`, a replaced
        directory with a trailing slash (upper.py), and — trailing slash too — each plain
        directory it made or whose mode or attrs it changed (a chmod copies one up);
        OverlayEscape for a symlink or special file there, or a change to the project
        directory's own mode or attrs (`prepare_layer`)."""
        with self._lock:
            dressed = self._tops.get(layer)
        if dressed is not None and top_changed(layer, dressed):
            raise OverlayEscape(layer, TOP_CHANGED)
        try:
            entries = scan(layer)
        except UpperRefused as exc:
            raise OverlayEscape(layer, str(exc)) from None
        return changed_paths(entries) + retouched(self.root, entries)

    def absorb(self, layer: Path, unwanted: Collection[str] = ()) -> None:
        """Take in what a command run on the kernel overlay left in its `layer`, as if tools
        had written it: the paths in `unwanted` dropped, the rest moved into `upper/`, then
        originals read from the real tree, whiteouts and replaced directories recorded as
        deletions (upper.py). When `record_base` took a base before the command, any path
        the layer touches that the user changed meanwhile spoils the overlay: apply then
        reports it as a conflict, and the user's version stays. OverlayEscape (nothing taken
        in) for a symlink, special file, setuid/setgid bit or file capability in the layer;
        once the move has begun, a failure spoils the overlay (it raises
        OverlayEscape, ReadsUnrecorded for a deleted tree too large to check, or OSError)."""
        with self._lock:
            self._check_open()
            base, self._base = self._base, None
            try:
                refuse_privileged(layer, self.root)
                entries = drop(layer, scan(layer), unwanted)
            except UpperRefused as exc:
                raise OverlayEscape(layer, str(exc)) from None
            note_dirs(self.root, entries, self._dir_notes)
            try:
                merge(layer, self.upper, entries)
                found = reconcile(self.root, scan(self.upper), self._originals, self._removed)
                moved = None if base is None else baseline.first_change(self.root, base, entries)
            except BaseException as exc:
                self._spoiled = Conflict("a speculated command", f"could not be taken in: {exc}")
                if isinstance(exc, UpperRefused):
                    raise OverlayEscape(self.upper, str(exc)) from None
                if isinstance(exc, TreeTooLarge):
                    raise ReadsUnrecorded(str(exc)) from None
                raise
            self._originals, self._removed, self._dirs = found
            self._record_meta([*self._originals.values(), *self._removed.values()])
            if moved is not None and self._spoiled is None:
                self._spoiled = Conflict(moved, baseline.BASE_CHANGED)

    def _record_meta(self, records: list[Original | Removal]) -> None:
        lines = "".join(json.dumps(asdict(r)) + "\n" for r in records)
        fd = os.open(self.directory / META_NAME, _APPEND_FLAGS, PRIVATE_FILE_MODE)
        with open(fd, "w", encoding="utf-8", closefd=True) as meta:
            meta.write(lines)

    def discard(self) -> None:
        """Remove the overlay directory, then give up its lock. Idempotent; a pending
        journal is recovered first (if that fails, the overlay is kept for the next start)."""
        with self._lock:
            if self._discarded:
                return
            self._discarded = True
        try:
            if recover_overlay(self.directory, self.root):
                remove_overlay(self.directory)
        finally:
            if self.lease is not None:
                self.lease.release()

    def _check_open(self) -> None:
        if self._discarded:
            raise OverlayUnavailable(f"the overlay {self.directory} was discarded")

    def locate(self, path: os.PathLike[str] | str) -> tuple[str, Path]:
        """(root-relative path, resolved real path); OverlayEscape when outside the root."""
        raw = Path(path)
        if not raw.is_absolute():
            raise OverlayEscape(raw, "is not an absolute path")
        resolved = self.resolver.resolve(raw)
        if not self.resolver.is_inside_root(resolved):
            raise OverlayEscape(raw, f"resolves outside the project root {self.root}")
        rel = resolved.relative_to(self.root).as_posix()
        rel = "" if rel == "." else rel
        if rel and any(part in ("", ".", "..") for part in rel.split("/")):
            raise OverlayEscape(raw, "goes through a symlink loop")
        return rel, resolved

    def kind(self, rel: str) -> str | None:
        """'file' for a written file, 'dir' for a directory of the upper layer, 'gone' for
        a deleted real entry (or one inside a deleted or replaced directory), else None."""
        with self._lock:
            self._check_open()
            if rel in self._originals:
                return "file"
            if rel in self._dirs:
                return "dir"
            return "gone" if rel and covered(rel, self._removed) else None

    def covers(self, rel: str) -> bool:
        """Whether the real entry at `rel` is deleted or replaced (its content not shown)."""
        with self._lock:
            return bool(rel) and covered(rel, self._removed)

    def children(self, rel: str) -> set[str]:
        """The names the upper layer holds in directory `rel`."""
        with self._lock:
            return set(self._dirs.get(rel, ()))

    @contextlib.contextmanager
    def upper_dir(self, parts: list[str], *, create: bool = False) -> Iterator[int]:
        """A descriptor for `upper/parts…`, never through a symlink (else OverlayEscape)."""
        self._check_open()
        mode = journal.NEW_DIR_MODE if create else None
        try:
            with (
                open_dir(self.upper) as top,
                open_chain(top, parts, create_mode=mode) as fd,
            ):
                yield fd
        except PathRefused:
            where = self.upper.joinpath(*parts)
            raise OverlayEscape(where, "goes through a symlink inside the overlay") from None

    def write(self, path: os.PathLike[str] | str, data: bytes, mode: int | None) -> None:
        """Write a whole file into the upper layer, recording its original at the first write.

        A path inside a base directory of overlays (a project that contains the temp dir)
        is an escape: an accepted write there could plant a journal or change another
        session's overlay. A real file with other hard links raises HardLinked; a copy
        already in the upper layer keeps its mode and attrs (a command's chmod, setfattr),
        a real file's first copy gets the real one's (upper.put_copy)."""
        rel, resolved = self.locate(path)
        if any(resolved == base or resolved.is_relative_to(base) for base in self._bases):
            raise OverlayEscape(path, "is inside qshell's private speculation directory")
        parts = rel.split("/")
        with self._lock:
            self._check_open()
            original, real = self._originals.get(rel), None
            if original is None:
                if rel in self._dirs:
                    raise os_error(errno.EISDIR, path)
                self._check_parents(parts, path)
                original = snapshot(rel, resolved, mode, sole=True)  # HardLinked
                self._open_deleted(parts)
                if original.existed and not covered(rel, self._removed):
                    real = resolved  # copied up with its xattrs and ACLs
            self._copy_up_dirs(parts[:-1])
            with self.upper_dir(parts[:-1], create=True) as parent:
                put_copy(parent, parts[-1], data, original.mode, real)
            if rel not in self._originals:
                self._originals[rel] = original
                for depth, name in enumerate(parts):
                    self._dirs.setdefault("/".join(parts[:depth]), set()).add(name)
                self._record_meta([original])

    def _open_deleted(self, parts: list[str]) -> None:
        """Before a write below a deleted directory: its whiteout in `upper/` becomes an
        opaque directory (a replacement, as overlayfs makes one)."""
        for depth in range(1, len(parts)):
            prefix = "/".join(parts[:depth])
            if prefix in self._removed and prefix not in self._dirs:
                with self.upper_dir(parts[: depth - 1], create=True) as parent:
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(parts[depth - 1], dir_fd=parent)
                    os.mkdir(parts[depth - 1], journal.NEW_DIR_MODE, dir_fd=parent)
                with self.upper_dir(parts[:depth]) as fd, contextlib.suppress(OSError):
                    os.setxattr(fd, OPAQUE_XATTR, b"y")

    def _copy_up_dirs(self, parts: list[str]) -> None:
        """Make the upper directories of `parts` that are missing, each with the mode and
        attrs of the real directory at its path (as overlayfs copies one up), or mkdir's
        default."""
        for depth in range(1, len(parts) + 1):
            prefix = "/".join(parts[:depth])
            if prefix in self._dirs or covered(prefix, self._removed):
                continue
            with self.upper_dir(parts[: depth - 1], create=True) as parent:
                copied = copy_up_dir(parent, parts[depth - 1], self.root / prefix)
            if copied is not None:
                self._dir_notes.note_copy_up(prefix, *copied)

    def _check_parents(self, parts: list[str], path: os.PathLike[str] | str) -> None:
        """ENOTDIR when an ancestor is a file in this view, as the OS would say."""
        for depth in range(1, len(parts)):
            prefix = "/".join(parts[:depth])
            if prefix in self._dirs:
                continue
            if prefix in self._removed:
                return  # deleted: made again with the file
            if prefix in self._originals:
                raise os_error(errno.ENOTDIR, path)
            try:
                info = os.stat(self.root / prefix)
            except FileNotFoundError:
                return  # missing: made with the file
            if not stat_module.S_ISDIR(info.st_mode):
                raise os_error(errno.ENOTDIR, path)
