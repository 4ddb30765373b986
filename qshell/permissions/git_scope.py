"""What a proven read-only git command could do beyond its own text, checked in the repository.

The environment a proven command runs in switches off fsmonitor, hooks, pagers, credential
helpers, signature checks, lazy fetches and every transport (shellproof/env.py). What it
cannot switch off is checked here, with git itself (`config --list`, `rev-parse`,
`ls-files`, `log --name-only`, `fsck`: none runs a program), and any finding makes the
command ask:
- the repository's top is not the project root (git then reads files outside it);
- the configuration sets an external diff, a textconv or filter driver, a proxy or a work
  tree elsewhere;
- the configuration holds a credential (a token in a remote URL, an `extraheader`, a
  password: permissions/git_credentials.py) and a subcommand prints configuration
  (`config`, `remote`, `var`: `git remote -v` prints URLs) — unless the command runs in a
  jail that shows git that file without its credentials (`Sandboxed.redacts`), where no
  command can print one; one the jail can only hide whole (git would fail there) asks for
  any subcommand. `status`, `log`, `diff`, `show`, `branch` and the rest print no
  configuration, and run;
- a tracked file looks like a secret (git prints tracked content), or — for subcommands
  that print what the history holds (`show`, `log -p`, `diff REV`, `grep REV`, `cat-file`…)
  — any file ever committed does, in what a branch, a tag, the stash or the reflog reaches
  (a commit reset away); that scan is cached per state of the refs;
- such a subcommand names an object by id (`git show 3f2a9c`, `cat-file -p`) that no ref,
  reflog or the index reaches (a `.env` staged then unstaged: a blob with no name to judge),
  or takes objects named at run time or all of them (`--stdin`, `cat-file --batch`,
  `--batch-all-objects`) while any is unreachable (`git fsck --connectivity-only`); cached
  per state of the refs, the index and the object store.
`git_state` names the files whose change makes a git command's answer stale (HEAD, the
index, the refs), for a speculation to fingerprint. Thread-safe: the cache is guarded by a lock.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterable, Mapping
from functools import partial
from pathlib import Path

from qshell.permissions.git_credentials import GIT_TIMEOUT_S, holds_credential
from qshell.permissions.git_history import FILES_AND_MESSAGES, MESSAGES, secret_object
from qshell.permissions.shell_scope import Sandboxed, run_quietly
from qshell.tools.paths import PathResolver

# configuration git would act on even for a read-only subcommand, and that the environment
# of a proven command cannot switch off
GIT_PROGRAM_KEYS = re.compile(
    r"^(diff\.external|diff\..+\.(command|textconv)|filter\..+\.(clean|smudge|process)"
    r"|core\.worktree|core\.gitproxy|core\.sshcommand)$"
)
# subcommands that print names, refs or metadata only, never a file's content from history
NAMES_ONLY = frozenset(
    [
        "status",
        "branch",
        "tag",
        "remote",
        "rev-parse",
        "ls-files",
        "ls-tree",
        "describe",
        "count-objects",
        "for-each-ref",
        "show-ref",
        "config",
        "version",
        "--version",
        "check-ignore",
        "check-attr",
        "shortlog",
        "name-rev",
        "merge-base",
        "rev-list",
        "var",
        "worktree",
        "cherry",
        "notes",
        "submodule",
        "check-ref-format",
    ]
)
# subcommands that print configuration values: `git config`, `git remote -v`/`get-url`/`show`
# (URLs), `git var` (GIT_EDITOR and the like); no other prints one (format atoms such as
# `%(upstream:remotename)` give names, never a URL)
PRINTS_CONFIG = frozenset(["config", "remote", "var"])
MAX_CACHED = 32
_history: dict[tuple[str, ...], str | None] = {}
_history_lock = threading.Lock()


def git_concern(
    root: Path,
    paths: PathResolver,
    environ: Mapping[str, str],
    subcommands: Iterable[str],
    jail: Sandboxed | None = None,
    objects: Iterable[str] = (),
    *,
    reshaped: str = "",
) -> str | None:
    """Why git commands (`subcommands`: `log`, `status`…) in `root` could run a configured
    program, read outside the project, or print a secret; None when they cannot. `jail` is
    the sandbox they will run in, if they run in one; `objects` the objects they name by id
    (`Proof.objects`: raw ids, `*` for ones named at run time); `reshaped` says what of the
    history may reach the output in a shape the output scanner cannot judge ("files":
    `git grep`, `git show` piped on; "messages": `git log --oneline | rev`): then no object
    of that kind may hold a secret (git_history.py)."""
    subcommands = set(subcommands)
    args = ["config", "--list", "--show-origin", "-z"]
    listing = git_output(args, root, environ, ok=(0, 1))  # 1: none at all
    if listing is None:
        return "git's configuration could not be read to check it runs no program"
    items = listing.split("\0")[:-1]
    for origin, entry in zip(items[0::2], items[1::2], strict=False):
        key, newline, value = entry.partition("\n")
        key = key.lower()
        if GIT_PROGRAM_KEYS.match(key):
            return f"git's configuration sets {key}, which runs a program or reads elsewhere"
        if holds_credential(key, value if newline else None):
            concern = _credential_concern(key, _origin(origin, root), subcommands, jail)
            if concern:
                return concern
    top = git_output(["rev-parse", "--show-toplevel"], root, environ, ok=(0, 128))
    if top is None:
        return "git could not tell where the repository is"
    if not top.strip():
        return None  # not in a repository: git reads nothing of one
    if Path(top.strip()).resolve() != root:
        return f"the repository's top {top.strip()} is not the project root: git reads outside it"
    tracked = git_output(["ls-files", "-z"], root, environ, ok=(0,))
    if tracked is None:
        return "git's tracked files could not be listed to check none is a secret"
    secret = _first_secret(tracked.split("\0"), root, paths)
    if secret:
        return f"the tracked file {secret} looks like a secret, and git may print it"
    history = bool(subcommands - NAMES_ONLY)
    if not history and not reshaped:
        return None
    # what the refs and the object store hold, asked of git once for every check below
    refs = _refs_state(root, environ)
    objects = list(objects)
    store = _objects_state(root, environ) if objects or reshaped else ""
    if history:
        concern = _history_concern(root, paths, environ, refs) or _objects_concern(
            root, environ, objects, refs, store
        )
        if concern:
            return concern
    if not reshaped:
        return None
    kinds = MESSAGES if reshaped == "messages" else FILES_AND_MESSAGES
    cache_key = ("content", str(root), (refs or "") + (store or ""), reshaped)
    return _cached(cache_key, partial(secret_object, root, environ, kinds))


def _origin(origin: str, root: Path) -> Path | None:
    """The file `--show-origin` names (`file:.git/config`, relative to the top of the work
    tree), or None for another origin (the command line)."""
    kind, _, where = origin.partition(":")
    if kind != "file" or not where:
        return None
    path = Path(where)
    return path if path.is_absolute() else root / path


def _credential_concern(
    key: str, origin: Path | None, subcommands: set[str], jail: Sandboxed | None
) -> str | None:
    """Why a credential under `key` in `origin` could reach the output of git commands
    (`subcommands`), or None when it cannot: the jail shows git the file without it, or no
    subcommand prints configuration."""
    if jail is not None and origin is not None:
        if jail.redacts(origin):
            return None
        if jail.conceals(origin):
            return (
                f"git's configuration holds a credential ({key}) that the sandbox can only "
                "hide with the whole file, which git needs"
            )
    printing = sorted(subcommands & PRINTS_CONFIG)
    if printing:
        return f"git's configuration holds a credential ({key}), which git {printing[0]} prints"
    return None


def _refs_state(root: Path, environ: Mapping[str, str]) -> str | None:
    """What the refs and HEAD point at, as one string (a key for the caches), or None."""
    refs = git_output(["for-each-ref", "--format=%(objectname) %(refname)"], root, environ, ok=(0,))
    head = git_output(["rev-parse", "-q", "--verify", "HEAD"], root, environ, ok=(0, 1))
    return None if refs is None or head is None else refs + head


def _cached(key: tuple[str, ...], compute: Callable[[], str | None]) -> str | None:
    with _history_lock:
        if key in _history:
            return _history[key]
    concern = compute()
    with _history_lock:
        if len(_history) >= MAX_CACHED:
            _history.clear()
        _history[key] = concern
    return concern


def _history_concern(
    root: Path, paths: PathResolver, environ: Mapping[str, str], state: str | None
) -> str | None:
    """Why the history could show a secret: a secret-looking file was committed in what a
    branch, a tag, the stash or the reflog reaches (a commit reset away stays in the reflog).
    `state` is `_refs_state`'s."""
    if state is None:
        return "git's history could not be checked for secrets"

    def scan() -> str | None:
        args = ["log", "--all", "--reflog", "-m", "--format=", "--name-only", "-z"]
        names = git_output(args, root, environ, ok=(0, 128))
        if names is None:
            return "git's history is too large to check for secrets in time"
        secret = _first_secret(names.replace("\n", "\0").split("\0"), root, paths)
        return f"{secret}, which looks like a secret, is in git's history" if secret else None

    return _cached(("history", str(root), state), scan)


