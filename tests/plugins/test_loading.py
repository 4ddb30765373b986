"""Finding and loading plugins: every discovery path, the selection variables, and what
happens to a plugin that fails on the way (it is skipped and said once; the rest load)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from qshell.errors import InputError
from qshell.plugins import PluginRequest, open_host
from qshell.plugins.discovery import selection
from tests.plugins.helpers import PACKAGE, install_example, write_plugin

GATE = "qshell_tool_gate(call, context)"


@pytest.fixture
def folder(isolated_home: Path) -> Path:
    """The user plugins folder of the tests' QSHELL_HOME."""
    return isolated_home / "qshell" / "config" / "plugins"


def load(
    root: Path,
    *files: Path,
    discover: bool = True,
    select: str | None = None,
    options: dict | None = None,
):
    environ = dict(os.environ)
    environ.pop("QSHELL_PLUGINS", None)
    if select is not None:
        environ["QSHELL_PLUGINS"] = select
    request = PluginRequest(files=files, discover=discover)
    return open_host(request, environ=environ, cwd=root, options=options or {})


def names(host) -> list[str]:
    return [info.name for info in host.infos if info.error is None]


def test_a_named_file_loads_and_one_that_does_not_exist_is_bad_input(tmp_path):
    plugin = write_plugin(tmp_path / "mine.py", GATE, "return None")
    host = load(tmp_path, Path("mine.py"))  # relative to the project root
    assert names(host) == ["mine"] and host.infos[0].source == "--plugin"
    assert host.infos[0].hooks == ["qshell_tool_gate"]
    assert host.infos[0].location == str(plugin)
    with pytest.raises(InputError, match="no such file"):
        load(tmp_path, tmp_path / "missing.py")


def test_the_user_folder_loads_its_python_files_in_name_order(tmp_path, folder):
    for name in ("b_second", "a_first", "_private", ".hidden"):
        write_plugin(folder / f"{name}.py", GATE, "return None")
    (folder / "notes.txt").write_text("not a plugin")
    host = load(tmp_path)
    assert names(host) == ["a_first", "b_second"]
    assert {info.source for info in host.infos} == {"user folder"}


def test_an_installed_package_loads_through_its_entry_point(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(PACKAGE))
    monkeypatch.syspath_prepend(str(install_example(tmp_path / "site")))
    monkeypatch.delitem(sys.modules, "qshell_todos", raising=False)
    (tmp_path / "project").mkdir()
    host = load(tmp_path / "project", select="todos")
    (info,) = host.infos
    assert (info.name, info.source, info.version) == ("todos", "entry point", "0.1.0")
    assert [r.tool.name for r in host.tools] == ["todos"]
    monkeypatch.delitem(sys.modules, "qshell_todos", raising=False)


def test_qshell_plugins_selects_by_name_and_empty_selects_none(tmp_path, folder):
    for name in ("one", "two", "three"):
        write_plugin(folder / f"{name}.py", GATE, "return None")
    assert names(load(tmp_path, select="three, one")) == ["one", "three"]
    assert names(load(tmp_path, select="")) == []
    assert names(load(tmp_path)) == ["one", "three", "two"]


def test_the_old_variable_name_still_selects_when_the_new_one_is_unset():
    assert selection({"QSHELL_LOAD_PLUGINS": "a,b"}) == {"a", "b"}
    assert selection({"QSHELL_LOAD_PLUGINS": "a", "QSHELL_PLUGINS": "b"}) == {"b"}
    assert selection({}) is None


def test_no_plugins_loads_none_discovered_but_the_files_named(tmp_path, folder):
    write_plugin(folder / "found.py", GATE, "return None")
    named = write_plugin(tmp_path / "named.py", GATE, "return None")
    assert names(load(tmp_path, named, discover=False)) == ["named"]
    assert names(load(tmp_path, named, select="found")) == ["named", "found"]


