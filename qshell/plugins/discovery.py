"""Where plugins come from, and importing them: entry points, the user folder, named files.

Three sources, consulted in this order: files named with `--plugin FILE` (in command-line
order), `.py` files in the user plugins folder (`<config dir>/plugins/`, by name), and the
`qshell` entry-point group of installed packages (by name). `QSHELL_PLUGINS=a,b` keeps
only the plugins of the folder and the entry points with those names (empty: none;
`QSHELL_LOAD_PLUGINS` is read when it is unset, its old name); `--no-plugins` keeps none
of them. A file named on the command line always loads: the user named it. A project's own
folder is never searched, so a cloned repository cannot run code by being opened; a plugin
kept in a project runs only when named with `--plugin`. A plugin's name is its file's stem
or its entry point's name. Finding touches only the file system and package metadata;
importing runs the plugin's module code (`Found.load`). Main thread.
"""

from __future__ import annotations

import enum
import importlib.metadata
import importlib.util
import itertools
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from qshell.errors import InputError

USER_FOLDER = "plugins"  # under the config directory
SELECT_ENV = "QSHELL_PLUGINS"
SELECT_ENV_OLD = "QSHELL_LOAD_PLUGINS"  # the name before gate plugins; read when unset
_MODULE_NUMBERS = itertools.count(1)


class Source(enum.StrEnum):
    FILE = "--plugin"
    USER_FOLDER = "user folder"
    ENTRY_POINT = "entry point"


@dataclass(frozen=True, slots=True)
class PluginRequest:
    """Which plugins a run asks for: the files named on the command line, and whether
    discovered ones (user folder, entry points) load at all (`--no-plugins`: not)."""

    files: tuple[Path, ...] = ()
    discover: bool = True


@dataclass(frozen=True, slots=True)
class Found:
    """A plugin found but not imported yet: its name, source, where it is, its version
    (entry points: the distribution's), and `load`, which imports it."""

    name: str
    source: Source
    location: str
    version: str | None
    load: Callable[[], object]


def selection(environ: Mapping[str, str]) -> frozenset[str] | None:
    """The names `QSHELL_PLUGINS` keeps (None: every discovered plugin)."""
    raw = environ.get(SELECT_ENV)
    if raw is None:
        raw = environ.get(SELECT_ENV_OLD)
    if raw is None:
        return None
    return frozenset(name.strip() for name in raw.split(",") if name.strip())


def find(
    request: PluginRequest, *, environ: Mapping[str, str], config_dir: Path, cwd: Path
) -> list[Found]:
    """Every plugin the request and the environment select, in consultation order; a named
    file that does not exist is an InputError."""
    found = [_named_file(path if path.is_absolute() else cwd / path) for path in request.files]
    if not request.discover:
        return found
    only = selection(environ)
    if only is not None and not only:  # QSHELL_PLUGINS="": nothing to look for
        return found
    discovered = [*_user_folder(config_dir / USER_FOLDER), *_entry_points(outside=cwd)]
    found += [f for f in discovered if only is None or f.name in only]
    return found


def _named_file(path: Path) -> Found:
    if not path.is_file():
        raise InputError(f"--plugin {path}: no such file")
    return _file_plugin(path.resolve(), Source.FILE)


def _user_folder(folder: Path) -> list[Found]:
    try:
        files = sorted(p for p in folder.glob("*.py") if not p.name.startswith(("_", ".")))
    except OSError:
        return []
    return [_file_plugin(p, Source.USER_FOLDER) for p in files if p.is_file()]


def _file_plugin(path: Path, source: Source) -> Found:
    return Found(path.stem, source, str(path), None, lambda: import_file(path))


def import_file(path: Path) -> ModuleType:
    """Import a plugin file as a module of its own (a fresh one on every call, so two hosts
    in one process never share a plugin's state); the file's folder is not put on sys.path."""
    name = f"qshell_plugin_{path.stem}_{next(_MODULE_NUMBERS)}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"{path} cannot be imported as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses and typing look a module up while it runs
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return module


def _entry_points(*, outside: Path) -> list[Found]:
    """The installed packages' plugins — never one whose metadata lies in the directory
    qshell was started in (`outside`): a cloned repository on `sys.path` (`python -m`
    puts the working directory there) must not run code by being opened."""
    seen: dict[str, Found] = {}
    for point in sorted(importlib.metadata.entry_points(group="qshell"), key=lambda e: e.name):
        if point.name in seen:  # the same distribution found twice on sys.path
            continue
        dist = point.dist
        if dist is not None and _lies_in(dist, outside.resolve()):
            continue
        where = f"{dist.name} {dist.version}" if dist is not None else point.value
        version = dist.version if dist is not None else None
        seen[point.name] = Found(point.name, Source.ENTRY_POINT, where, version, point.load)
    return list(seen.values())


def _lies_in(dist: importlib.metadata.Distribution, directory: Path) -> bool:
    """Whether `dist`'s metadata is inside `directory` (an editable install's stays in
    site-packages; only metadata shipped in the tree itself lies there)."""
    try:
        located = Path(str(dist.locate_file(""))).resolve()
    except (OSError, RuntimeError, ValueError):
        return True  # unknown: not loaded
    return located == directory or located.is_relative_to(directory)