def _objects_concern(
    root: Path,
    environ: Mapping[str, str],
    objects: list[str],
    state: str | None,
    store: str | None,
) -> str | None:
    """Why an object a command names (a raw id, or `*`: named at run time or all of them)
    could be one no branch, tag, stash, reflog or the index reaches — a file staged then
    unstaged, a commit whose reflog entry expired — which has no file name to judge, so
    its content is unchecked. Cached per state of the refs (`state`), the index and the
    object store (`store`)."""
    if not objects:
        return None
    if state is None or store is None:
        return "git's objects could not be checked for ones no branch or reflog reaches"
    index = _index_stamp(root, environ)
    for name in objects:
        key = ("object", str(root), state + store + index, name)
        concern = _cached(key, partial(_unreached, root, environ, name))
        if concern:
            return concern
    return None


def _objects_state(root: Path, environ: Mapping[str, str]) -> str | None:
    """How many objects and packs the store holds, as one string (a key for the caches)."""
    return git_output(["count-objects", "-v"], root, environ, ok=(0,))


def _index_stamp(root: Path, environ: Mapping[str, str]) -> str:
    found = [p for p in git_state(root, environ) if p.name == "index"]
    try:
        info = found[0].stat()
    except (IndexError, OSError):
        return ""
    return f"{info.st_mtime_ns} {info.st_size}"


