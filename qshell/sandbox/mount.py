"""OverlayMount: a command run on a kernel overlay of the project, in its own namespaces.

A speculation runs a command that writes on an overlayfs whose bottom layer is the project,
with the speculation's earlier changes as a layer above it (`layers`, top first), and whose
upper layer is a fresh directory for this command's changes: in a new user and mount
namespace (`unshare -rm`, so no privilege is needed and the mount vanishes with the
command), `mount -t overlay -o userxattr,...` makes the merged view at `merged`, and the
command — normally a `Jail` (jail.py) that binds `merged` read-write at the project path —
runs there. Every write, deletion (a whiteout) and replaced directory (an opaque one) lands
in `upper`; the project and the layers are never written. `workdir` is the kernel's scratch
directory, on the file system of `upper/`. The mount options name no path but symlinks in a
directory of their own beside `work` (`lowerdir=layer-0:lower,upperdir=upper,workdir=work`,
the mount run from there), because a mount's options are what `/proc/self/mountinfo`
shows inside the jail and no host path is to be read there; so any path can be a layer,
commas and colons included. `setup` is what a jail's command line runs before
bubblewrap, in the jail's one shell (jail.py `PreJail`: `unshare -rm` starts it, the mounts
and the marker come first), `argv` a command line of its own for any command. With
`by_table` (the probe found that this `mount` reads a table: util-linux) one `mount -a -T`
of a table `prepare` writes mounts every overlay, rather than one `mount` process each.
`prepare` makes the
directories and those links (kept from one command to the next), and `clean` removes the
work directory after a command; `mounted` tells whether the overlay was mounted at all (the
command line makes a marker file beside the mount point once it is: a failed mount — a file
system mounted inside the project cannot be cloned into a user namespace's overlay — exits
like a failed command would). With `outside` (a speculated command's jail, outside.py) the
command line mounts a second overlay the same way, at `outside/merged`: the skeleton of the
directories the jail empties as its lower layer (`furnish`, made fresh for each command),
`outside/upper` a fresh private directory for what the command writes there, `writes`
what it left. With `etc_layer` a third overlay, read-only, shows `/etc` with the
system's secrets hidden by that layer (sysview.py), for the jail to bind at `/etc`.
It runs nothing.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from qshell.sandbox import sysview
from qshell.sandbox.jail import ETC, PreJail, SandboxUnavailable, shell_line
from qshell.sandbox.outside import SKELETON_MODE, Made, Writes, furnish, remove_tree, writes

LOWER_NAME, UPPER_NAME, WORK_NAME, LAYER_NAME = "lower", "upper", "work", "layer-{}"
OUTSIDE_NAMES = ("outside-lower", "outside-upper", "outside-work")  # its links in `names`
ETC_NAMES = ("etc-hidden", "etc")  # the view of /etc's layers, top first (sysview.py)
MARKER_NAME = "mounted"  # beside the mount point: made once the overlay is mounted


@dataclass(frozen=True, slots=True)
class OverlayMount:
    """How to run a command with `lower` under `layers` (top first) and `upper`, merged at
    `merged`."""

    unshare: str
    mount: str
    lower: Path
    upper: Path
    work: Path
    merged: Path
    layers: tuple[Path, ...] = ()
    outside: Path | None = None  # the outside view's directory (lower, upper, work, merged)
    standins: frozenset[Path] = frozenset()  # secrets the upper layer hides (standins.py)
    # both overlays mounted by one `mount -a -T` of a table (`table`), where the probe found
    # that this mount reads one (util-linux), rather than by one `mount` each
    by_table: bool = False
    # `/etc` shown from a read-only overlay whose top layer (`etc_layer`, sysview.py) hides
    # `etc_secrets`; `etc_mounts` are the file systems mounted below it, which the jail
    # binds again
    etc_layer: Path | None = None
    etc_secrets: tuple[Path, ...] = ()
    etc_mounts: tuple[Path, ...] = ()

    @property
    def names(self) -> Path:
        """The directory of the symlinks the mount options name, beside `work`."""
        return self.work.parent / f"{self.work.name}.layers"

    def links(self) -> dict[str, Path]:
        """The symlinks `prepare` makes in `names`: each layer, the project, the upper layer
        and the work directory."""
        found = {LAYER_NAME.format(i): layer for i, layer in enumerate(self.layers)}
        found = {**found, LOWER_NAME: self.lower, UPPER_NAME: self.upper, WORK_NAME: self.work}
        if self.outside is not None:
            found.update(zip(OUTSIDE_NAMES, self._outside_parts()[:3], strict=True))
        if self.etc_layer is not None:
            found.update({ETC_NAMES[0]: self.etc_layer, ETC_NAMES[1]: ETC})
        return found

    def options(self) -> str:
        lowers = ":".join([*(LAYER_NAME.format(i) for i in range(len(self.layers))), LOWER_NAME])
        return f"userxattr,lowerdir={lowers},upperdir={UPPER_NAME},workdir={WORK_NAME}"

    def mounts(self) -> list[tuple[str, str]]:
        """(options, mount point) of each overlay: the project's, then the outside view's."""
        found = [(self.options(), str(self.merged))]
        if self.outside_merged is not None:
            lower, upper, work = OUTSIDE_NAMES
            options = f"userxattr,lowerdir={lower},upperdir={upper},workdir={work}"
            found.append((options, str(self.outside_merged)))
        if self.etc_merged is not None:
            found.append((f"userxattr,lowerdir={':'.join(ETC_NAMES)}", str(self.etc_merged)))
        return found

    @property
    def etc_merged(self) -> Path | None:
        """Where the view of `/etc` is mounted (the jail binds it at `/etc`)."""
        return None if self.etc_layer is None else self.work.parent / "etc.merged"

    @property
    def table(self) -> Path:
        """The mount table `prepare` writes beside `names` when `by_table`."""
        return self.work.parent / f"{self.work.name}.fstab"

    def setup(self) -> PreJail:
        """What the jail's command line runs first (jail.py `PreJail`): in new user and mount
        namespaces, from the directory of the links, the overlay mounted at `merged` (and
        the outside view at `outside/merged`) — by one `mount` of the table, or one each —,
        then the marker made."""
        variables = [("mount", self.mount), ("names", str(self.names))]
        steps = ['"$mount" -a -T "$table"'] if self.by_table else []
        if self.by_table:
            variables.append(("table", str(self.table)))
        for index, (options, point) in enumerate([] if self.by_table else self.mounts()):
            variables += [(f"options{index}", options), (f"point{index}", point)]
            steps.append(f'"$mount" -t overlay overlay -o "$options{index}" "$point{index}"')
        variables.append(("marker", str(self.marker)))
        step = " && ".join(['cd "$names"', *steps, ': > "$marker"']) + " || exit"
        return PreJail((self.unshare, "-rm", "--"), tuple(variables), (step,))

    def argv(self, command: Sequence[str]) -> list[str]:
        """The command line that mounts the overlay (and the outside view), then runs
        `command` (argv) on it."""
        setup = self.setup()
        return [*setup.prefix, *shell_line(setup.variables, setup.steps, 'exec "$@"', command)]

    @property
    def outside_merged(self) -> Path | None:
        """Where the outside view is mounted (the jail binds its directories from there)."""
        return None if self.outside is None else self.outside / "merged"

    def _outside_parts(self) -> tuple[Path, Path, Path, Path]:
        assert self.outside is not None
        top = self.outside
        return top / "lower", top / "upper", top / "work", top / "merged"

    @property
    def marker(self) -> Path:
        """The file the command line makes once the overlay is mounted, before the command
        starts: without it, what ran was the failed mount, not the command."""
        return self.merged.parent / MARKER_NAME

    def mounted(self) -> bool:
        """Whether the overlay was mounted for the command run since `prepare`."""
        return self.marker.exists()

    def prepare(self) -> None:
        """Make the upper and work directories, the mount point (private to this user) and
        the links that name the lower layers."""
        for path in (self.upper, self.work, self.merged):
            path.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.marker.unlink(missing_ok=True)
        if os.stat(self.work).st_dev != os.stat(self.upper).st_dev:
            raise SandboxUnavailable(f"{self.work} is not on the file system of {self.upper}")
        if self.outside is not None:  # a fresh upper: nothing an earlier command wrote
            lower, upper, work, merged = self._outside_parts()
            remove_tree(upper)
            remove_tree(work)
            self.outside.mkdir(mode=0o700, parents=True, exist_ok=True)
            for path in (lower, upper, work, merged):
                path.mkdir(mode=0o700, exist_ok=True)
            os.chmod(upper, SKELETON_MODE)  # the root directory the command sees (`outside`)
        if self.etc_layer is not None and self.etc_merged is not None:
            sysview.furnish(self.etc_layer, self.etc_secrets)
            self.etc_merged.mkdir(mode=0o700, exist_ok=True)
        if self.by_table:
            _write_if_changed(self.table, _table_text(self.mounts()))
        links = self.links()
        if _links_in(self.names) == {name: str(target) for name, target in links.items()}:
            return  # made for the command before, as they are
        shutil.rmtree(self.names, ignore_errors=True)  # links only: never followed
        self.names.mkdir(mode=0o700)
        for name, target in links.items():
            (self.names / name).symlink_to(target)

    def clean(self) -> None:
        """Remove the work directories (the kernel leaves a mode-000 `work/` in each); the
        links stay for the next command."""
        works = [self.work] if self.outside is None else [self.work, self.outside / "work"]
        for work in works:
            with contextlib.suppress(OSError):
                os.chmod(work / "work", 0o700)
            shutil.rmtree(work, ignore_errors=True)

    def furnish(self, made: dict[str, Made]) -> None:
        """Make the outside view's skeleton `made` (outside.layout) for the next command."""
        if self.outside is not None:
            furnish(self.outside / "lower", made)

    def writes(self, caches: Sequence[Path] = ()) -> Writes | None:
        """What the command left outside the project (outside.writes, the `caches`
        directories' content temporary); None without an outside view, or when its layers
        are not there to read."""
        if self.outside is None:
            return None
        lower, upper = self.outside / "lower", self.outside / "upper"
        if not (lower.is_dir() and upper.is_dir()):
            return None
        return writes(upper, lower, caches)

    def discard_outside(self) -> None:
        """Remove what the command wrote outside the project (after it); the skeleton,
        which no command writes, stays for the next one."""
        if self.outside is not None:
            remove_tree(self.outside / "upper")
            remove_tree(self.outside / "work")


def _table_text(mounts: Sequence[tuple[str, str]]) -> str:
    """An fstab of the overlays (options, mount point): each mount point's blanks,
    backslashes and `#` written as octal escapes, which mount(8) reads back."""
    lines = []
    for options, point in mounts:
        shown = "".join(f"\\{ord(c):03o}" if c.isspace() or c in "\\#" else c for c in point)
        lines.append(f"overlay {shown} overlay {options} 0 0\n")
    return "".join(lines)


def _write_if_changed(path: Path, text: str) -> None:
    with contextlib.suppress(OSError):
        if path.read_text(encoding="utf-8", errors="surrogateescape") == text:
            return
    path.write_text(text, encoding="utf-8", errors="surrogateescape")
    os.chmod(path, 0o600)


def _links_in(directory: Path) -> dict[str, str] | None:
    """The symlinks in `directory` and where each points; None when it holds anything
    else or cannot be read."""
    found: dict[str, str] = {}
    try:
        with os.scandir(directory) as entries:
            for entry in entries:
                if not entry.is_symlink():
                    return None
                found[entry.name] = os.readlink(entry.path)
    except OSError:
        return None
    return found
