"""The speculation overlay: private directories, copy-on-write, the merged view, escapes, sweep."""

from __future__ import annotations

import hashlib
import json
import os
import stat
import tempfile
import threading
from pathlib import Path

import pytest

from qshell.overlay import Overlay, OverlayEscape, OverlayUnavailable, sweep_stale
from qshell.overlay.journal import JOURNAL_NAME
from qshell.tools.paths import PathResolver

DEAD_PID = 2**30 + 7  # above any pid_max, so never a running process


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    (root / "src" / "pkg").mkdir(parents=True)
    (root / "README.md").write_text("# demo\n")
    (root / "src" / "app.py").write_text("print('hi')\n")
    (root / "src" / "pkg" / "mod.py").write_text("X = 1\n")
    os.chmod(root / "src" / "app.py", 0o754)
    return root


@pytest.fixture
def base(tmp_path: Path) -> Path:
    return tmp_path / "base"


@pytest.fixture
def overlay(project: Path, base: Path):
    with Overlay.create(project, PathResolver(project), base_dir=base) as ov:
        yield ov


def snapshot(root: Path) -> dict[str, bytes | None]:
    """Every path under `root` with its bytes (None for a directory), symlinks as their target."""
    out: dict[str, bytes | None] = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if path.is_symlink():
            out[rel] = os.readlink(path).encode()
        else:
            out[rel] = None if path.is_dir() else path.read_bytes()
    return out


# --- the private directory -------------------------------------------------------------------


def test_the_overlay_lives_in_private_directories_under_base_and_pid(overlay, base):
    pid_dir = base / str(os.getpid())
    assert overlay.directory.parent == pid_dir
    for path in (base, pid_dir, overlay.directory, overlay.upper):
        assert stat.S_IMODE(path.lstat().st_mode) == 0o700


def test_the_default_base_is_per_user_under_the_temp_dir(monkeypatch, tmp_path, project):
    monkeypatch.setattr(tempfile, "gettempdir", lambda: str(tmp_path))
    with Overlay.create(project, PathResolver(project)) as ov:
        assert ov.directory.parent.parent == tmp_path / f"qshell-speculation-{os.getuid()}"


def test_a_group_writable_base_turns_speculation_off(project, base):
    base.mkdir()
    os.chmod(base, 0o777)
    with pytest.raises(OverlayUnavailable, match="writable by others"):
        Overlay.create(project, PathResolver(project), base_dir=base)


def test_a_base_that_is_a_symlink_turns_speculation_off(project, base, tmp_path):
    target = tmp_path / "elsewhere"
    target.mkdir(mode=0o700)
    base.symlink_to(target)
    with pytest.raises(OverlayUnavailable, match="symlink"):
        Overlay.create(project, PathResolver(project), base_dir=base)
    assert list(target.iterdir()) == []


def test_a_pid_directory_that_is_a_symlink_turns_speculation_off(project, base, tmp_path):
    base.mkdir(mode=0o700)
    target = tmp_path / "elsewhere"
    target.mkdir(mode=0o700)
    (base / str(os.getpid())).symlink_to(target)
    with pytest.raises(OverlayUnavailable, match="symlink"):
        Overlay.create(project, PathResolver(project), base_dir=base)


def test_a_base_owned_by_someone_else_turns_speculation_off(project, base, monkeypatch):
    base.mkdir(mode=0o700)
    real_uid = os.getuid()
    monkeypatch.setattr(os, "getuid", lambda: real_uid + 1)
    with pytest.raises(OverlayUnavailable, match="belongs to uid"):
        Overlay.create(project, PathResolver(project), base_dir=base)


def test_a_readable_base_of_ours_is_tightened_to_0700(project, base):
    base.mkdir(mode=0o755)
    os.chmod(base, 0o755)
    with Overlay.create(project, PathResolver(project), base_dir=base):
        assert stat.S_IMODE(base.stat().st_mode) == 0o700


def test_discard_removes_everything_and_can_be_repeated(project, base):
    ov = Overlay.create(project, PathResolver(project), base_dir=base)
    ov.view.write_bytes(project / "src" / "app.py", b"changed\n")
    ov.discard()
    ov.discard()
    assert list(base.iterdir()) == []
    with pytest.raises(OverlayUnavailable):
        ov.view.write_bytes(project / "x.txt", b"x")


