"""@path attachments: the files a user names in a prompt, appended for the model to read.

`expand_mentions()` finds `@path` and `@"path with spaces"` tokens, keeps them in the text
as typed, and appends each named file's content (or a directory's listing) as a
`<file path="…">` / `<directory path="…">` block after the user's text; anything it
cannot attach becomes a problem for the front-end to show. `complete_mention()` offers
Tab completions one directory level at a time. Paths resolve through the PathResolver:
relative to the project root, `~` allowed, and outside the root too, since the user typed
them. Each attached file's fingerprint comes back too (`Expanded.seen`): the
Conversation notes it as read, so the model may edit it without a read of its own. Each
block passes the session's redaction vault first (qshell/redaction): a secret in an
attached file reaches the model as a marker, and `Expanded.redacted` says which. It must
not attach secret-looking files (the model may still read those through a
tool, with approval), binary files, or more than the size caps; it never writes. Pure
functions over the filesystem: safe from any thread.
"""

from __future__ import annotations

import html
import re
import stat
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from qshell.redaction import Vault
from qshell.tools import files, walk
from qshell.tools.ledger import Seen
from qshell.tools.paths import PathResolver

MAX_FILE_BYTES = 256 * 1024  # largest single file attached, in bytes
MAX_TOTAL_BYTES = 1024 * 1024  # all attachments of one prompt together, in bytes
MAX_LISTING_ENTRIES = 1000  # entries shown for an attached directory
MAX_COMPLETIONS = 200  # completions returned for one prefix
TRAILING_PUNCTUATION = ".,;:!?)"
_MENTION_RE = re.compile(r'(?<!\S)@(?:"([^"\n]+)"|([^\s"]\S*))')


@dataclass(frozen=True, slots=True)
class Expanded:
    """The prompt to send, the names attached, and what could not be attached (and why)."""

    text: str
    attached: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    # what each attached file held, so the model may edit it without reading it again
    # (tools/ledger.py: the model has seen it whole)
    seen: dict[Path, Seen] = field(default_factory=dict)
    # the kinds of the secrets replaced by markers, by the name attached
    redacted: dict[str, tuple[str, ...]] = field(default_factory=dict)


@dataclass(slots=True)
class _Budget:
    """Bytes still allowed in this prompt's attachments."""

    left: int = MAX_TOTAL_BYTES


def expand_mentions(
    text: str,
    resolver: PathResolver,
    vault: Vault | None = None,
    *,
    implied: Sequence[str] = (),
    implied_budget: int = 0,
) -> Expanded:
    """Attach the files and directories `text` mentions with `@` (see the module doc),
    each redacted through `vault` (the session's; a new one when not given). `implied`
    files (a small model's retrieval: latency/retrieval.py) follow as though mentioned,
    within `implied_budget` bytes; one that cannot be attached is left out silently."""
    vault = Vault() if vault is None else vault
    redacted: dict[str, tuple[str, ...]] = {}
    blocks: list[str] = []
    attached: list[str] = []
    problems: list[str] = []
    seen: set[Path] = set()
    held: dict[Path, Seen] = {}
    budget = _Budget()

    def attach(block: str, name: str) -> None:
        done = vault.redact(block)
        blocks.append(done.text)
        attached.append(name)
        if done.findings:
            redacted[name] = done.kinds

    for match in _MENTION_RE.finditer(text):
        quoted, bare = match.group(1), match.group(2)
        raw = quoted if quoted is not None else _without_punctuation(bare, resolver)
        path = _existing(raw, resolver)
        if path is None:
            problems.append(f"no file {raw!r}; @{raw} was sent as plain text")
            continue
        if path in seen:
            continue
        seen.add(path)
        name = resolver.relative(path)
        if resolver.is_secret(path) or resolver.is_secret(_lexical(raw, resolver)):
            problems.append(
                f"{name} looks like a secret and was not attached; ask the model to read it "
                "instead, which asks for your approval first"
            )
            continue
        block, problem = _block(path, name, resolver, budget, held)
        if problem:
            problems.append(problem)
        elif block:
            attach(block, name + "/" if path.is_dir() and name != "." else name)
    implied_left = _Budget(implied_budget)
    for raw in implied:
        path = _existing(raw, resolver)
        if path is None or path in seen or not _may_imply(raw, path, resolver):
            continue
        seen.add(path)
        block, problem = _block(path, resolver.relative(path), resolver, implied_left, held)
        if block and not problem:
            attach(block, resolver.relative(path))
    full = text if not blocks else text + "\n\n" + "\n\n".join(blocks)
    return Expanded(full, attached, problems, held, redacted)


