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
commas and colons included. `argv` builds the command line, `prepare` makes the
directories and those links (kept from one command to the next), and `clean` removes the
work directory after a command; `mounted` tells whether the overlay was mounted at all (the
command line makes a marker file beside the mount point once it is: a failed mount — a file
system mounted inside the project cannot be cloned into a user namespace's overlay — exits
like a failed command would). It runs nothing.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from qshell.sandbox.jail import SandboxUnavailable

# "$1" is the mount options, "$2" the mount point, "$3" the directory of the links the
# options name, "$4" the marker, the rest the command
_SCRIPT = 'cd "$3" && mount -t overlay overlay -o "$1" "$2" && : > "$4" && shift 4 && exec "$@"'
LOWER_NAME, UPPER_NAME, WORK_NAME, LAYER_NAME = "lower", "upper", "work", "layer-{}"
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

    @property
    def names(self) -> Path:
        """The directory of the symlinks the mount options name, beside `work`."""
        return self.work.parent / f"{self.work.name}.layers"

    def links(self) -> dict[str, Path]:
        """The symlinks `prepare` makes in `names`: each layer, the project, the upper layer
        and the work directory."""
        found = {LAYER_NAME.format(i): layer for i, layer in enumerate(self.layers)}
        return {**found, LOWER_NAME: self.lower, UPPER_NAME: self.upper, WORK_NAME: self.work}

    def options(self) -> str:
        lowers = ":".join([*(LAYER_NAME.format(i) for i in range(len(self.layers))), LOWER_NAME])
        return f"userxattr,lowerdir={lowers},upperdir={UPPER_NAME},workdir={WORK_NAME}"

    def argv(self, command: Sequence[str]) -> list[str]:
        """The command line that mounts the overlay, then runs `command` (argv) on it."""
        script = _SCRIPT.replace("mount ", f"{self.mount} ", 1)
        return [
            self.unshare,
            "-rm",
            "--",
            "sh",
            "-c",
            script,
            "sh",
            self.options(),
            str(self.merged),
            str(self.names),
            str(self.marker),
            *command,
        ]

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
        links = self.links()
        if _links_in(self.names) == {name: str(target) for name, target in links.items()}:
            return  # made for the command before, as they are
        shutil.rmtree(self.names, ignore_errors=True)  # links only: never followed
        self.names.mkdir(mode=0o700)
        for name, target in links.items():
            (self.names / name).symlink_to(target)

    def clean(self) -> None:
        """Empty the work directory (the kernel leaves a mode-000 `work/` in it); the
        links stay for the next command."""
        inner = self.work / "work"
        with contextlib.suppress(OSError):
            os.chmod(inner, 0o700)
        shutil.rmtree(self.work, ignore_errors=True)


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