def test_a_project_folder_never_runs_code_by_itself(tmp_path):
    root = tmp_path / "cloned"
    marker = tmp_path / "ran"
    for where in (".qshell/plugins", "plugins", ".qshell"):
        path = root / where / "evil.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"open({str(marker)!r}, 'w').close()\n")
    assert names(load(root)) == [] and not marker.exists()
    assert names(load(root, Path(".qshell/plugins/evil.py"))) == ["evil"]  # named: it runs
    assert marker.exists()


def test_the_plugin_consulted_first_keeps_a_name_and_the_other_is_skipped(tmp_path, folder):
    write_plugin(folder / "same.py", GATE, "return GateDecision.deny('folder')")
    named = write_plugin(tmp_path / "same.py", GATE, "return GateDecision.deny('named')")
    host = load(tmp_path, named)
    assert [(i.name, i.source, i.error is None) for i in host.infos] == [
        ("same", "--plugin", True),
        ("same", "user folder", False),
    ]
    assert "has the name of the plugin from --plugin" in host.startup_notes[0]


def test_plugins_that_fail_are_skipped_each_with_one_line_and_the_rest_load(tmp_path, folder):
    (folder).mkdir(parents=True)
    (folder / "a_import.py").write_text("import no_such_module_anywhere\n")
    write_plugin(folder / "b_unknown.py", "qshell_tool_gait(call)", "return None")
    write_plugin(folder / "c_configure.py", "qshell_configure(config)", "raise ValueError('bad')")
    write_plugin(folder / "d_tools.py", "qshell_register_tools(register)", "raise OSError('x')")
    (folder / "e_exits.py").write_text("raise SystemExit(3)\n")
    write_plugin(folder / "f_fine.py", GATE, "return None")
    host = load(tmp_path)
    assert names(host) == ["f_fine"]
    notes = host.startup_notes
    assert len(notes) == 5 and all("\n" not in n and n.endswith("; skipped") for n in notes)
    assert "ModuleNotFoundError" in notes[0] and "qshell_tool_gait" in notes[1]
    assert "failed to configure: ValueError: bad" in notes[2]
    assert "failed to register its tools: OSError: x" in notes[3]
    assert "failed to load: SystemExit: 3" in notes[4]
    infos = [i.name for i in host.infos]
    assert infos == ["a_import", "b_unknown", "c_configure", "d_tools", "e_exits", "f_fine"]


def test_configure_gets_the_plugins_own_options_and_directories(tmp_path):
    plugin = tmp_path / "opts.py"
    plugin.write_text(
        "from qshell.plugins import hookimpl\n"
        "seen = []\n"
        "@hookimpl\n"
        "def qshell_configure(config):\n"
        "    seen.append(config)\n"
    )
    options = {"opts": {"level": 3}, "other": {"level": 9}}
    host = load(tmp_path, plugin, options=options)
    module = next(m for m in sys.modules.values() if getattr(m, "__file__", None) == str(plugin))
    (config,) = module.seen
    assert (config.name, dict(config.options), config.project_root) == (
        "opts",
        {"level": 3},
        tmp_path,
    )
    assert config.state_dir.name == "state" and names(host) == ["opts"]


def test_each_load_imports_a_file_afresh(tmp_path):
    plugin = tmp_path / "counter.py"
    plugin.write_text("import itertools\nCOUNT = itertools.count()\n")
    load(tmp_path, plugin)
    load(tmp_path, plugin)
    loaded = [m for m in sys.modules.values() if getattr(m, "__file__", None) == str(plugin)]
    assert len(loaded) == 2 and loaded[0] is not loaded[1]


def test_package_metadata_inside_the_project_never_loads(tmp_path, monkeypatch):
    """`python -m qshell` puts the working directory on sys.path: a repository shipping
    a dist-info with a `qshell` entry point must not run its code by being opened."""
    monkeypatch.syspath_prepend(str(PACKAGE))
    monkeypatch.syspath_prepend(str(install_example(tmp_path / "site")))
    monkeypatch.delitem(sys.modules, "qshell_todos", raising=False)
    assert names(load(tmp_path, select="todos")) == []  # the metadata is under the project
    assert "qshell_todos" not in sys.modules
