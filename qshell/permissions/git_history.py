"""What git's history holds, judged by content: whether any object in the store holds a secret.

git_scope.py judges the history by names (a `.env` ever committed); a key committed as
`backup_key.txt`, then removed, has a name that tells nothing. The output scanner finds it
in `git show HEAD~1:backup_key.txt` or `git log -p` — patches and blobs keep a secret's
shape — but not once lines are picked out of it (`git grep MII HEAD~1`, `git blame`,
`log -L`, `-U0`) or another command reshapes what git printed (`… | tail -n +2`, `| rev`);
a commit or tag message is the same (`git log --format=%B | rev`). So for such a command
`secret_object` reads every object of the kinds it prints — blobs, or commits and tags —
in the object store (reachable or not: `cat-file --batch-all-objects`) up to
`MAX_SCANNED_BYTES` each, through the same scanner as the files
(permissions/file_secrets.py), and names the first that holds a secret. An object's id is
its content's hash, so each verdict is kept by id for the life of
the process and only new objects are read again; the whole read is bounded by
`HISTORY_SCAN_S` (past it, the history counts as unchecked). Runs only `git cat-file`,
which runs no program. Thread-safe: the verdicts are kept under a lock.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Mapping
from pathlib import Path

from qshell.permissions.file_secrets import MAX_SCANNED_BYTES, findings
from qshell.permissions.shell_scope import run_quietly

HISTORY_SCAN_S = 10.0  # the longest a history is read for secrets before it counts unchecked
BATCH_BYTES = 16 * 1024 * 1024  # object bytes asked of one `git cat-file --batch`
MAX_VERDICTS = 1_000_000
UNCHECKED = "git's history is too large to check for secrets in time"

MESSAGES = frozenset({"commit", "tag"})  # objects that hold messages
FILES_AND_MESSAGES = MESSAGES | {"blob"}

_lock = threading.Lock()
_verdicts: dict[str, bool] = {}  # object id -> holds a secret


def secret_object(root: Path, environ: Mapping[str, str], kinds: frozenset[str]) -> str | None:
    """Why the history of the repository at `root` may hold a secret: the first object of
    `kinds` (`blob`, `commit`, `tag`) that holds one (by id), or that they could not be read
    in time; None when none holds one."""
    deadline = time.monotonic() + HISTORY_SCAN_S
    listed = _git(["cat-file", "--batch-all-objects", "--batch-check"], root, environ, deadline)
    if listed is None:
        return UNCHECKED
    wanted: list[tuple[str, int]] = []
    for line in listed.decode("ascii", "replace").splitlines():
        name, kind, size = [*line.split(" "), "", ""][:3]
        if kind not in kinds or not size.isdigit() or int(size) > MAX_SCANNED_BYTES:
            continue
        with _lock:
            known = _verdicts.get(name)
        if known:
            return _found(name)
        if known is None:
            wanted.append((name, int(size)))
    for batch in _batches(wanted):
        given = "".join(f"{name}\n" for name in batch).encode()
        out = _git(["cat-file", "--batch"], root, environ, deadline, given=given)
        if out is None:
            return UNCHECKED
        for name, data in _contents(out):
            holds = bool(findings(data))
            with _lock:
                if len(_verdicts) < MAX_VERDICTS:
                    _verdicts[name] = holds
            if holds:
                return _found(name)
    return None


def _found(name: str) -> str:
    return f"the object {name[:12]} in git's history holds a secret"


def _batches(objects: list[tuple[str, int]]) -> Iterator[list[str]]:
    """The ids in runs of at most `BATCH_BYTES` of content (one larger object alone)."""
    batch: list[str] = []
    size = 0
    for name, length in objects:
        if batch and size + length > BATCH_BYTES:
            yield batch
            batch, size = [], 0
        batch.append(name)
        size += length
    if batch:
        yield batch


def _contents(out: bytes) -> Iterator[tuple[str, bytes]]:
    """Each `<id> <kind> <size>\\n<content>\\n` record of `git cat-file --batch` output."""
    at = 0
    while at < len(out):
        end = out.index(b"\n", at)
        header = out[at:end].split(b" ")
        if len(header) != 3 or not header[2].isdigit():  # `<id> missing`: gone meanwhile
            at = end + 1
            continue
        size = int(header[2])
        yield header[0].decode("ascii"), out[end + 1 : end + 1 + size]
        at = end + 1 + size + 1


def _git(
    args: list[str],
    root: Path,
    environ: Mapping[str, str],
    deadline: float,
    *,
    given: bytes | None = None,
) -> bytes | None:
    """What `git ARGS` prints in `root`, or None when it fails or the deadline passes."""
    left = deadline - time.monotonic()
    if left <= 0:
        return None
    done = run_quietly(["git", *args], root, environ, left, given=given)
    if done is None or done.returncode != 0:
        return None
    return done.stdout