def complete_mention(prefix: str, resolver: PathResolver) -> list[str]:
    """Completions of the path after an `@`: entries of the directory `prefix` points into
    whose names start with its last part, directories ending in `/`, sorted, gitignored
    entries and `.git` left out. Names with spaces are returned as is; quoting them is the
    caller's job."""
    cut = prefix.rfind("/") + 1
    head, tail = prefix[:cut], prefix[cut:]
    try:
        directory = resolver.resolve(head) if head else resolver.root
        entries = walk.list_dir(directory, resolver.root)
    except (OSError, RuntimeError, ValueError):
        return []
    found = [
        head + name + ("/" if is_dir else "") for name, is_dir in entries if name.startswith(tail)
    ]
    return found[:MAX_COMPLETIONS]


def _without_punctuation(bare: str, resolver: PathResolver) -> str:
    """`bare` without trailing punctuation when the path without it exists."""
    stripped = bare.rstrip(TRAILING_PUNCTUATION)
    if not stripped or stripped == bare:
        return bare
    if _existing(stripped, resolver) is not None or _existing(bare, resolver) is None:
        return stripped
    return bare


def _existing(raw: str, resolver: PathResolver) -> Path | None:
    """The resolved path for `raw` when something exists there, else None."""
    try:
        path = resolver.resolve(raw)
        return path if path.exists() else None
    except (OSError, RuntimeError, ValueError):
        return None


def _lexical(raw: str, resolver: PathResolver) -> Path:
    """`raw` as an absolute path without following symlinks (for the secret check)."""
    if raw == "~" or raw.startswith("~/"):
        raw = str(resolver.home) + raw[1:]
    path = Path(raw)
    return path if path.is_absolute() else resolver.root / path


def _may_imply(raw: str, path: Path, resolver: PathResolver) -> bool:
    """Whether a file nobody typed an `@` for may be attached: a regular file inside the
    project, reached by no symlink and named like no secret (as written or resolved)."""
    lexical = _lexical(raw, resolver)
    return (
        not lexical.is_symlink()
        and path.is_file()
        and resolver.is_inside_root(path)
        and ".git" not in Path(resolver.relative(path)).parts
        and not resolver.is_secret(path)
        and not resolver.is_secret(lexical)
    )


def _too_large(name: str, size: int, *, in_all: bool) -> str:
    kib = -(-size // 1024)
    limit = f"; attachments are limited to {MAX_TOTAL_BYTES // 1024} KiB in all" if in_all else ""
    return f"{name} is too large to attach ({kib} KiB{limit}); ask the model to read it instead"


def _block(
    path: Path, name: str, resolver: PathResolver, budget: _Budget, held: dict[Path, Seen]
) -> tuple[str, str | None]:
    """The block to append for `path`, or a problem saying why there is none; an attached
    file's fingerprint goes into `held`."""
    try:
        info = path.stat()
        if stat.S_ISDIR(info.st_mode):
            return _directory_block(path, name, resolver, budget)
        if not stat.S_ISREG(info.st_mode):
            return "", f"{name} is not a regular file; it was not attached"
        if info.st_size > MAX_FILE_BYTES:
            return "", _too_large(name, info.st_size, in_all=False)
        if info.st_size > budget.left:
            return "", _too_large(name, info.st_size, in_all=True)
        with path.open("rb") as handle:
            data = handle.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        return "", f"cannot read {name}: {exc.strerror or exc}"
    if len(data) > MAX_FILE_BYTES:
        return "", _too_large(name, len(data), in_all=False)
    if len(data) > budget.left:
        return "", _too_large(name, len(data), in_all=True)
    decoded = files.decode_text(data)
    if decoded is None:
        return "", f"{name} is a binary file (or not UTF-8 text); it was not attached"
    budget.left -= len(data)
    held[path] = Seen.of(data)
    body = decoded.text.removesuffix("\n")
    return f'<file path="{html.escape(name)}">\n{body}\n</file>', None


def _directory_block(
    path: Path, name: str, resolver: PathResolver, budget: _Budget
) -> tuple[str, str | None]:
    entries = walk.list_dir(path, resolver.root)
    lines = [entry + ("/" if is_dir else "") for entry, is_dir in entries[:MAX_LISTING_ENTRIES]]
    if len(entries) > MAX_LISTING_ENTRIES:
        lines.append(f"(and {len(entries) - MAX_LISTING_ENTRIES} more entries)")
    if not lines:
        lines.append("(empty)")
    listing = "\n".join(lines)
    size = len(listing.encode("utf-8"))
    if size > budget.left:
        return "", _too_large(name, size, in_all=True)
    budget.left -= size
    shown = name if name.endswith("/") or name == "." else name + "/"
    return f'<directory path="{html.escape(shown)}">\n{listing}\n</directory>', None