def test_the_context_manager_discards(project, base):
    with Overlay.create(project, PathResolver(project), base_dir=base) as ov:
        ov.view.write_bytes(project / "n.txt", b"n")
        directory = ov.directory
    assert not directory.exists()


# --- copy on write ---------------------------------------------------------------------------


def test_the_first_write_records_the_original_and_leaves_the_real_file(overlay, project):
    app = project / "src" / "app.py"
    before = app.read_bytes()
    overlay.view.write_bytes(app, b"print('bye')\n")
    original = overlay.original("src/app.py")
    assert original.existed
    assert original.sha256 == hashlib.sha256(before).hexdigest()
    assert original.mode == 0o754
    assert app.read_bytes() == before
    assert overlay.view.read_bytes(app) == b"print('bye')\n"


def test_later_writes_go_to_the_copy_and_keep_the_first_record(overlay, project):
    app = project / "src" / "app.py"
    overlay.view.write_bytes(app, b"one\n")
    first = overlay.original("src/app.py")
    overlay.view.write_bytes(app, b"two\n")
    assert overlay.original("src/app.py") == first
    assert overlay.view.read_bytes(app) == b"two\n"
    assert overlay.written == ["src/app.py"]


def test_a_new_file_exists_only_in_the_overlay(overlay, project):
    new = project / "docs" / "guide" / "intro.md"
    overlay.view.write_bytes(new, b"hello\n", mode=0o640)
    assert not (project / "docs").exists()
    assert overlay.original("docs/guide/intro.md").existed is False
    assert overlay.view.exists(new)
    assert overlay.view.is_file(new)
    assert overlay.view.is_dir(project / "docs" / "guide")
    assert stat.S_IMODE(overlay.view.stat(new).st_mode) == 0o640
    assert overlay.has_writes


def test_the_copy_keeps_the_original_mode(overlay, project):
    overlay.view.write_bytes(project / "src" / "app.py", b"x")
    assert stat.S_IMODE(overlay.view.stat(project / "src" / "app.py").st_mode) == 0o754


def test_reads_of_unwritten_files_see_the_real_tree_as_it_changes(overlay, project):
    readme = project / "README.md"
    assert overlay.view.read_bytes(readme) == b"# demo\n"
    readme.write_text("# changed by the user\n")
    assert overlay.view.read_bytes(readme) == b"# changed by the user\n"


def test_reads_of_written_files_ignore_later_real_changes(overlay, project):
    app = project / "src" / "app.py"
    overlay.view.write_bytes(app, b"speculated\n")
    app.write_text("user edit\n")
    assert overlay.view.read_bytes(app) == b"speculated\n"


def test_the_upper_directory_holds_only_written_files_at_their_paths(overlay, project):
    overlay.view.write_bytes(project / "src" / "app.py", b"a")
    overlay.view.write_bytes(project / "new" / "b.txt", b"b")
    files = sorted(
        p.relative_to(overlay.upper).as_posix() for p in overlay.upper.rglob("*") if p.is_file()
    )
    assert files == ["new/b.txt", "src/app.py"]
    lines = (overlay.directory / "meta.jsonl").read_text().splitlines()
    assert [json.loads(line)["rel"] for line in lines] == ["src/app.py", "new/b.txt"]
    assert json.loads(lines[1]) == {
        "rel": "new/b.txt",
        "existed": False,
        "sha256": None,
        "mode": None,
        "attrs": None,
    }


def test_writing_under_a_file_is_not_a_directory(overlay, project):
    with pytest.raises(NotADirectoryError):
        overlay.view.write_bytes(project / "README.md" / "x.txt", b"x")
    overlay.view.write_bytes(project / "made.txt", b"file")
    with pytest.raises(NotADirectoryError):
        overlay.view.write_bytes(project / "made.txt" / "y.txt", b"y")
    assert overlay.written == ["made.txt"]


def test_writing_a_directory_is_refused(overlay, project):
    with pytest.raises(IsADirectoryError):
        overlay.view.write_bytes(project / "src", b"x")
    overlay.view.write_bytes(project / "fresh" / "f.txt", b"x")
    with pytest.raises(IsADirectoryError):
        overlay.view.write_bytes(project / "fresh", b"x")


def test_missing_paths_raise_as_the_os_does(overlay, project):
    with pytest.raises(FileNotFoundError):
        overlay.view.read_bytes(project / "nope.txt")
    with pytest.raises(FileNotFoundError):
        overlay.view.stat(project / "nope.txt")
    with pytest.raises(FileNotFoundError):
        overlay.view.scandir(project / "nope")
    assert not overlay.view.exists(project / "nope.txt")


