"""Which project files a small local model is shown with its turn's prompt, and how to test.

A model of half a billion parameters answers a question about a file it can see much
better than it plans the reads that would show it one: asked "explain app.py" with tools,
it reads `path relative to the project root`. So for such a model (`local.smallModel`,
the bundled offline default) qshell attaches, as if the user had typed `@path`, the files
the prompt names (`app.py`), the files that define a name it mentions (`discount`,
`test_discount`: a `def`, `class`, `function`, `fn` or `func` of that name in the
project's source files) with the test files that mention that name (what the code is
expected to do), and the README when the prompt asks about the project as a whole and
names nothing; then, while there is room, the project modules a chosen Python
file imports (a test's subject); at most `MAX_FILES`, within a small byte budget (every prompt
token costs the model real time), and only what attachments may carry (no secret-looking
or binary file; agent/attachments.py). `test_command` names the command that runs the
project's tests, for the system prompt, so "run the tests" has a command to copy.

Its limits are deliberate: names are matched in source files of the top two directory
levels (`MAX_SCANNED` of them, each read up to `MAX_SCAN_BYTES`), a word that is also an
ordinary English word counts only when the project defines it, and a larger model never
comes here: it reads what it needs. Pure apart from reading the project; any thread.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from qshell.latency.tool_offer import CONTENT_WORDS, PromptReading, typed_text

MAX_FILES = 2
BUDGET_BYTES = 6 * 1024  # attached files of one prompt together
MAX_SCANNED = 200
MAX_SCAN_BYTES = 64 * 1024
SOURCE_SUFFIXES = frozenset(
    [
        ".py",
        ".js",
        ".mjs",
        ".cjs",
        ".ts",
        ".tsx",
        ".jsx",
        ".go",
        ".rs",
        ".rb",
        ".java",
        ".kt",
        ".c",
        ".h",
        ".cc",
        ".cpp",
        ".hpp",
        ".cs",
        ".php",
        ".sh",
        ".lua",
        ".swift",
        ".scala",
        ".ex",
        ".exs",
        ".el",
    ]
)
SKIPPED_DIRS = frozenset(
    [
        "node_modules",
        ".git",
        ".venv",
        "venv",
        "__pycache__",
        "build",
        "dist",
        "target",
        ".tox",
        ".mypy_cache",
    ]
)
NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{2,}")
DEFINITION = r"(?:^|\s)(?:async\s+)?(?:def|class|function|fn|func|sub|defun)\s+{name}\b"
IMPORT = re.compile(r"^\s*(?:from\s+([\w.]+)\s+import|import\s+([\w.]+))", re.MULTILINE)
README_NAMES = ("README.md", "README.rst", "README.txt", "README")
WHOLE_PROJECT_WORDS = CONTENT_WORDS | {"overview", "purpose", "about"}


def shown_files(prompt: str, root: Path) -> list[str]:
    """The project files (relative paths) to attach to `prompt` for a small model."""
    reading = PromptReading.of(prompt, root)
    chosen = [p for p in reading.existing if p not in reading.directories and _inside(p, root)]
    names = list(dict.fromkeys(NAME.findall(typed_text(prompt))))
    if len(chosen) < MAX_FILES and names:
        sources = _sources(root)  # read once for both searches
        defined = defining_files(names, sources)
        chosen.extend(path for path in defined if path not in chosen)
        if defined:  # what the named code is expected to do
            chosen.extend(t for t in testing_files(names, sources) if t not in chosen)
    if not chosen and reading.words & WHOLE_PROJECT_WORDS:
        chosen.extend(name for name in README_NAMES if (root / name).is_file())
    for path in list(chosen):
        if len(chosen) >= MAX_FILES:
            break
        chosen.extend(m for m in imported_modules(root, path) if m not in chosen)
    # nothing from outside the project, a symlink's target included
    return [path for path in chosen if _inside(path, root)][:MAX_FILES]


def imported_modules(root: Path, path: str) -> list[str]:
    """The project's Python modules that the Python file `path` imports, found next to it
    or at the root (a test file's subject: `from app import discount` → `app.py`)."""
    if not path.endswith(".py") or not _inside(path, root):
        return []
    try:
        with (root / path).open("rb") as handle:
            source = handle.read(MAX_SCAN_BYTES).decode("utf-8", "replace")
    except OSError:
        return []
    found: list[str] = []
    here = (root / path).parent
    for from_name, import_name in IMPORT.findall(source):
        relative = (from_name or import_name).replace(".", "/") + ".py"
        for base in (here, root):
            candidate = base / relative
            if candidate.is_file() and _inside(str(candidate), root):
                name = candidate.relative_to(root).as_posix()
                if name != path and name not in found:
                    found.append(name)
                break
    return found


def _inside(path: str, root: Path) -> bool:
    """`path` (as a prompt may write it: relative, `~/…`, absolute) is a regular file in the
    project once symlinks are resolved, and not under `.git`."""
    try:
        candidate = Path(path).expanduser()  # RuntimeError for `~nobody/x`
        candidate = candidate if candidate.is_absolute() else root / candidate
        resolved, top = candidate.resolve(), root.resolve()
        inside = resolved.is_relative_to(top) and resolved.is_file()
    except (OSError, ValueError, RuntimeError):
        return False
    return inside and ".git" not in resolved.relative_to(top).parts


def source_files(root: Path) -> list[Path]:
    """The project's source files of the top two levels, sorted, at most MAX_SCANNED."""
    found: list[Path] = []
    levels = [root]
    for _depth in range(2):
        deeper: list[Path] = []
        for directory in levels:
            try:
                entries = sorted(directory.iterdir())
            except OSError:
                continue
            for entry in entries:
                if entry.name.startswith(".") or entry.name in SKIPPED_DIRS or entry.is_symlink():
                    continue
                if entry.is_dir():
                    deeper.append(entry)
                elif entry.suffix in SOURCE_SUFFIXES and entry.is_file():
                    found.append(entry)
                    if len(found) >= MAX_SCANNED:
                        return found
        levels = deeper
    return found


def _sources(root: Path) -> list[tuple[str, str]]:
    """The source files of `source_files`, as (relative path, text read up to the cap)."""
    sources = []
    for path in source_files(root):
        try:
            with path.open("rb") as handle:
                data = handle.read(MAX_SCAN_BYTES)
        except OSError:
            continue
        sources.append((path.relative_to(root).as_posix(), data.decode("utf-8", "replace")))
    return sources


def defining_files(names: list[str], sources: list[tuple[str, str]]) -> list[str]:
    """The source files (of `_sources`) that define one of `names`, in the order of `names`."""
    chosen: list[str] = []
    for name in names:
        pattern = re.compile(DEFINITION.format(name=re.escape(name)), re.MULTILINE)
        for relative, source in sources:
            if relative not in chosen and pattern.search(source):
                chosen.append(relative)
                break
    return chosen


def testing_files(names: list[str], sources: list[tuple[str, str]]) -> list[str]:
    """The test files (`test_*.py`, `*_test.py`, or under `tests/`) among `sources` that
    mention one of `names` as a whole word."""
    found: list[str] = []
    for relative, source in sources:
        name = relative.rsplit("/", 1)[-1]
        stem = name.rsplit(".", 1)[0]
        if not (
            name.startswith("test_") or stem.endswith("_test") or relative.startswith("tests/")
        ):
            continue
        if any(re.search(rf"\b{re.escape(n)}\b", source) for n in names):
            found.append(relative)
    return found


def test_command(root: Path) -> str | None:
    """The command that runs this project's tests, when its files say it plainly."""
    package = root / "package.json"
    if package.is_file():
        try:
            scripts = json.loads(package.read_text(encoding="utf-8")).get("scripts") or {}
        except (OSError, ValueError, AttributeError):
            scripts = {}
        if isinstance(scripts, dict) and "test" in scripts:
            return "npm test"
    if (root / "Cargo.toml").is_file():
        return "cargo test"
    if (root / "go.mod").is_file():
        return "go test ./..."
    if _python_tests(root):
        return "python -m pytest -q"
    makefile = root / "Makefile"
    if makefile.is_file():
        try:
            if re.search(r"^test:", makefile.read_text(encoding="utf-8", errors="replace"), re.M):
                return "make test"
        except OSError:
            return None
    return None


def _python_tests(root: Path) -> bool:
    if (root / "conftest.py").is_file() or (root / "tests").is_dir():
        return True
    try:
        return any(
            p.name.startswith("test_") or p.name.endswith("_test.py") for p in root.glob("*.py")
        )
    except OSError:
        return False
