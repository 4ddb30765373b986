"""ARCHITECTURE.md stays true: its module map names every module, and every file it names exists.

The map is the fenced block under "## Module map". A line that starts with a folder
(`llm/`) opens that folder for the lines indented below it; a `name.py` on such a line
is read in the innermost open folder, a `folder/name.py` there or from the repository
root. Anywhere else in the page, a `folder/name.py` must name a file that exists, so a
walk or a rule cannot keep pointing at a module that moved.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "ARCHITECTURE.md"
FOLDER = re.compile(r"^( *)([\w.-]+(?:/[\w.-]+)*/)(?=\s|$)")
MODULE = re.compile(r"(?<![\w/.-])((?:[\w-]+/)*[\w-]+\.py)\b")


def module_map() -> list[str]:
    text = PAGE.read_text(encoding="utf-8")
    section = text.split("## Module map", 1)[1]
    block = section.split("```", 2)[1]
    return block.splitlines()[1:]


def named_in_map() -> tuple[set[Path], list[str]]:
    """Every file the map names, and each name that resolves to no file."""
    open_folders: list[tuple[int, Path]] = []
    named: set[Path] = set()
    unresolved: list[str] = []
    for line in module_map():
        if not line.strip():
            continue
        indent = len(line) - len(line.lstrip(" "))
        while open_folders and open_folders[-1][0] >= indent:
            open_folders.pop()
        here = open_folders[-1][1] if open_folders else ROOT
        folder = FOLDER.match(line)
        if folder:
            opened = here / folder.group(2)
            if not opened.is_dir():
                opened = ROOT / folder.group(2)
            open_folders.append((indent, opened))
        for name in MODULE.findall(line):
            candidates = [here / name] + ([ROOT / name] if "/" in name else [])
            found = next((c for c in candidates if c.is_file()), None)
            if found is None:
                unresolved.append(f"{name} (under {here.relative_to(ROOT)})")
            else:
                named.add(found.resolve())
    return named, unresolved


def test_the_module_map_names_every_module():
    named, _ = named_in_map()
    missing = [
        str(path.relative_to(ROOT))
        for path in sorted((ROOT / "qshell").rglob("*.py"))
        if path.name != "__init__.py" and path.resolve() not in named
    ]
    assert missing == []


def test_every_file_the_map_names_exists():
    _, unresolved = named_in_map()
    assert unresolved == []


def test_every_path_the_page_names_exists():
    text = PAGE.read_text(encoding="utf-8")
    prose = text.split("## Module map", 1)[0] + text.split("## Module map", 1)[1].split("```", 2)[2]
    stale = sorted(
        {
            name
            for name in MODULE.findall(prose)
            if "/" in name
            and not (ROOT / "qshell" / name).is_file()
            and not (ROOT / name).is_file()
        }
    )
    assert stale == []
