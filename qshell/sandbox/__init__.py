"""The OS sandbox: shell commands qshell runs on its own run inside bubblewrap.

A leaf package (it reads only qshell/secret_names.py): it knows bubblewrap, user
namespaces, cgroups and overlayfs, and nothing of tools, policy or speculation. `probe()`
says what works on this machine (cached per boot); `Jail` is the bubblewrap command line
for one command — the system's directories read-only and nothing else of the host, fresh
`/dev` and `/proc`, private `/tmp` and `$HOME`, no network, a new pid namespace, no
capabilities, resource limits — with the project bound read-only, its secrets masked and
Unix sockets and the kernel's keyrings refused (seccomp.py); `PidsCap` caps a command's
processes where the rlimit does not (root, pids.py); `OverlayMount` runs a command on a
kernel overlay of the project in new user and mount namespaces (a speculation's writes land
in its upper layer), with the emptied directories on an overlay of their own whose writes
are seen (outside.py), the project's secrets as stand-ins that show a touch
(standins.py) and `/etc` from a read-only view hiding the system's (sysview.py); `secret_paths` / `SecretIndex` find what to mask. Its exceptions are
`SandboxError`s (`SandboxUnavailable` is an OSError as well). See ARCHITECTURE.md.
"""

from qshell.sandbox.jail import (
    SANDBOX_TMP,
    Jail,
    ResourceLimits,
    SandboxError,
    SandboxUnavailable,
    private_dirs,
)
from qshell.sandbox.masks import SecretIndex, secret_paths
from qshell.sandbox.mount import OverlayMount
from qshell.sandbox.probe import Probe, probe
from qshell.sandbox.seccomp import filter_file

__all__ = [
    "SANDBOX_TMP",
    "Jail",
    "OverlayMount",
    "Probe",
    "ResourceLimits",
    "SandboxError",
    "SandboxUnavailable",
    "SecretIndex",
    "filter_file",
    "private_dirs",
    "probe",
    "secret_paths",
]