# --- the merged view (what glob, grep and ls see) --------------------------------------------


def names(entries) -> dict[str, tuple[bool, bool, int]]:
    return {e.name: (e.is_dir, e.is_file, e.size) for e in entries}


def test_scandir_merges_written_new_and_real_entries(overlay, project):
    overlay.view.write_bytes(project / "src" / "app.py", b"longer content than before\n")
    overlay.view.write_bytes(project / "src" / "extra.py", b"E\n")
    overlay.view.write_bytes(project / "src" / "sub" / "deep.py", b"D\n")
    listing = names(overlay.view.scandir(project / "src"))
    assert listing == {
        "app.py": (False, True, len(b"longer content than before\n")),
        "extra.py": (False, True, 2),
        "pkg": (True, False, listing["pkg"][2]),
        "sub": (True, False, listing["sub"][2]),
    }
    assert {e.path for e in overlay.view.scandir(project / "src")} == {
        project / "src" / n for n in ("app.py", "extra.py", "pkg", "sub")
    }


def test_a_directory_only_the_overlay_has_can_be_listed_and_walked(overlay, project):
    overlay.view.write_bytes(project / "gen" / "a" / "one.txt", b"1")
    overlay.view.write_bytes(project / "gen" / "two.txt", b"22")
    assert "gen" in names(overlay.view.scandir(project))
    assert names(overlay.view.scandir(project / "gen")) == {
        "a": (True, False, names(overlay.view.scandir(project / "gen"))["a"][2]),
        "two.txt": (False, True, 2),
    }
    found = []
    stack = [project]
    while stack:
        for entry in overlay.view.scandir(stack.pop()):
            if entry.is_dir:
                stack.append(entry.path)
            else:
                found.append(entry.path.relative_to(project).as_posix())
    assert sorted(found) == [
        "README.md",
        "gen/a/one.txt",
        "gen/two.txt",
        "src/app.py",
        "src/pkg/mod.py",
    ]


def test_grep_like_reads_through_the_view_see_speculated_content(overlay, project):
    overlay.view.write_bytes(project / "src" / "pkg" / "mod.py", b"X = 2  # needle\n")
    overlay.view.write_bytes(project / "src" / "needle.py", b"needle = True\n")
    hits = sorted(
        e.name
        for e in overlay.view.scandir(project / "src")
        if e.is_file and b"needle" in overlay.view.read_bytes(e.path)
    ) + sorted(
        e.name
        for e in overlay.view.scandir(project / "src" / "pkg")
        if b"needle" in overlay.view.read_bytes(e.path)
    )
    assert hits == ["needle.py", "mod.py"]


def test_scandir_of_a_written_file_is_not_a_directory(overlay, project):
    overlay.view.write_bytes(project / "n.txt", b"n")
    with pytest.raises(NotADirectoryError):
        overlay.view.scandir(project / "n.txt")
    with pytest.raises(IsADirectoryError):
        overlay.view.read_bytes(project / "src")


# --- escapes at redirect time ----------------------------------------------------------------


def test_dot_dot_out_of_the_root_is_an_escape(overlay, project, tmp_path):
    with pytest.raises(OverlayEscape, match="outside the project root"):
        overlay.view.write_bytes(project / ".." / "outside.txt", b"x")
    with pytest.raises(OverlayEscape):
        overlay.view.read_bytes(project / "src" / ".." / ".." / "project-sibling")
    assert not (tmp_path / "outside.txt").exists()


