"""The environment a proven read-only shell command runs in.

`sanitized_env` passes on only a short list of the user's variables (`HOME`, `USER`,
`SHELL`, `TZ`, `TMPDIR`, …): any other one could make a read-only command load or run code
(`LD_*`, `BASH_ENV`, exported functions, tool option variables), page or prompt, or hand a
secret to the model (`*_KEY`, `*TOKEN*`, and also `DATABASE_URL`, `MYSQL_PWD` or a DSN,
which no name pattern catches). It pins the locale to C.UTF-8 (the proof reads text as
UTF-8, where no byte of a non-ASCII character is an ASCII one), keeps only absolute PATH
entries outside the project, and hardens git through `GIT_CONFIG_*` (no fsmonitor, hooks,
pager, attributes file, lazy fetch or network). A proven command runs for at most
`SHELL_TIMEOUT_S`. It never runs anything. Pure; any thread.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

SHELL_TIMEOUT_S = 10.0  # the longest a proven command may run

# the user's variables a proven command gets; everything else is left out
KEPT_ENV = frozenset(
    {"HOME", "USER", "LOGNAME", "SHELL", "TMPDIR", "TZ", "PWD", "OLDPWD", "HOSTNAME"}
)
GIT_HARDENING: tuple[tuple[str, str], ...] = (
    ("core.fsmonitor", "false"),
    ("core.pager", "cat"),
    ("core.hooksPath", "/dev/null"),
    ("core.attributesFile", "/dev/null"),
    ("core.untrackedCache", "false"),
    ("log.showSignature", "false"),
    ("safe.bareRepository", "explicit"),
    ("protocol.allow", "never"),
    ("credential.helper", ""),
)
DEFAULT_PATH = "/usr/local/bin:/usr/bin:/bin"


def sanitized_env(base: Mapping[str, str], *, root: str | None = None) -> dict[str, str]:
    """The environment to run a proven command in: only `KEPT_ENV` of `base`, no pager, git
    hardened, the C.UTF-8 locale, and a PATH without relative entries or entries inside
    `root`. Run it with stdin closed, no TTY and `SHELL_TIMEOUT_S`."""
    env = {key: value for key, value in base.items() if key in KEPT_ENV}
    root_real = os.path.realpath(root) if root else None
    entries = []
    for entry in base.get("PATH", "").split(os.pathsep):
        if not entry or not os.path.isabs(entry):
            continue
        real = os.path.realpath(entry)
        if root_real and (real == root_real or real.startswith(root_real + os.sep)):
            continue
        entries.append(entry)
    env["PATH"] = os.pathsep.join(entries) or DEFAULT_PATH
    env.update(
        PAGER="cat",
        GIT_PAGER="cat",
        MANPAGER="cat",
        SYSTEMD_PAGER="cat",
        LESSSECURE="1",
        TERM="dumb",
        NO_COLOR="1",
        LANG="C.UTF-8",
        LC_ALL="C.UTF-8",
        GIT_CONFIG_NOSYSTEM="1",
        GIT_ATTR_NOSYSTEM="1",
        GIT_OPTIONAL_LOCKS="0",
        GIT_TERMINAL_PROMPT="0",
        GIT_NO_LAZY_FETCH="1",  # a partial clone never fetches a missing object
        GIT_CONFIG_COUNT=str(len(GIT_HARDENING)),
        # also as -c style parameters: git passes these on to submodule processes
        GIT_CONFIG_PARAMETERS=" ".join(f"'{key}={value}'" for key, value in GIT_HARDENING),
    )
    for i, (key, value) in enumerate(GIT_HARDENING):
        env[f"GIT_CONFIG_KEY_{i}"] = key
        env[f"GIT_CONFIG_VALUE_{i}"] = value
    return env
