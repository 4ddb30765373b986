"""qshell's one list of secret names: every credential file of tests/secret_files.py is secret
wherever it sits (in a project, in the home, in a bound toolchain), by name alone and through
the file tools' resolver alike; look-alikes and templates are not. (The proof, the jail, the
plugin and `qshell -p` are tried on the same files in their own tests.)"""

from __future__ import annotations

import pytest

from qshell import secret_names
from qshell.tools.paths import PathResolver
from tests.secret_files import LOOK_ALIKES, SECRET_FILES


@pytest.mark.parametrize("rel", SECRET_FILES)
def test_each_credential_file_is_secret_in_a_project_a_home_and_a_toolchain(tmp_path, rel):
    home = tmp_path / "home"
    resolver = PathResolver(tmp_path / "project", home=home)
    for where in (tmp_path / "project", tmp_path / "project/sub", home, home / ".nvm/x"):
        assert resolver.is_secret(where / rel), where / rel
        assert resolver.is_secret(where / rel.upper()), "names are compared without case"
    assert secret_names.is_secret_name(rel)


@pytest.mark.parametrize("rel", LOOK_ALIKES)
def test_look_alikes_and_templates_are_not_secret(tmp_path, rel):
    resolver = PathResolver(tmp_path / "project", home=tmp_path / "home")
    assert not resolver.is_secret(tmp_path / "project" / rel)
    assert not secret_names.is_secret_name(rel)


def test_a_secret_directory_hides_everything_in_it_templates_too():
    assert secret_names.is_secret_name("deploy/.ssh")
    assert secret_names.is_secret_name("deploy/.ssh/.env.example")
    assert not secret_names.is_secret_name("deploy/ssh/notes.md")


def test_the_homes_credential_directories_are_secret_as_a_whole(tmp_path):
    home = tmp_path / "home"
    resolver = PathResolver(tmp_path / "project", home=home)
    for rel in (".docker/buildx/instances", ".mozilla/firefox/x/cookies.sqlite", ".oci/k"):
        assert resolver.is_secret(home / rel)
        assert not resolver.is_secret(tmp_path / "project" / rel)  # a project's .docker/
