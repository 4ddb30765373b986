"""The apply question an accepted speculation asks: deletions and protected paths stand
out — marked on their lines, listed first, and repeated as warning lines — in the rich
and the plain renderer alike."""

from __future__ import annotations

from concurrent.futures import Future

import pytest

from qshell.agent.events import ApplyRequested, ChangeKind, FileChange
from qshell.ui.render import APPLY_FILES, apply_view
from tests.ui import test_render_plain, test_render_rich

QUESTION = ApplyRequested(
    "tidy up",
    ("rm -rf pkg notes.txt && touch a.txt",),
    (
        FileChange("a.txt", ChangeKind.CHANGED),
        FileChange("notes.txt", ChangeKind.DELETED),
        FileChange("pkg", ChangeKind.DELETED, ("pkg/.husky",)),
    ),
    Future(),
)


def test_deletions_and_protected_paths_are_marked_and_listed_first():
    view = apply_view(QUESTION)
    assert view.files == [
        "- notes.txt (deleted)",
        "- pkg (deleted; protected: pkg/.husky)",
        "~ a.txt",
    ]
    assert view.marked == 2
    assert view.warnings == [
        "! deletes 2 files: notes.txt, pkg",
        "! touches protected paths (git, tool configuration): pkg/.husky",
    ]


def test_a_deletion_past_the_listed_files_is_still_shown():
    many = tuple(FileChange(f"f{i:03}.txt", ChangeKind.CREATED) for i in range(APPLY_FILES + 5))
    request = ApplyRequested(
        "p", ("x",), (*many, FileChange("zz.txt", ChangeKind.DELETED)), Future()
    )
    view = apply_view(request)
    assert view.files[0] == "- zz.txt (deleted)"
    assert view.more == 6


@pytest.mark.parametrize("render", [test_render_plain.render, test_render_rich.render])
def test_both_renderers_show_the_warnings(render):
    text = render([QUESTION])
    assert "pkg (deleted; protected: pkg/.husky)" in text
    assert "! deletes 2 files: notes.txt, pkg" in text
    assert "! touches protected paths" in text


def test_build_cache_files_are_one_line_after_the_others():
    pyc = [
        FileChange(f"pkg/__pycache__/m{i}.cpython-311.pyc", ChangeKind.CREATED, cache="__pycache__")
        for i in range(30)
    ]
    runner_cache = FileChange(
        ".pytest_cache/v/cache/nodeids", ChangeKind.CREATED, cache=".pytest_cache"
    )
    gone = FileChange("old/__pycache__/x.pyc", ChangeKind.DELETED, cache="__pycache__")
    request = ApplyRequested(
        "run the tests",
        ("pytest",),
        (*pyc, runner_cache, gone, FileChange("report.txt", ChangeKind.CREATED)),
        Future(),
    )
    view = apply_view(request)
    assert view.summary == "Applying it changes 33 files in the project:"
    assert view.files == [
        "- old/__pycache__/x.pyc (deleted)",  # a deletion is never folded away
        "+ report.txt",
        "+ 31 files in build caches (.pytest_cache, __pycache__)",
    ]
    assert view.more == 0


def test_a_directorys_own_change_says_what_changed():
    changes = (
        FileChange("keys/", ChangeKind.MODE),
        FileChange("tags/", ChangeKind.ATTRS),
        FileChange("both/", ChangeKind.MODE_ATTRS),
    )
    view = apply_view(ApplyRequested("p", ("x",), changes, Future()))
    assert sorted(view.files) == [
        "m both/ (permissions and attributes changed)",
        "m keys/ (permissions changed)",
        "m tags/ (attributes changed)",
    ]