def test_an_absolute_path_outside_the_root_is_an_escape(overlay, tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("keep")
    with pytest.raises(OverlayEscape):
        overlay.view.write_bytes(victim, b"x")
    with pytest.raises(OverlayEscape):
        overlay.view.stat(Path("/etc/passwd"))
    assert victim.read_text() == "keep"
    assert not overlay.has_writes


def test_a_relative_path_is_refused(overlay):
    with pytest.raises(OverlayEscape, match="not an absolute path"):
        overlay.view.write_bytes(Path("src/app.py"), b"x")


def test_a_symlink_pointing_out_of_the_root_is_an_escape(overlay, project, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("s")
    (project / "linkdir").symlink_to(outside)
    (project / "linkfile").symlink_to(outside / "secret.txt")
    for path in (project / "linkdir" / "secret.txt", project / "linkdir" / "new.txt"):
        with pytest.raises(OverlayEscape):
            overlay.view.write_bytes(path, b"x")
    with pytest.raises(OverlayEscape):
        overlay.view.write_bytes(project / "linkfile", b"x")
    with pytest.raises(OverlayEscape):
        overlay.view.read_bytes(project / "linkfile")
    with pytest.raises(OverlayEscape):
        overlay.view.scandir(project / "linkdir")
    assert snapshot(outside) == {"secret.txt": b"s"}
    assert not overlay.has_writes


def test_a_symlink_inside_the_root_is_followed_to_its_target(overlay, project):
    (project / "alias.py").symlink_to(project / "src" / "app.py")
    overlay.view.write_bytes(project / "alias.py", b"via alias\n")
    assert overlay.written == ["src/app.py"]
    assert overlay.view.read_bytes(project / "src" / "app.py") == b"via alias\n"


def test_a_symlinked_directory_inside_the_overlay_is_an_escape(overlay, project, tmp_path):
    overlay.view.write_bytes(project / "src" / "app.py", b"mine\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "app.py").write_text("theirs\n")
    (overlay.upper / "src" / "app.py").unlink()
    (overlay.upper / "src").rmdir()
    (overlay.upper / "src").symlink_to(outside)
    with pytest.raises(OverlayEscape, match="symlink inside the overlay"):
        overlay.view.read_bytes(project / "src" / "app.py")
    with pytest.raises(OverlayEscape):
        overlay.view.write_bytes(project / "src" / "other.py", b"x")
    assert sorted(p.name for p in outside.iterdir()) == ["app.py"]


def test_an_upper_directory_replaced_by_a_symlink_is_an_escape(overlay, project, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    overlay.upper.rmdir()
    overlay.upper.symlink_to(outside)
    with pytest.raises(OverlayEscape):
        overlay.view.write_bytes(project / "n.txt", b"x")
    assert list(outside.iterdir()) == []


# --- threads ---------------------------------------------------------------------------------


def test_parallel_reads_see_a_whole_copy_while_it_is_rewritten(overlay, project):
    target = project / "src" / "app.py"
    contents = [b"A" * 65536, b"B" * 65536]
    overlay.view.write_bytes(target, contents[0])
    seen: set[bytes] = set()
    stop = threading.Event()

    def reader() -> None:
        while not stop.is_set():
            seen.add(overlay.view.read_bytes(target))

    readers = [threading.Thread(target=reader) for _ in range(4)]
    for thread in readers:
        thread.start()
    for i in range(200):
        overlay.view.write_bytes(target, contents[i % 2])
    stop.set()
    for thread in readers:
        thread.join()
    assert seen <= set(contents)


# --- stale overlays --------------------------------------------------------------------------


def make_stale(base: Path, pid: int, files: dict[str, bytes]) -> Path:
    overlay_dir = base / str(pid) / "overlay-stale"
    for rel, data in files.items():
        path = overlay_dir / "upper" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    for path in (base, base / str(pid), overlay_dir):
        os.chmod(path, 0o700)
    return overlay_dir


def test_sweep_removes_overlays_of_dead_processes_only(overlay, base):
    make_stale(base, DEAD_PID, {"a.txt": b"a"})
    live_parent = make_stale(base, os.getppid(), {"b.txt": b"b"})
    assert sweep_stale(base) == 1
    assert not (base / str(DEAD_PID)).exists()
    assert live_parent.exists()
    assert overlay.directory.exists()


def test_sweep_removes_leftovers_of_an_earlier_process_with_our_pid(overlay, base):
    leftover = make_stale(base, os.getpid(), {"c.txt": b"c"})
    assert sweep_stale(base) == 1
    assert not leftover.exists()
    assert overlay.directory.exists()


def test_sweep_of_a_missing_base_does_nothing(tmp_path):
    assert sweep_stale(tmp_path / "never-made") == 0


def test_sweep_refuses_an_unsafe_base(tmp_path):
    base = tmp_path / "base"
    base.mkdir()
    os.chmod(base, 0o777)
    with pytest.raises(OverlayUnavailable):
        sweep_stale(base)


def test_sweep_keeps_a_stale_overlay_whose_journal_cannot_be_recovered(base):
    stale = make_stale(base, DEAD_PID, {"a.txt": b"a"})
    (stale / JOURNAL_NAME).write_text("{not json")
    assert sweep_stale(base) == 0
    assert stale.exists()
