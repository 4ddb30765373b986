"""The pieces of the differential test of accept against a real run (test_accept_differential.py).

A `Start` is a small starting tree: files with their bytes and modes, directories with
theirs, symlinks inside the tree, hard links (one pair inside the tree, one file linked to a
file outside it), user xattrs and ACLs (a directory's default ACL too), nested protected
paths (`.github/workflows/ci.yml`,
`pkg/.husky/pre-commit`, `.gitattributes`) and, when `git` is set, a repository whose
`.gitignore` ignores `build/` and `*.log`. `build` makes it under a directory, the same way
every time, so the live copy and the speculated one start byte-identical with the same link
structure. The Hypothesis strategies draw starts, shell calls (one to three operations each:
create, append, overwrite, delete, rename, copy, mkdir/rmdir, chmod with modes such as 700,
600 and 755 — never setuid —, symlinks and hard links, `sed -i`, `touch`, `setfattr` and
`setfacl -b`) over one pool of paths, and `UserEdit`s: what the user does to the real tree
while a speculation runs (a `setfattr` among them).
`live` runs calls with real bash; `snapshot` reads a tree with its metadata (entry types,
bytes, modes, symlink targets, xattrs, which paths share an inode and each file's link
count, the outside file's content) and `differences` says how two snapshots differ, one
line per path. Test helpers only; no product code.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import stat
import subprocess
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from hypothesis import strategies as st

PROTECTED = (".github/workflows/ci.yml", "pkg/.husky/pre-commit", ".gitattributes")
START_FILES = ("a", "b", "d/c", "d/e/f", "build/o", "pkg/m", "x.log", *PROTECTED)
START_DIRS = ("d", "d/e", "build", "pkg", "empty", ".github", ".github/workflows", "pkg/.husky")
SYMLINKS = {"la": "a", "ld": "d", "pkg/lm": "m"}  # inside the tree, relative
HARD_LINK = ("a", "hard-a")  # a second name for `a`
OUTSIDE = "pkg/shared"  # hard-linked to a file beside the tree (`outside_of`)
NEW = ("n", "d/n", "new/q", "pkg/.husky/y", ".github/workflows/z.yml", "build/p")
PATHS = (*START_FILES, *START_DIRS, *SYMLINKS, HARD_LINK[1], OUTSIDE, *NEW)
FILE_MODES = (0o644, 0o600, 0o755, 0o444, 0o700)
DIR_MODES = (0o755, 0o700, 0o750, 0o555)
CHMODS = ("700", "600", "755", "644", "444", "500", "711", "640", "u+x", "go-rwx")
XATTR = "user.qshell.test"
HAVE_SETFACL = shutil.which("setfacl") is not None  # else no starting tree has an ACL
ACL_USER = os.getuid()  # whom the starting trees' ACL entries name: the jail maps this user
GITIGNORE = "build/\n*.log\n"
GIT = ("git", "-c", "init.defaultBranch=main", "init", "-q")

Entry = tuple[str, int, bytes, tuple[tuple[str, bytes], ...], tuple[str, ...], int]
Snapshot = dict[str, Entry]


@dataclass(frozen=True)
class Start:
    """A starting tree; every directory a file needs exists (mode 0755 unless in `dirs`)."""

    files: tuple[tuple[str, bytes, int], ...]
    dirs: tuple[tuple[str, int], ...] = ()
    symlinks: tuple[str, ...] = ()  # names from SYMLINKS
    hard_link: bool = False  # HARD_LINK[1] is a second name of HARD_LINK[0] (when it exists)
    outside: bool = False  # OUTSIDE shares its inode with a file beside the tree
    xattrs: tuple[str, ...] = ()  # files (or directories) that carry XATTR
    acls: tuple[str, ...] = ()  # files or directories ("" the top one) with an ACL entry
    acl_user: int = ACL_USER  # whom that entry names
    git: bool = False


@dataclass(frozen=True)
class UserEdit:
    """What the user does to the real tree: before call `at` runs (after the speculation
    took its base) when `before`, else after it; an `at` past the last call that ran is
    made just before the apply."""

    kind: str  # write | append | delete | chmod | mkdir | setfattr
    path: str
    at: int
    before: bool

    def make(self, root: Path) -> None:
        """Make the edit in the tree at `root`; what cannot be done there is skipped, the
        same way in every copy of one state."""
        path = root / self.path
        try:
            if self.kind == "delete":
                _remove(path)
            elif self.kind == "chmod":
                if path.exists() and not path.is_symlink():
                    path.chmod(0o700)
            elif self.kind == "mkdir":
                path.mkdir(parents=True, exist_ok=True)
            elif self.kind == "setfattr":  # never through a symlink: a link has no user xattrs
                os.setxattr(path, XATTR, b"the user's", follow_symlinks=False)
            else:
                path.parent.mkdir(parents=True, exist_ok=True)
                with open(path, "ab" if self.kind == "append" else "wb") as out:
                    out.write(b"the user's line\n")
        except OSError:
            pass


def outside_of(root: Path) -> Path:
    """The file beside the tree at `root` that `OUTSIDE` is a hard link of."""
    return root.parent / f"{root.name}.outside"


def build(root: Path, start: Start) -> None:
    """Make `start` under `root` (created if missing, emptied if not)."""
    root.mkdir(exist_ok=True)
    for child in list(root.iterdir()):
        _remove(child)
    for name in os.listxattr(root):  # a start may give the top directory xattrs or ACLs
        if name.startswith(("user.", "system.posix_acl_")):
            os.removexattr(root, name)
    outside = outside_of(root)
    outside.unlink(missing_ok=True)
    root.chmod(0o755)
    for rel, _ in start.dirs:
        (root / rel).mkdir(parents=True, exist_ok=True)
    for rel, data, _ in start.files:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    for rel in start.symlinks:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).symlink_to(SYMLINKS[rel])
    if start.hard_link and (root / HARD_LINK[0]).is_file():
        os.link(root / HARD_LINK[0], root / HARD_LINK[1])
    if start.outside:
        outside.write_bytes(b"shared\n")
        (root / OUTSIDE).parent.mkdir(parents=True, exist_ok=True)
        os.link(outside, root / OUTSIDE)
    for rel, _, mode in start.files:
        os.chmod(root / rel, mode)
    for rel in start.xattrs:
        os.setxattr(root / rel, XATTR, f"tag of {rel}".encode())
    for rel in start.acls:  # a directory gets a default ACL too
        entry = f"u:{start.acl_user}:r-x"
        extra = ["-m", f"d:{entry}"] if (root / rel).is_dir() else []
        subprocess.run(["setfacl", "-m", entry, *extra, str(root / rel)], check=True)
    if start.git:
        (root / ".gitignore").write_text(GITIGNORE)
        subprocess.run(GIT, cwd=root, check=True, capture_output=True)
    for rel, mode in sorted(start.dirs, key=lambda d: -d[0].count("/")):
        os.chmod(root / rel, mode)


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        for top, _, _ in os.walk(path):
            os.chmod(top, 0o700)  # a 0555 directory's entries can be removed
        shutil.rmtree(path)
    elif os.path.lexists(path):
        path.unlink()


def live_prefix() -> list[str] | None:
    """What runs bash as the jail runs a command: with no capabilities (as root the jail
    has none, so permissions hold; `setpriv` drops them here too). None when this process
    is root and cannot drop them."""
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    return None if setpriv is None else [setpriv, "--bounding-set=-all", "--inh-caps=-all"]


def live(root: Path, calls: Iterable[str]) -> None:
    """Run each call with real bash in `root`, as a live shell call would (failures kept)."""
    prefix = live_prefix()
    assert prefix is not None, "as root, a live run needs setpriv to drop its capabilities"
    environ = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C", "HOME": str(root)}
    for command in calls:
        subprocess.run(
            [*prefix, "bash", "-c", command],
            cwd=root,
            env=environ,
            capture_output=True,
            check=False,
        )


def snapshot(root: Path) -> Snapshot:
    """Every entry under `root` (`.git` by itself, not its content) with its metadata, and
    the outside file as `../outside` when it exists."""
    found: dict[str, tuple[os.stat_result, Entry]] = {}
    _walk(root, "", found)
    outside = outside_of(root)
    if outside.exists():
        info = os.lstat(outside)
        found["../outside"] = (info, ("file", 0, outside.read_bytes(), (), (), info.st_nlink))
    inodes: dict[tuple[int, int], list[str]] = {}
    for rel, (info, entry) in found.items():
        if entry[0] == "file":
            inodes.setdefault((info.st_dev, info.st_ino), []).append(rel)
    out: Snapshot = {}
    for rel, (info, entry) in sorted(found.items()):
        if entry[0] == "file":
            shared = inodes[(info.st_dev, info.st_ino)]
            entry = (*entry[:4], tuple(sorted(r for r in shared if r != rel)), entry[5])
        out[rel] = entry
    return out


def _walk(top: Path, prefix: str, found: dict[str, tuple[os.stat_result, Entry]]) -> None:
    with os.scandir(top) as entries:
        for item in sorted(entries, key=lambda e: e.name):
            rel = f"{prefix}{item.name}"
            info = item.stat(follow_symlinks=False)
            mode = stat.S_IMODE(info.st_mode)
            if stat.S_ISLNK(info.st_mode):
                target = os.fsencode(os.readlink(item.path))
                found[rel] = (info, ("symlink", 0, target, (), (), 1))
                continue
            names = sorted(os.listxattr(item.path, follow_symlinks=False))
            xattrs = tuple((n, os.getxattr(item.path, n, follow_symlinks=False)) for n in names)
            if stat.S_ISDIR(info.st_mode):
                found[rel] = (info, ("dir", mode, b"", xattrs, (), 0))
                if rel != ".git":
                    _walk(Path(item.path), f"{rel}/", found)
            elif stat.S_ISREG(info.st_mode):
                data = Path(item.path).read_bytes()
                found[rel] = (info, ("file", mode, data, xattrs, (), info.st_nlink))
            else:
                found[rel] = (info, (f"special {info.st_mode:o}", mode, b"", xattrs, (), 0))


def differences(expected: Snapshot, found: Snapshot) -> list[str]:
    """One line per path where `found` is not `expected` ("d: mode 0o700 -> 0o755")."""
    lines = []
    for rel in sorted({*expected, *found}):
        want, got = expected.get(rel), found.get(rel)
        if want == got:
            continue
        if want is None or got is None:
            lines.append(f"{rel}: {_describe(want)} -> {_describe(got)}")
            continue
        labels = ("type", "mode", "content", "xattrs", "links", "nlink")
        for label, a, b in zip(labels, want, got, strict=True):
            if a != b:
                lines.append(f"{rel}: {label} {_shown(label, a)} -> {_shown(label, b)}")
    return lines


def _shown(label: str, value: object) -> str:
    return oct(value) if label == "mode" and isinstance(value, int) else repr(value)


def _describe(entry: Entry | None) -> str:
    if entry is None:
        return "missing"
    return f"{entry[0]} {oct(entry[1])} {entry[2][:20]!r}"


# --- strategies ---------------------------------------------------------------------------

TEXT = st.text(alphabet="ab\n", min_size=1, max_size=5)
PATH = st.sampled_from(PATHS)


def _quoted(*words: str) -> str:
    return " ".join(shlex.quote(w) for w in words)


OPERATIONS = st.one_of(
    st.builds(lambda p, t: f"printf %s {_quoted(t)} > {_quoted(p)}", PATH, TEXT),
    st.builds(lambda p, t: f"printf %s {_quoted(t)} >> {_quoted(p)}", PATH, TEXT),
    st.builds(
        lambda p, t: (
            f"mkdir -p {_quoted(os.path.dirname(p) or '.')} && printf %s "
            f"{_quoted(t)} > {_quoted(p)}"
        ),
        PATH,
        TEXT,
    ),
    st.builds(lambda p: f"rm -f {_quoted(p)}", PATH),
    st.builds(lambda p: f"rm -rf {_quoted(p)}", PATH),
    st.builds(lambda a, b: f"mv {_quoted(a, b)}", PATH, PATH),
    st.builds(lambda a, b: f"cp {_quoted(a, b)}", PATH, PATH),
    st.builds(lambda a, b: f"cp -r {_quoted(a, b)}", PATH, PATH),
    st.builds(lambda p: f"mkdir {_quoted(p)}", PATH),
    st.builds(lambda p: f"mkdir -p {_quoted(p)}", PATH),
    st.builds(lambda p: f"rmdir {_quoted(p)}", PATH),
    st.builds(lambda m, p: f"chmod {m} {_quoted(p)}", st.sampled_from(CHMODS), PATH),
    st.builds(lambda t, p: f"ln -s {_quoted(t, p)}", PATH, PATH),
    st.builds(lambda a, b: f"ln {_quoted(a, b)}", PATH, PATH),
    st.builds(lambda p: f"sed -i s/a/Z/ {_quoted(p)}", PATH),
    st.builds(lambda p: f"touch {_quoted(p)}", PATH),
    st.builds(lambda p, t: f"setfattr -n {XATTR} -v {_quoted(t)} {_quoted(p)}", PATH, TEXT),
    st.builds(lambda p: f"setfattr -x {XATTR} {_quoted(p)}", PATH),
    st.builds(lambda p: f"setfacl -b {_quoted(p)}", PATH),
)
CALL = st.lists(OPERATIONS, min_size=1, max_size=3).map("; ".join)
CALLS = st.lists(CALL, min_size=1, max_size=4)


@st.composite
def starts(draw: st.DrawFn) -> Start:
    """A starting tree over the pools above."""
    chosen = draw(st.lists(st.sampled_from(START_FILES), unique=True, max_size=len(START_FILES)))
    files = tuple(
        (rel, draw(TEXT).encode(), draw(st.sampled_from(FILE_MODES))) for rel in sorted(chosen)
    )
    parents = {str(p) for rel in chosen for p in Path(rel).parents if str(p) != "."}
    extra = draw(st.lists(st.sampled_from(START_DIRS), unique=True, max_size=3))
    dirs = tuple((rel, draw(st.sampled_from(DIR_MODES))) for rel in sorted({*parents, *extra}))
    tagged = st.sampled_from(sorted({*chosen, *(rel for rel, _ in dirs)}) or ["a"])
    return Start(
        files=files,
        dirs=dirs,
        symlinks=tuple(draw(st.lists(st.sampled_from(sorted(SYMLINKS)), unique=True))),
        hard_link=draw(st.booleans()),
        outside=draw(st.booleans()),
        xattrs=tuple(draw(st.lists(tagged, unique=True))) if chosen or dirs else (),
        acls=tuple(draw(st.lists(tagged, unique=True, max_size=2)))
        if (chosen or dirs) and HAVE_SETFACL
        else (),
        git=draw(st.booleans()),
    )


def user_edits(calls: int) -> st.SearchStrategy[UserEdit]:
    """A user edit at any point of a run of `calls` calls."""
    return st.builds(
        UserEdit,
        kind=st.sampled_from(("write", "append", "delete", "chmod", "mkdir", "setfattr")),
        path=PATH,
        at=st.integers(0, calls),
        before=st.booleans(),
    )


@dataclass
class Expected:
    """The trees a speculated run may end in, by how it ended."""

    start: Snapshot
    edited: Snapshot | None = None  # start + the user's edit
    applied: dict[str, Snapshot] = field(default_factory=dict)  # each must match, by name
    between: Snapshot | None = None  # an edit between calls: matching this alone will do


def expected_trees(
    scratch: Path, start: Start, ran: Sequence[str], edit: UserEdit | None
) -> Expected:
    """Build `start` in copies under `scratch` and run the `ran` calls live: the tree a
    conflict leaves, and every tree an applied result must equal (with an edit, the live
    run over the edited tree, and the live run with the user's change made after it: an
    edit that cannot interact leaves both the same). An edit made after call `at` ended
    and before a later call took its base was seen by that later call (each call's base
    is the live tree when it starts), so the live run with the edit made right there is
    `between`, an outcome as good as the two."""
    plain = scratch / "start"
    build(plain, start)
    expected = Expected(snapshot(plain))
    if edit is None:
        live(plain, ran)
        expected.applied["the live run"] = snapshot(plain)
        return expected
    edit.make(plain)
    expected.edited = snapshot(plain)
    live(plain, ran)
    expected.applied["the live run over the edited tree"] = snapshot(plain)
    after = scratch / "after"
    build(after, start)
    live(after, ran)
    replay(expected.start, expected.edited, after)
    expected.applied["the live run, then the user's change"] = snapshot(after)
    if not edit.before and edit.at < len(ran) - 1:
        build(after, start)
        live(after, ran[: edit.at + 1])
        edit.make(after)
        live(after, ran[edit.at + 1 :])
        expected.between = snapshot(after)
    return expected


def replay(before: Snapshot, after: Snapshot, root: Path) -> None:
    """Make under `root` the change that turned `before` into `after` (the user's edit as
    it happened: the same entries with the same type, mode and bytes, or gone, and the
    user's xattrs set or removed as they were)."""
    for rel in sorted({*before, *after}):
        old, new = before.get(rel), after.get(rel)
        path = outside_of(root) if rel == "../outside" else root / rel
        if old is not None and new is not None and old[:3] == new[:3]:
            _replay_xattrs(old, new, path)
            continue  # else only its links changed: another entry's change says it
        if new is None:
            _remove(path)
        elif new[0] == "dir":
            if os.path.lexists(path) and not path.is_dir():
                _remove(path)
            path.mkdir(parents=True, exist_ok=True)
            path.chmod(new[1])
        else:
            if path.is_symlink() or path.is_dir() or new[0] != "file":
                _remove(path)  # the user's edit made a file here, not through a link
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(new[2])
            if rel != "../outside":
                path.chmod(new[1])


def _replay_xattrs(old: Entry, new: Entry, path: Path) -> None:
    """The user's xattrs (`user.*`) that `new` has otherwise than `old`, set on `path` (or
    removed); ACLs change with a chmod, which replaying the mode says."""
    was = {name: value for name, value in old[3] if name.startswith("user.")}
    now = {name: value for name, value in new[3] if name.startswith("user.")}
    if was == now or not os.path.lexists(path) or path.is_symlink():
        return
    for name in sorted(set(was) - set(now)):
        with contextlib.suppress(OSError):
            os.removexattr(path, name)
    for name, value in sorted(now.items()):
        if was.get(name) != value:
            os.setxattr(path, name, value)
