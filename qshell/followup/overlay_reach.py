"""What a speculated command reached that its run on the overlay cannot stand for: secrets, the world outside.

A speculated command runs jailed on a kernel overlay (overlay_run.py); its live counterpart
runs unjailed, reads the real secrets and writes wherever it writes. So a run that touched
what the jail hides, or wrote what the overlay does not keep, cannot stand as the live
result, and `refusal` says why (the caller makes it a boundary: the call runs live, asked).
Before the run, `named_secret` is the fast path: a word of the command line — an argument,
a redirection's target, an option's value (`--env-file=.env`), a glob or brace list — that
names a masked path (`JailLauncher.masked`: the project's secrets, those of what is bound
back, the system's). After it, `refusal` asks, in turn: the stand-ins the command read,
listed, wrote or removed (sandbox/standins.py: an access time moved, by whatever name the
command computed: `cat $(echo .e)nv`); what it wrote outside the project, but for new
entries directly in `/tmp` — its `TMPDIR`, whose files a live run leaves as temporary ones
too — and in `~/.cache` (a formatter's or compiler's cache: sandbox/outside.py); output showing a write refused as read-only (a directory bound
back read-only, `~/.local/bin`; a system directory, which root may write live); and output
naming a masked path beside a failure (`cat: /etc/shadow: Permission denied`, a lookup in a
masked directory), or a path outside the project that the jail hid but that is there
(`cp tool ~/.local/bin/` where that directory exists: "No such file or directory" in the
jail only); last, output showing a network failure (the jail has no network) or a rename
the overlay cannot make (EXDEV). Reads the file system (stat only); any thread.
"""

from __future__ import annotations

import glob
import os
import re
import shlex
from collections.abc import Collection, Iterator
from pathlib import Path

from qshell.permissions.confine import JailLauncher
from qshell.sandbox.jail import SYSTEM_DATA
from qshell.sandbox.mount import OverlayMount
from qshell.sandbox.standins import StandIns
from qshell.tools.paths import PathResolver

MAX_NAMED = 5  # paths named in a refusal; the rest counted
CACHE_DIR = ".cache"  # in the home: what a live run leaves there may be deleted any time
MAX_WORDS = 2_000  # words of a command line looked at
READ_ONLY = re.compile(r"Read-only file system|\bEROFS\b|\[Errno 30\]")
NETWORK_FAILURE = re.compile(
    r"Could not resolve host|Network is unreachable|Temporary failure in name resolution"
    r"|Name or service not known|No address associated with hostname|getaddrinfo failed"
    r"|Failed to establish a new connection|Could not connect to|Connection refused"
    r"|No route to host|unable to access '|EAI_AGAIN|ENOTFOUND|ENETUNREACH"
)
# what a command says when the overlay refused what a live run does: a userxattr overlay
# (all a user namespace may mount) has no redirect_dir, so rename(2) of a directory from
# the real tree fails with EXDEV (`mv` copies instead; a program calling rename(2) fails)
OVERLAY_LIMIT = re.compile(r"Invalid cross-device link|\bEXDEV\b|\[Errno 18\]")
FAILED = re.compile(
    r"Permission denied|\[Errno 13\]|\bEACCES\b|No such file or directory|\[Errno 2\]"
    r"|\bENOENT\b|Operation not permitted|\[Errno 1\]"
)
SECRET_REASON = "a secret the speculation hides: live, the command would use the real one"
HIDDEN_REASON = "which the jail hides: live, the command would find it there"
QUOTED = re.compile(r"['\"‘`]([^'\"‘’`\n]+)['\"’`]")
OUTSIDE_REASON = "outside the project, which a speculation cannot keep: live, it would stay"
BLIND = (
    "the file system of qshell's overlay keeps no access times (noatime), so a read of the "
    "project's secrets could not be seen"
)


def named_secret(command: str, paths: PathResolver, masked: Collection[Path]) -> str | None:
    """The first masked path that a word of `command` names (or a glob or brace list of it
    matches), relative to the project when inside it; None for none."""
    if not masked:
        return None
    hidden = set(masked)
    for word in _words(command):
        for candidate in _candidates(word):
            for path in _matches(candidate, paths):
                if path in hidden:
                    return paths.relative(path)
    return None


def refusal(
    output: str,
    mount: OverlayMount,
    planted: StandIns,
    launcher: JailLauncher,
    masked: Collection[Path],
) -> str | None:
    """Why the ended run of a speculated command cannot stand (its `output`, the `mount` it
    ran on, the stand-ins `planted` in its layer, the `launcher` of its jail, what the jail
    masked), or None."""
    touched = planted.touched()
    if touched:
        return f"it reads or writes {_listed(touched)}, {SECRET_REASON}"
    written = mount.writes(caches=(launcher.paths.home / CACHE_DIR,))
    if written is None or mount.outside is None:
        return "what it wrote outside the project could not be read"
    if written.lasting:
        return f"it writes {_listed(written.lasting)}, {OUTSIDE_REASON}"
    found = READ_ONLY.search(output)
    if found is not None:
        return f"its output shows a write refused as read-only ({found.group()}), {OUTSIDE_REASON}"
    root = launcher.paths.root
    failed = _failed_on(output, masked, root)
    if failed is not None:
        return f"its output shows a failure on {failed}, {SECRET_REASON}"
    shown = [root, *launcher.home_binds, *(dest for _, dest in launcher.alias_binds)]
    shown += [Path(p) for p in SYSTEM_DATA]
    hidden = _hidden_failure(output, launcher.paths, mount.outside / "lower", shown)
    if hidden is not None:
        return f"its output shows a failure on {hidden}, {HIDDEN_REASON}"
    failure = NETWORK_FAILURE.search(output)
    if failure is not None:
        return f"its output shows a network failure ({failure.group()})"
    limit = OVERLAY_LIMIT.search(output)
    if limit is not None:
        return f"its output shows a rename the overlay cannot make ({limit.group()})"
    return None


