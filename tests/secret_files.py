"""Credential files by the names their tools give them, which qshell's one list of secret
names (qshell/secret_names.py) must cover, each planted with a value no other file holds;
shared by the tests of every fence: the file tools, the shell proof, the jail, `qshell -p`.

Each file holds `{"token": "<value>"}`, so every reader the tests try would print the value
if it could read the file — `jq .` too."""

from __future__ import annotations

import json
from pathlib import Path

SECRET_FILES: tuple[str, ...] = (
    ".aws/credentials",
    ".aws/config",
    ".kube/config",
    ".docker/config.json",
    ".my.cnf",
    ".mylogin.cnf",
    ".pgpass",
    ".netrc",
    ".vault-token",
    ".s3cfg",
    ".boto",
    "client_secret_1234-abc.apps.googleusercontent.com.json",
    "keys/putty.ppk",
    "config/secrets.yaml",
    "secrets.yml",
    ".streamlit/secrets.toml",
    "npmrc",
    ".npmrc",
    ".pypirc",
    "pip.conf",
    "pip.ini",
    "credentials.toml",
    ".cargo/credentials",
    "infra/terraform.tfvars",
    "infra/prod.auto.tfvars.json",
    ".terraformrc",
    "android/release.keystore",
    "android/release.jks",
    "certs/client.p12",
    "certs/client.pfx",
    "ops/krb5.keytab",
    ".git-credentials",
    ".gitcookies",
    ".config/git/credentials",
    "application_default_credentials.json",
    ".azure/msal_token_cache.json",
    ".config/gh/hosts.yml",
    ".config/gcloud/credentials.db",
    ".config/containers/auth.json",
    ".config/pypoetry/auth.toml",
    ".config/rclone/rclone.conf",
    ".databrickscfg",
    ".gem/credentials",
    ".m2/settings.xml",
    ".gradle/gradle.properties",
    "vpn/office.ovpn",
    "ops/.ssh/deploy_key",
    ".bash_history",
)
# files with a secret-sounding name that are ordinary project files: never secret
LOOK_ALIKES: tuple[str, ...] = (
    "docker/config.json",
    "kube/config.yaml",
    "src/secrets.py",
    "docs/pip.conf.md",
    "aws/config.py",
    "settings.xml",
    "gradle.properties",
    "history.md",
    ".env.example",
)


def value_of(rel: str) -> str:
    """The value planted in `rel`: unique per file, found by a plain substring search."""
    return f"s3cr3t-{SECRET_FILES.index(rel):02d}-planted"


def plant(root: Path, names: tuple[str, ...] = SECRET_FILES) -> dict[str, str]:
    """Write each of `names` under `root` holding its value; {relative path: value}."""
    planted = {}
    for rel in names:
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"token": value_of(rel)}) + "\n")
        planted[rel] = value_of(rel)
    return planted


def leaked(text: str, planted: dict[str, str]) -> list[str]:
    """The files of `planted` whose value `text` holds."""
    return [rel for rel, value in planted.items() if value in text]
