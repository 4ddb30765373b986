"""The install hints name this project's distribution and extras, in the form that fits how
qshell was installed: a checkout's `pip install -e`, or an install by the name `qshell-agent`
(PyPI's `qshell` is an unrelated project)."""

from __future__ import annotations

import shutil
import tomllib
from pathlib import Path

import pytest

from qshell.extras import DISTRIBUTION, checkout, install_command

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "qshell"


def project_table() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def test_the_distribution_is_the_name_the_hints_give_and_the_command_stays_qshell():
    project = project_table()
    assert project["name"] == DISTRIBUTION != "qshell"
    assert project["scripts"] == {"qshell": "qshell.cli:entry"}
    assert {"local", "acp"} <= set(project["optional-dependencies"])


def test_the_example_plugin_depends_on_this_distribution_not_pypis_qshell():
    example = tomllib.loads((ROOT / "plugins" / "qshell-todos" / "pyproject.toml").read_text())
    assert example["project"]["dependencies"] == [DISTRIBUTION]


def test_in_the_checkout_the_hint_is_an_editable_install_of_it(monkeypatch, tmp_path):
    assert checkout() == ROOT
    monkeypatch.chdir(ROOT)
    assert install_command("local") == "pip install -e '.[local]'"
    monkeypatch.chdir(tmp_path)  # started in another project: the checkout by its path
    assert install_command("acp") == f"pip install -e '{ROOT}[acp]'"


def test_an_installed_copy_names_the_distribution(tmp_path):
    site = tmp_path / "site-packages"
    shutil.copytree(PACKAGE, site / "qshell")
    assert checkout(site / "qshell") is None
    assert install_command("local", package_dir=site / "qshell") == (
        "pip install 'qshell-agent[local]'"
    )


@pytest.mark.parametrize("text", ['name = "qshell"\n', "not toml at all \x00"])
def test_a_pyproject_of_another_project_above_the_package_is_no_checkout(tmp_path, text):
    (tmp_path / "pyproject.toml").write_text(text)
    (tmp_path / "qshell").mkdir()
    assert checkout(tmp_path / "qshell") is None