def _failed_on(output: str, masked: Collection[Path], root: Path) -> str | None:
    """A masked path that a line of `output` showing a failure names (a directory by its
    path and a slash, a file by its name), or None."""
    lines = [line for line in output.splitlines() if FAILED.search(line)]
    if not lines:
        return None
    for path in masked:
        shown = path.relative_to(root).as_posix() if path.is_relative_to(root) else str(path)
        names = [f"{shown}/", f"{path}/"] if path.is_dir() else [path.name]
        if any(name in line for line in lines for name in names):
            return shown
    return None


def _hidden_failure(
    output: str, paths: PathResolver, skeleton: Path, shown: Collection[Path]
) -> str | None:
    """A path outside the project that a line of `output` showing a failure names, which
    the jail hid from the command but which is there outside it (or whose directory is):
    `cp tool ~/.local/bin/` where that directory exists, `cat ../other/notes.txt`. Paths are
    taken from the quoted and slashed words of the line, relative ones from the project."""
    lines = [line for line in output.splitlines() if FAILED.search(line)][:MAX_WORDS]
    for line in lines:
        for word in _path_words(line):
            path = _absolute(word, paths)
            if path is None or paths.is_inside_root(path) or not _hid(path, skeleton, shown):
                continue
            parent = path.parent
            made = os.path.lexists(skeleton / str(parent).lstrip("/"))
            if os.path.lexists(path) or (not made and os.path.lexists(parent)):
                return str(path)
    return None


def _hid(path: Path, skeleton: Path, shown: Collection[Path]) -> bool:
    """Whether the jail hid `path`: it lies in a directory the jail emptied (its top is
    in the outside view's `skeleton`), is no entry of that skeleton, and no directory the
    jail binds back holds it."""
    if len(path.parts) < 2 or not os.path.isdir(skeleton / path.parts[1]):
        return False
    if os.path.lexists(skeleton / str(path).lstrip("/")):
        return False
    return not any(path == place or path.is_relative_to(place) for place in shown)


def _path_words(line: str) -> list[str]:
    """The words of a failure line that may be paths: quoted ones, and those with a slash
    or a leading `~`, their punctuation stripped."""
    found = [m.group(1) for m in QUOTED.finditer(line)]
    for word in line.split():
        word = word.strip("'\"‘’`:,;()[]")
        if "/" in word or word.startswith("~"):
            found.append(word)
    return found


def _absolute(word: str, paths: PathResolver) -> Path | None:
    if not word or "\0" in word:
        return None
    if word == "~" or word.startswith("~/"):
        word = str(paths.home) + word[1:]
    joined = word if os.path.isabs(word) else os.path.join(paths.root, word)
    return Path(os.path.normpath(joined))


def _words(command: str) -> list[str]:
    """The words of `command` as the shell splits them (redirection operators apart), or,
    where it cannot be split (an unclosed quote), its blank-separated pieces."""
    lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    words: list[str] = []
    try:
        for word in lexer:
            words.append(word)
            if len(words) >= MAX_WORDS:
                break
    except ValueError:
        return command.split()[:MAX_WORDS]
    return words


def _candidates(word: str) -> Iterator[str]:
    """What of `word` may name a path: itself and an option's or assignment's value, each
    brace list expanded; nothing with a substitution, which bash computes (the run's own
    check sees that)."""
    values = [word]
    if "=" in word:
        values.append(word.split("=", 1)[1])
    if word.startswith("-") and len(word) > 2 and not word.startswith("--"):
        values.append(word[2:])  # -f.env
    for value in values:
        if value and "$" not in value and "`" not in value:
            yield from _braces(value)


def _braces(word: str) -> list[str]:
    """`word` with its first brace list expanded, recursively (`.{env,npmrc}`)."""
    match = re.search(r"\{([^{}]*,[^{}]*)\}", word)
    if match is None:
        return [word]
    head, tail = word[: match.start()], word[match.end() :]
    found: list[str] = []
    for part in match.group(1).split(","):
        found += _braces(head + part + tail)
        if len(found) > 64:
            break
    return found


def _matches(candidate: str, paths: PathResolver) -> list[Path]:
    """The paths `candidate` names: a glob's matches (hidden names only when it says so,
    as bash does), else the one path; each resolved as the tools resolve it."""
    if not any(c in candidate for c in "*?["):
        return [paths.resolve(candidate)]
    text = os.path.expanduser(candidate)
    pattern = text if os.path.isabs(text) else os.path.join(paths.root, text)
    return [paths.resolve(found) for found in glob.glob(pattern)[:1_000]]


def _listed(paths: list[str]) -> str:
    shown = ", ".join(paths[:MAX_NAMED])
    return shown if len(paths) <= MAX_NAMED else f"{shown} and {len(paths) - MAX_NAMED} more"
