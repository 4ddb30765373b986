"""Which paths are secrets, and tree-wide tools that never read one through a symlink."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from qshell.tools.base import ToolContext
from qshell.tools.glob import GlobArgs, GlobTool
from qshell.tools.paths import PathResolver
from tests.tools.test_grep import files_of, grep, tool  # noqa: F401  (fixture)

SECRET = "API_KEY=sk-live-0123456789"


@pytest.mark.parametrize(
    "name",
    [
        ".env",
        ".ENV",
        ".env.local",
        ".Env.Production",
        "prod.env",
        ".envrc",
        "id_rsa",
        "ID_ED25519.pub",
        "server.PEM",
        "tls.key",
        "store.p12",
        ".netrc",
        ".npmrc",
        ".pypirc",
        ".git-credentials",
        ".pgpass",
        "prod.tfvars",
        "terraform.tfstate",
        "credentials.json",
    ],
)
def test_secret_names_are_recognised_whatever_their_case(tmp_path: Path, name: str) -> None:
    resolver = PathResolver(tmp_path, home=tmp_path / "home")
    assert resolver.is_secret(tmp_path / "sub" / name)


@pytest.mark.parametrize(
    "name", [".env.example", ".env.sample", ".env.template", ".ENV.EXAMPLE", "env.py", "keys.md"]
)
def test_templates_and_look_alikes_are_not_secrets(tmp_path: Path, name: str) -> None:
    resolver = PathResolver(tmp_path, home=tmp_path / "home")
    assert not resolver.is_secret(tmp_path / name)


@pytest.mark.parametrize(
    "rel",
    [
        ".ssh/config",
        ".aws/credentials",
        ".kube/config",
        ".docker/config.json",
        ".config/gh/hosts.yml",
        ".config/gcloud/credentials.db",
        ".azure/accessTokens.json",
        ".gnupg/pubring.kbx",
    ],
)
def test_credential_files_in_the_home_directory_are_secrets(tmp_path: Path, rel: str) -> None:
    home = tmp_path / "home"
    assert PathResolver(tmp_path / "project", home=home).is_secret(home / rel)


@pytest.mark.parametrize(
    "path", ["/proc/1/environ", "/proc/self/environ", "/proc/9/task/9/environ"]
)
def test_process_environments_are_secrets(tmp_path: Path, path: str) -> None:
    assert PathResolver(tmp_path, home=tmp_path / "home").is_secret(Path(path))


def test_extra_patterns_from_settings_match_without_regard_to_case(tmp_path: Path) -> None:
    resolver = PathResolver(tmp_path, home=tmp_path, extra_secret_patterns=["*.vault"])
    assert resolver.is_secret(tmp_path / "Team.VAULT")


def test_extra_patterns_with_a_slash_match_the_path_in_the_project(tmp_path: Path) -> None:
    """`secrets/*` names the project's `secrets/` directory (it never matched: the glob was
    compared with the absolute path); an absolute glob still names a place outside."""
    patterns = ["secrets/*", "deploy/*.cfg", str(tmp_path / "keys") + "/*"]
    resolver = PathResolver(tmp_path / "p", home=tmp_path, extra_secret_patterns=patterns)
    for secret in ("p/secrets/a.txt", "p/Deploy/prod.CFG", "keys/k"):
        assert resolver.is_secret(tmp_path / secret), secret
    for plain in ("p/src/secrets.txt", "p/deploy/notes.md", "p/other/secrets/a.txt"):
        assert not resolver.is_secret(tmp_path / plain), plain


@pytest.fixture
def linked(root: Path, tmp_path: Path) -> Path:
    """A project whose `notes.txt` links to `.env`, and whose `outside.txt` links out."""
    (root / ".env").write_text(SECRET + "\n")
    os.symlink(".env", root / "notes.txt")
    (tmp_path / "elsewhere.txt").write_text(SECRET + "\n")
    os.symlink(tmp_path / "elsewhere.txt", root / "outside.txt")
    (root / "plain.txt").write_text("API_KEY is read from the environment\n")
    return root


def test_grep_never_reads_a_secret_or_an_outside_file_through_a_symlink(
    linked: Path,
    tool,  # noqa: F811
    ctx: ToolContext,
) -> None:
    result = grep(tool, ctx, "API_KEY")
    assert files_of(result) == {"plain.txt"}
    assert "sk-live" not in result.llm_content


def test_glob_lists_no_symlink_to_a_secret_or_out_of_the_root(linked: Path, ctx: ToolContext):
    result = GlobTool().run(GlobArgs(pattern="*.txt"), ctx)
    assert result.llm_content.split() == ["plain.txt"]
