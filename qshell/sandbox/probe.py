"""probe(): what sandboxing works on this machine, tried once per boot.

Three things are tried for real, each in a throwaway directory: a jail (bubblewrap with the
namespaces and mounts `Jail` uses, running `true`), the same with the seccomp filter
(seccomp.py), and that jail on a kernel overlay mounted by an unprivileged user in a new
user and mount namespace (`unshare -rm`, overlayfs with `userxattr`, mount.py) — what a
speculation of any command needs (its overlays mounted by one `mount -a` of a table where
that works, else one `mount` each: `Probe.by_table`). The answer, with the reason when something fails ("bwrap
is not installed", "user namespaces are disabled", …), is cached in the cache directory
keyed by the kernel's boot id and the tools' paths, so later starts cost one file read.
Safe from any thread; concurrent probes only repeat the work.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from qshell.sandbox.jail import Jail, SandboxUnavailable
from qshell.sandbox.mount import OverlayMount
from qshell.sandbox.seccomp import filter_file
from qshell.sandbox.sysview import submounts

PROBE_TIMEOUT_S = 10.0
# 2: the overlay is tried with the jail inside it; 3: with seccomp; 4: private dirs;
# 5: only the system's directories bound, the keyring filter, overlay options by name;
# 6: the overlays mounted by one `mount -a` of a table, with a view of /etc, where that works
PROBE_VERSION = "7"
CACHE_NAME = "sandbox-probe.json"
BOOT_ID = Path("/proc/sys/kernel/random/boot_id")


@dataclass(frozen=True, slots=True)
class Probe:
    """What works here: `jail` (bubblewrap), `overlay` (user-namespace overlayfs)."""

    jail: bool
    overlay: bool
    reason: str  # why the jail (else the overlay) does not work; "" when both do
    bwrap: str | None = None
    unshare: str | None = None
    prlimit: str | None = None
    seccomp: bool = False  # the Unix-socket filter loads (seccomp.py)
    by_table: bool = False  # `mount -a -T` mounts the overlays (mount.py `by_table`)
    etc_view: bool = False  # /etc can be shown from an overlay hiding its secrets (sysview.py)

    @property
    def mode(self) -> str:
        """One word for /stats and `qshell doctor`."""
        if self.jail and self.overlay:
            return "bubblewrap + overlay"
        return "bubblewrap" if self.jail else "off"


def probe(cache_dir: Path | None = None) -> Probe:
    """This machine's Probe: from the cache when this boot already tried, else tried now."""
    tools = {name: shutil.which(name) for name in ("bwrap", "unshare", "prlimit")}
    key = {"boot": _boot_id(), "version": PROBE_VERSION, **tools}
    cached = _read_cache(cache_dir, key)
    if cached is not None:
        return cached
    found = _try(tools["bwrap"], tools["unshare"], tools["prlimit"])
    _write_cache(cache_dir, key, found)
    return found


def _try(bwrap: str | None, unshare: str | None, prlimit: str | None) -> Probe:
    if bwrap is None:
        return Probe(False, False, "bwrap is not installed (Debian/Ubuntu: apt install bubblewrap)")
    with tempfile.TemporaryDirectory(prefix="qshell-probe-") as tmp:
        root = Path(tmp)
        jail = Jail(bwrap, root, prlimit=prlimit)
        failure = _run(jail.argv(["true"]))
        if failure:
            return Probe(False, False, f"bubblewrap cannot start a sandbox here: {failure}")
        code = filter_file(root)
        filtered = code is not None and not _run(replace(jail, seccomp=code).argv(["true"]))
        if filtered:
            jail = replace(jail, seccomp=code)
        ways, overlay_failure = (False, False), "unshare is not installed"
        if unshare:
            ways, overlay_failure = _overlay_ways(root, unshare, jail)
    reason = f"no user-namespace overlay: {overlay_failure}" if overlay_failure else ""
    found = Probe(True, not overlay_failure, reason, bwrap, unshare, prlimit, filtered)
    return replace(found, by_table=ways[0], etc_view=ways[1])


def _overlay_ways(root: Path, unshare: str, jail: Jail) -> tuple[tuple[bool, bool], str]:
    """Which of the cheaper ways a speculated command's overlays mount here — (by one
    `mount -a` of a table, with the view of /etc) —, the first that works of both, the
    table alone, neither; and why none does ("" when one does)."""
    failure = ""
    for index, (by_table, etc) in enumerate(((True, True), (True, False), (False, False))):
        failure = _overlay(root / f"try{index}", unshare, jail, by_table=by_table, etc=etc)
        if not failure:
            return (by_table, etc), ""
    return (False, False), failure


def _overlay(root: Path, unshare: str, jail: Jail, *, by_table: bool, etc: bool) -> str:
    """Why a command cannot run in the jail on an overlay mounted by this user ("" when it
    can): what a speculated command needs (mount.py), its overlays mounted `by_table`
    or by one `mount` each, with (`etc`) or without the view of /etc (sysview.py)."""
    lower = root / "lower"
    lower.mkdir(parents=True)
    upper, work, merged = (root / name for name in ("upper", "work", "merged"))
    mount = OverlayMount(
        unshare, shutil.which("mount") or "mount", lower, upper, work, merged, by_table=by_table
    )
    if etc:
        mounts = submounts()
        mount = replace(mount, etc_layer=root / "etc", etc_mounts=mounts)
    mount.prepare()
    inner = replace(jail, root=lower, writable=mount.merged)
    if mount.etc_merged is not None:
        inner = replace(inner, etc_view=mount.etc_merged, etc_mounts=mount.etc_mounts)
    try:
        failure = _run(mount.argv(inner.argv(["touch", str(lower / "x")])))
    except SandboxUnavailable as exc:
        return str(exc)
    finally:
        mount.clean()
    if not failure and not (mount.upper / "x").exists():
        return "a file written through the overlay did not reach its upper layer"
    if not failure and (lower / "x").exists():
        return "a file written through the overlay reached the lower layer"
    return failure


def _run(argv: list[str]) -> str:
    """ "" when `argv` exits 0, else the last line it printed (or why it could not run)."""
    try:
        done = subprocess.run(
            argv, capture_output=True, text=True, timeout=PROBE_TIMEOUT_S, stdin=subprocess.DEVNULL
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return str(exc)
    if done.returncode == 0:
        return ""
    lines = (done.stderr or done.stdout).strip().splitlines()
    return lines[-1] if lines else f"exit code {done.returncode}"


def _boot_id() -> str:
    try:
        return BOOT_ID.read_text().strip()
    except OSError:
        return ""


def _read_cache(cache_dir: Path | None, key: dict[str, str | None]) -> Probe | None:
    if cache_dir is None or not key["boot"]:
        return None
    try:
        record = json.loads((cache_dir / CACHE_NAME).read_text())
        if record.get("key") == key:
            return Probe(**record["probe"])
    except (OSError, ValueError, TypeError, KeyError):
        pass
    return None


def _write_cache(cache_dir: Path | None, key: dict[str, str | None], found: Probe) -> None:
    if cache_dir is None or not key["boot"]:
        return
    try:
        cache_dir.mkdir(parents=True, exist_ok=True)
        (cache_dir / CACHE_NAME).write_text(json.dumps({"key": key, "probe": asdict(found)}))
    except OSError:
        pass  # the next start probes again
