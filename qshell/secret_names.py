"""The one list of secret names: which files and directories qshell holds secret by name.

Every fence that keeps a credential from the model asks this list: the file tools'
`PathResolver.is_secret` (tools/paths.py), which the shell proof's read scope
(permissions/shell_scope.py), `@path` attachments and the tree-wide tools go through; the
jail's masks of the project, of every directory it binds back (permissions/binds.py) and
of the system (sandbox/jail.py: SYSTEM_SECRETS); and the example plugin
`plugins/protect_secrets.py`. A path is secret when its file name matches `NAME_PATTERNS`
(shell globs, without regard to case; `NOT_SECRET_NAMES`, the templates meant to be
committed, excepted), when it ends with one of `PATH_TAILS` (`.aws/credentials` wherever
it sits), or when it lies in one of `SECRET_DIRS` (`.ssh/`, `.gnupg/`, …, anywhere) — in
the project, in the home and in a bound virtual environment or toolchain alike. In the
home directory, `HOME_DIRS` are secret as a whole too (browser profiles, `~/.docker`).
Content decides nowhere here (a git config holding a token is tools/paths.py's). A leaf:
it imports nothing of qshell; pure, thread-safe.
"""

from __future__ import annotations

import fnmatch
import re
from pathlib import PurePath

# file names (shell globs, matched lowercased) that hold keys, tokens or passwords
NAME_PATTERNS: tuple[str, ...] = (
    # environment files
    ".env",
    ".env.*",
    "*.env",
    ".envrc",
    # keys, certificates with their keys, key stores
    "*.pem",
    "*.key",
    "*.p12",
    "*.pfx",
    "*.ppk",
    "*.keystore",
    "*.jks",
    "*.keytab",
    "id_rsa*",
    "id_dsa*",
    "id_ecdsa*",
    "id_ed25519*",
    # logins of network tools, databases, registries and package managers
    ".netrc",
    "_netrc",
    ".authinfo",
    ".authinfo.*",
    ".pgpass",
    ".my.cnf",
    ".mylogin.cnf",
    ".npmrc",
    "npmrc",
    ".pypirc",
    "pip.conf",
    "pip.ini",
    "credentials.toml",
    ".git-credentials",
    ".gitcookies",
    ".htpasswd",
    ".vault-token",
    ".s3cfg",
    ".boto",
    ".dockercfg",
    ".databrickscfg",
    "rclone.conf",
    "*.ovpn",
    # cloud credentials
    "credentials.json",
    "service-account*.json",
    "client_secret*.json",
    "application_default_credentials.json",
    "credentials.tfrc.json",
    # infrastructure state and variables, application secrets
    "*.tfvars",
    "*.tfvars.json",
    "*.tfstate",
    "*.tfstate.*",
    ".terraformrc",
    "terraform.rc",
    "secrets.y*ml",
    "secrets.*.y*ml",
    "secrets.json",
    "secrets.toml",
    # shell and client histories, where a typed password stays
    ".*_history",
    "fish_history",
    ".histfile",
)
# templates that document which variables exist, meant to be committed and read
NOT_SECRET_NAMES: frozenset[str] = frozenset(
    {".env.example", ".env.sample", ".env.template", ".env.dist", ".env.defaults"}
)
# the last components of a secret file's path, wherever it sits (globs within a component)
PATH_TAILS: tuple[str, ...] = (
    ".aws/credentials",
    ".aws/config",
    ".kube/config",
    ".docker/config.json",
    ".config/gh/hosts.yml",
    ".config/hub",
    ".config/git/credentials",
    ".config/pypoetry/auth.toml",
    ".config/containers/auth.json",
    ".cargo/credentials",
    ".gem/credentials",
    ".m2/settings.xml",
    ".m2/settings-security.xml",
    ".gradle/gradle.properties",
    ".ivy2/.credentials",
    ".sbt/.credentials",
    ".fly/config.yml",
)
# directories whose every file is secret, wherever they sit (a project's `deploy/.ssh/` too)
SECRET_DIRS: tuple[str, ...] = (
    ".ssh",
    ".gnupg",
    ".aws",
    ".azure",
    ".kube",
    ".password-store",
    ".config/gcloud",
    ".config/gh",
    ".config/op",
    ".subversion/auth",
)
# directories of the home directory that are secret as a whole, beside SECRET_DIRS
HOME_DIRS: tuple[str, ...] = (
    *SECRET_DIRS,
    ".docker",
    ".terraform.d",
    ".oci",
    ".fly",
    ".ngrok2",
    ".config/ngrok",
    ".config/doctl",
    ".config/sops",
    ".config/rclone",
    ".local/share/keyrings",
    ".mozilla",
    ".config/google-chrome",
    ".config/chromium",
    ".config/BraveSoftware",
)
# the system's own secrets (absolute globs), masked in the jail where this user can read them
SYSTEM_SECRETS: tuple[str, ...] = (
    "/etc/shadow*",
    "/etc/gshadow*",
    "/etc/ssh",
    "/etc/sudoers*",
    "/etc/ssl/private",
    "/etc/wireguard",
    "/etc/NetworkManager/system-connections",
    "/etc/ipsec.secrets",
    "/etc/krb5.keytab",
    "/etc/letsencrypt",
    "/etc/security/opasswd",
    "/etc/pip.conf",
    "/etc/xdg/pip/pip.conf",
    "/etc/npmrc",
    "/etc/boto.cfg",
    "/etc/containers/auth.json",
    "/usr/pip.conf",
    "/usr/local/pip.conf",
    "/usr/etc/npmrc",
    "/usr/local/etc/npmrc",
)
# a process's environment, which holds its API keys
PROCESS_SECRETS: tuple[str, ...] = ("/proc/*/environ", "/proc/*/task/*/environ")


def _component_glob(pattern: str) -> str:
    """The regex of a glob over a path whose `*` and `?` never cross a `/`."""
    parts = []
    for char in pattern.lower():
        if char == "*":
            parts.append("[^/]*")
        elif char == "?":
            parts.append("[^/]")
        else:
            parts.append(re.escape(char))
    return "".join(parts)


_NAME = re.compile("|".join(f"(?:{fnmatch.translate(p.lower())})" for p in NAME_PATTERNS))
_TAIL = re.compile(rf"(?:^|/)(?:{'|'.join(_component_glob(t) for t in PATH_TAILS)})\Z")
_DIR = re.compile(rf"(?:^|/)(?:{'|'.join(_component_glob(d) for d in SECRET_DIRS)})(?:/|\Z)")


def is_secret_name(path: PurePath | str) -> bool:
    """Whether `path` is secret by its name or place alone: its file name matches
    NAME_PATTERNS (and is no template), it ends with one of PATH_TAILS, or it is or lies in
    one of SECRET_DIRS. Case is ignored; the path may be relative or absolute."""
    posix = (path if isinstance(path, str) else path.as_posix()).lower()
    if _DIR.search(posix):
        return True
    name = posix.rstrip("/").rpartition("/")[2]
    if name in NOT_SECRET_NAMES:
        return False
    return bool(_NAME.match(name) or _TAIL.search(posix))


def name_globs() -> tuple[str, ...]:
    """The secret names as globs a search tool excludes (`rg --iglob '!…'`): NAME_PATTERNS
    but `.env.*`, whose templates are no secret, and each of SECRET_DIRS by its last name."""
    dirs = tuple(d.rpartition("/")[2] for d in SECRET_DIRS if "/" not in d)
    return tuple(p for p in NAME_PATTERNS if p != ".env.*") + dirs
