"""What a speculation read is fingerprinted, and a file changed since it was read stops accept."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from qshell.overlay import ApplyConflict, Overlay, ReadsUnrecorded, reads
from qshell.overlay.records import CHANGED, READ_CHANGED
from qshell.tools.paths import PathResolver


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    (root / "src").mkdir(parents=True)
    (root / "a.txt").write_text("one\n")
    (root / "src" / "b.py").write_text("B = 1\n")
    return root


@pytest.fixture
def overlay(project: Path, tmp_path: Path):
    with Overlay.create(project, PathResolver(project), base_dir=tmp_path / "base") as ov:
        yield ov


def never() -> bool:
    return False


def reasons(caught: pytest.ExceptionInfo[ApplyConflict]) -> list[tuple[str, str]]:
    return [(c.path, c.reason) for c in caught.value.conflicts]


def test_a_user_edit_between_a_speculative_read_and_write_is_a_conflict(overlay, project):
    a = project / "a.txt"
    seen = overlay.view.read_bytes(a)
    a.write_text("the user's edit\n")
    overlay.view.write_bytes(a, seen.replace(b"one", b"two"))
    with pytest.raises(ApplyConflict) as caught:
        overlay.apply()
    assert ("a.txt", READ_CHANGED) in reasons(caught)
    assert a.read_text() == "the user's edit\n"


def test_a_same_size_edit_in_the_same_tick_is_still_caught_by_content(overlay, project):
    a = project / "a.txt"
    info = a.stat()
    overlay.view.read_bytes(a)
    with open(a, "r+b") as out:  # in place, same size, timestamps put back
        out.write(b"two\n")
    os.utime(a, ns=(info.st_atime_ns, info.st_mtime_ns))
    overlay.view.write_bytes(project / "new.txt", b"n\n")
    with pytest.raises(ApplyConflict) as caught:
        overlay.apply()
    assert reasons(caught) == [("a.txt", READ_CHANGED)]
    assert not (project / "new.txt").exists()


def test_a_file_only_read_and_changed_since_stops_the_apply_too(overlay, project):
    overlay.view.read_bytes(project / "src" / "b.py")
    (project / "src" / "b.py").write_text("B = 2\n")
    overlay.view.write_bytes(project / "a.txt", b"two\n")
    with pytest.raises(ApplyConflict):
        overlay.apply()
    assert (project / "a.txt").read_text() == "one\n"


def test_a_touch_that_keeps_the_content_is_no_conflict(overlay, project):
    overlay.view.read_bytes(project / "src" / "b.py")
    os.utime(project / "src" / "b.py", ns=(1, 1))
    overlay.view.write_bytes(project / "a.txt", b"two\n")
    overlay.apply()
    assert (project / "a.txt").read_text() == "two\n"


def test_reading_a_file_the_overlay_wrote_records_nothing(overlay, project):
    overlay.view.write_bytes(project / "a.txt", b"two\n")
    overlay.view.read_bytes(project / "a.txt")
    with overlay.view.open_read(project / "a.txt") as stream:
        assert stream.read() == b"two\n"
    assert overlay.reads == []


def test_listings_and_stats_are_not_recorded(overlay, project):
    overlay.view.scandir(project / "src")
    overlay.view.stat(project / "a.txt")
    overlay.view.exists(project / "a.txt")
    assert overlay.reads == []


def test_a_streamed_read_records_what_it_read(overlay, project):
    with overlay.view.open_read(project / "a.txt") as stream:
        assert stream.read() == b"one\n"
    [print_] = overlay.reads
    assert print_.rel == "a.txt" and print_.whole and print_.hashed == 4
    (project / "a.txt").write_text("edit\n")
    overlay.view.write_bytes(project / "src" / "b.py", b"B = 3\n")
    with pytest.raises(ApplyConflict, match=READ_CHANGED):
        overlay.apply()


def test_a_partial_read_of_a_long_file_is_vouched_for_by_prefix_and_signature(
    overlay, project, monkeypatch
):
    monkeypatch.setattr(reads, "HASH_LIMIT_BYTES", 16)
    big = project / "big.txt"
    big.write_bytes(b"x" * 15 + b"\n" + b"tail\n" * 10)
    with overlay.view.open_read(big) as stream:
        stream.read()
    [print_] = overlay.reads
    assert not print_.whole and print_.hashed == 16
    with open(big, "r+b") as out:  # past the hashed prefix: only the signature sees it
        out.seek(30)
        out.write(b"TAIL")
    overlay.view.write_bytes(project / "a.txt", b"two\n")
    with pytest.raises(ApplyConflict, match=READ_CHANGED):
        overlay.apply()


def test_the_first_read_of_a_file_is_the_one_checked(overlay, project):
    a = project / "a.txt"
    overlay.view.read_bytes(a)
    a.write_text("changed between two reads\n")
    overlay.view.read_bytes(a)
    overlay.view.write_bytes(project / "n.txt", b"n")
    with pytest.raises(ApplyConflict, match=READ_CHANGED):
        overlay.apply()


def test_a_shell_read_of_a_file_is_recorded_by_content(overlay, project):
    overlay.record_path(project / "a.txt", stop=never)
    [print_] = overlay.reads
    assert print_.whole
    (project / "a.txt").write_text("edit\n")
    overlay.view.write_bytes(project / "a.txt", b"from the speculation\n")
    with pytest.raises(ApplyConflict) as caught:
        overlay.apply()
    assert ("a.txt", READ_CHANGED) in reasons(caught) or ("a.txt", CHANGED) in reasons(caught)
    assert (project / "a.txt").read_text() == "edit\n"


def test_a_shell_read_of_a_directory_records_every_file_below_it_but_git(overlay, project):
    (project / ".git").mkdir()
    (project / ".git" / "index").write_bytes(b"git")
    (project / "src" / "deep").mkdir()
    (project / "src" / "deep" / "c.py").write_text("C\n")
    overlay.record_path(project, stop=never)
    files = [p.rel for p in overlay.reads if p.listing is None]
    assert files == ["a.txt", "src/b.py", "src/deep/c.py"]
    assert [p.rel for p in overlay.reads if p.listing is not None] == ["", "src", "src/deep"]
    (project / ".git" / "index").write_bytes(b"git rewrote it")
    overlay.view.write_bytes(project / "n.txt", b"n")
    overlay.apply()  # .git is git's own business
    (project / "src" / "deep" / "c.py").write_text("edited\n")
    overlay.view.write_bytes(project / "m.txt", b"m")
    with pytest.raises(ApplyConflict, match=r"src/deep/c\.py"):
        overlay.apply()


def test_a_shell_read_of_too_many_files_cannot_be_recorded(overlay, project, monkeypatch):
    monkeypatch.setattr(reads, "MAX_TREE_FILES", 1)
    with pytest.raises(ReadsUnrecorded):
        overlay.record_path(project, stop=never)


def test_shell_reads_outside_the_root_or_missing_are_skipped(overlay, project, tmp_path):
    (tmp_path / "outside.txt").write_text("o")
    overlay.record_path(tmp_path / "outside.txt", stop=never)
    overlay.record_path(project / "missing.txt", stop=never)
    assert overlay.reads == []