UNREACHED = "git holds objects no branch, tag or reflog reaches"


def _unreached(root: Path, environ: Mapping[str, str], name: str) -> str | None:
    """Why `name` (a raw id; `*`: any object) may be content no ref, reflog or the index
    reaches, checked with git; None when it is reachable or names no object."""
    if name == "*":
        args = ["fsck", "--connectivity-only", "--unreachable", "--no-progress"]
        found = git_output(args, root, environ, ok=(0,))
        if found is None:
            return f"{UNREACHED} maybe (git fsck could not tell in time); the command may print any"
        return f"{UNREACHED}, and the command may print any" if found.strip() else None
    spec = f"{name}^{{object}}"
    full = git_output(
        ["rev-parse", "-q", "--verify", "--end-of-options", spec], root, environ, ok=(0, 1, 128)
    )
    if full is None:
        return f"git could not tell whether a branch or the reflog reaches the object {name}"
    full = full.strip()
    if not full:
        return None  # no such object: git takes it for something else, or fails
    kind = git_output(["cat-file", "-t", full], root, environ, ok=(0,))
    if kind is not None and kind.strip() == "commit":
        args = ["rev-list", "-n", "1", full, "--not", "--all", "--reflog"]
    else:
        args = [
            "rev-list",
            "--objects",
            "--no-object-names",
            "--all",
            "--reflog",
            "--indexed-objects",
        ]
    found = git_output(args, root, environ, ok=(0,))
    if found is None:
        return (
            f"git could not tell in time whether a branch or the reflog reaches the object {name}"
        )
    reached = not found.strip() if args[1] == "-n" else full in found.split()
    return (
        None
        if reached
        else f"the object {name} is one no branch, tag or reflog reaches, unchecked for secrets"
    )


def _first_secret(names: Iterable[str], root: Path, paths: PathResolver) -> str | None:
    for rel in names:
        if rel and paths.is_secret(root / rel):
            return rel
    return None


def git_output(
    args: list[str], root: Path, environ: Mapping[str, str], *, ok: tuple[int, ...] = (0,)
) -> str | None:
    """What `git ARGS` prints in `root` ("" for an exit status in `ok` other than 0; it must
    be a subcommand that runs no program), or None when it fails."""
    done = run_quietly(["git", *args], root, environ, GIT_TIMEOUT_S)
    if done is None or done.returncode not in ok:
        return None
    return done.stdout.decode("utf-8", "surrogateescape") if done.returncode == 0 else ""


def git_state(root: Path, environ: Mapping[str, str]) -> list[Path]:
    """The files that say what a git command would answer in `root` beyond the work tree —
    HEAD, the index, packed-refs and the loose refs' directory — for a speculation to
    fingerprint (an answer is stale once any changed); [] outside a repository."""
    args = ["rev-parse", "--path-format=absolute", "--git-dir", "--git-common-dir"]
    found = git_output(args, root, {k: v for k, v in environ.items() if k != "GIT_INDEX_FILE"})
    lines = found.splitlines() if found else []
    if len(lines) != 2:
        return []
    own, common = Path(lines[0]), Path(lines[1])
    return [own / "HEAD", own / "index", common / "packed-refs", common / "refs"]
