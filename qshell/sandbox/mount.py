"""OverlayMount: a command run on a kernel overlay of the project, in its own namespaces.

A speculation runs a command that writes on an overlayfs whose bottom layer is the project,
with the speculation's earlier changes as a layer above it (`layers`, top first), and whose
upper layer is a fresh directory for this command's changes: in a new user and mount
namespace (`unshare -rm`, so no privilege is needed and the mount vanishes with the
command), `mount -t overlay -o userxattr,...` makes the merged view at `merged`, and the
command — normally a `Jail` (jail.py) that binds `merged` read-write at the project path —
runs there. Every write, deletion (a whiteout) and replaced directory (an opaque one) lands
in `upper`; the project and the layers are never written. `workdir` is the kernel's scratch
directory, a sibling of `upper/` on the same file system. `argv` builds the command line,
`prepare` makes the two directories and `clean` empties the work directory after a command;
`mounted` tells whether the overlay was mounted at all (the command line makes a marker file
beside the mount point once it is: a failed mount — a file system mounted inside the project
cannot be cloned into a user namespace's overlay — exits like a failed command would). It
runs nothing.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from qshell.sandbox.jail import SandboxUnavailable

# "$1" is the mount options, "$2" the mount point, "$3" the marker, the rest the command
_SCRIPT = 'mount -t overlay overlay -o "$1" "$2" && : > "$3" && shift 3 && exec "$@"'
MARKER_NAME = "mounted"  # beside the mount point: made once the overlay is mounted
_UNSAFE_IN_OPTIONS = (",", ":", "\\", "\n")


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

    def options(self) -> str:
        paths = (*self.layers, self.lower, self.upper, self.work)
        for path in paths:
            if any(c in str(path) for c in _UNSAFE_IN_OPTIONS):
                raise SandboxUnavailable(f"{path} cannot be named in overlayfs mount options")
        lowers = ":".join(str(p) for p in (*self.layers, self.lower))
        return f"userxattr,lowerdir={lowers},upperdir={self.upper},workdir={self.work}"

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
        """Make the upper and work directories and the mount point (private to this user)."""
        for path in (self.upper, self.work, self.merged):
            path.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.marker.unlink(missing_ok=True)
        if os.stat(self.work).st_dev != os.stat(self.upper).st_dev:
            raise SandboxUnavailable(f"{self.work} is not on the file system of {self.upper}")

    def clean(self) -> None:
        """Empty the work directory (the kernel leaves a mode-000 `work/` in it)."""
        inner = self.work / "work"
        with contextlib.suppress(OSError):
            os.chmod(inner, 0o700)
        shutil.rmtree(self.work, ignore_errors=True)
