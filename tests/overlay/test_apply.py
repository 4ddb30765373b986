"""Applying an overlay: conflicts, all-or-nothing, modes, escapes at apply time, crash recovery."""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType, SimpleNamespace

import pytest

from qshell.overlay import Overlay, journal, recover, renameat, sweep_stale, unlinks
from qshell.overlay.aside import set_aside
from qshell.overlay.journal import (
    APPEARED,
    BAD_COPY,
    CHANGED,
    DELETED,
    ESCAPED,
    JOURNAL_NAME,
    STAGE_PREFIX,
    ApplyConflict,
    ApplyFailed,
    Original,
    recover_journal,
)
from qshell.overlay.records import MODE_CHANGED
from qshell.tools.paths import PathResolver
from tests.overlay.test_overlay import DEAD_PID, snapshot


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    (root / "src").mkdir(parents=True)
    (root / "src" / "app.py").write_text("app v1\n")
    (root / "src" / "util.py").write_text("util v1\n")
    (root / "run.sh").write_text("#!/bin/sh\necho v1\n")
    os.chmod(root / "run.sh", 0o755)
    os.chmod(root / "src" / "util.py", 0o600)
    return root


@pytest.fixture
def overlay(project: Path, tmp_path: Path):
    with Overlay.create(project, PathResolver(project), base_dir=tmp_path / "base") as ov:
        yield ov


NEW_CONTENT = {
    "src/app.py": b"app v2\n",
    "run.sh": b"#!/bin/sh\necho v2\n",
    "docs/api/index.md": b"# API\n",
}


def speculate(overlay: Overlay, project: Path) -> dict[str, bytes | None]:
    """Write NEW_CONTENT through the view; return the real tree as it was before."""
    before = snapshot(project)
    for rel, data in NEW_CONTENT.items():
        overlay.view.write_bytes(project / rel, data)
    return before


def expected_after(before: dict[str, bytes | None]) -> dict[str, bytes | None]:
    after = dict(before)
    after.update(NEW_CONTENT)
    after.update({"docs": None, "docs/api": None})
    return after


def no_litter(project: Path) -> bool:
    return not any(p.name.startswith(".qshell-") for p in project.rglob("*"))


# --- the happy path --------------------------------------------------------------------------


def test_apply_lands_every_file_and_creates_new_directories(overlay, project):
    before = speculate(overlay, project)
    report = overlay.apply()
    assert snapshot(project) == expected_after(before)
    assert sorted(report.applied) == sorted(NEW_CONTENT)
    assert report.created_dirs == ("docs", "docs/api")
    assert report.leftovers == ()
    assert no_litter(project)
    assert not (overlay.directory / JOURNAL_NAME).exists()


def test_apply_keeps_each_files_mode(overlay, project):
    overlay.view.write_bytes(project / "run.sh", b"#!/bin/sh\necho v2\n")
    overlay.view.write_bytes(project / "src" / "util.py", b"util v2\n")
    overlay.view.write_bytes(project / "tool.sh", b"#!/bin/sh\n", mode=0o750)
    overlay.view.write_bytes(project / "plain.txt", b"plain\n")
    overlay.apply()
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE((project / "run.sh").stat().st_mode) == 0o755
    assert stat.S_IMODE((project / "src" / "util.py").stat().st_mode) == 0o600
    assert stat.S_IMODE((project / "tool.sh").stat().st_mode) == 0o750
    assert stat.S_IMODE((project / "plain.txt").stat().st_mode) == 0o666 & ~umask


def test_a_mode_changed_by_the_user_meanwhile_is_kept(overlay, project):
    overlay.view.write_bytes(project / "run.sh", b"#!/bin/sh\necho v2\n")
    os.chmod(project / "run.sh", 0o700)
    with pytest.raises(ApplyConflict, match=MODE_CHANGED):  # a mode change is a conflict now
        overlay.apply()
    assert stat.S_IMODE((project / "run.sh").stat().st_mode) == 0o700


def test_the_real_tree_is_untouched_until_apply(overlay, project):
    before = speculate(overlay, project)
    assert snapshot(project) == before
    assert overlay.check_conflicts() == []
    assert snapshot(project) == before


def test_applying_nothing_is_a_no_op(overlay, project):
    before = snapshot(project)
    assert overlay.apply().applied == ()
    assert snapshot(project) == before


def test_applying_twice_finds_the_first_apply_as_a_conflict(overlay, project):
    overlay.view.write_bytes(project / "src" / "app.py", b"app v2\n")
    overlay.apply()
    with pytest.raises(ApplyConflict):
        overlay.apply()


# --- conflicts -------------------------------------------------------------------------------


def test_a_file_changed_since_it_was_copied_stops_the_whole_apply(overlay, project):
    before = speculate(overlay, project)
    (project / "src" / "app.py").write_text("the user's edit\n")
    before["src/app.py"] = b"the user's edit\n"
    assert [(c.path, c.reason) for c in overlay.check_conflicts()] == [("src/app.py", CHANGED)]
    with pytest.raises(ApplyConflict) as caught:
        overlay.apply()
    assert [c.path for c in caught.value.conflicts] == ["src/app.py"]
    assert snapshot(project) == before


def test_a_file_that_appeared_where_none_existed_is_a_conflict(overlay, project):
    before = speculate(overlay, project)
    (project / "docs" / "api").mkdir(parents=True)
    (project / "docs" / "api" / "index.md").write_text("mine\n")
    with pytest.raises(ApplyConflict) as caught:
        overlay.apply()
    assert [(c.path, c.reason) for c in caught.value.conflicts] == [("docs/api/index.md", APPEARED)]
    assert (project / "docs" / "api" / "index.md").read_text() == "mine\n"
    assert snapshot(project)["src/app.py"] == before["src/app.py"]


def test_a_deleted_original_is_a_conflict(overlay, project):
    speculate(overlay, project)
    (project / "run.sh").unlink()
    assert [(c.path, c.reason) for c in overlay.check_conflicts()] == [("run.sh", DELETED)]


def test_every_conflict_is_reported_at_once(overlay, project):
    speculate(overlay, project)
    (project / "run.sh").write_text("edited\n")
    (project / "src" / "app.py").write_text("edited\n")
    assert {c.path for c in overlay.check_conflicts()} == {"run.sh", "src/app.py"}


def test_a_change_that_lands_between_check_and_rename_rolls_everything_back(
    overlay, project, monkeypatch
):
    before = speculate(overlay, project)
    real_swap = journal._swap
    calls = []

    def swap_after_an_edit(root_fd, step):
        calls.append(step.rel)
        if len(calls) == 2:
            (project / step.rel).write_text("edited while applying\n")
            before[step.rel] = b"edited while applying\n"
        return real_swap(root_fd, step)

    monkeypatch.setattr(journal, "_swap", swap_after_an_edit)
    with pytest.raises(ApplyConflict, match=CHANGED):
        overlay.apply()
    assert snapshot(project) == before
    assert no_litter(project)


# --- escapes at apply time -------------------------------------------------------------------


def test_a_directory_replaced_by_a_symlink_out_is_refused_at_apply(overlay, project, tmp_path):
    speculate(overlay, project)
    outside = tmp_path / "outside"
    (project / "src").rename(outside)
    (project / "src").symlink_to(outside)
    outside_before = snapshot(outside)
    with pytest.raises(ApplyConflict) as caught:
        overlay.apply()
    assert ("src/app.py", ESCAPED) in [(c.path, c.reason) for c in caught.value.conflicts]
    assert snapshot(outside) == outside_before


def test_a_directory_replaced_by_a_symlink_in_is_refused_at_apply(overlay, project):
    speculate(overlay, project)
    (project / "src").rename(project / "src-real")
    (project / "src").symlink_to(project / "src-real")
    with pytest.raises(ApplyConflict, match=r"src/app\.py is now a symlink"):
        overlay.apply()
    assert (project / "src-real" / "app.py").read_text() == "app v1\n"


def test_a_file_replaced_by_a_symlink_is_refused_at_apply(overlay, project, tmp_path):
    overlay.view.write_bytes(project / "run.sh", b"new\n")
    victim = tmp_path / "victim"
    victim.write_bytes((project / "run.sh").read_bytes())
    (project / "run.sh").unlink()
    (project / "run.sh").symlink_to(victim)
    with pytest.raises(ApplyConflict, match=ESCAPED):
        overlay.apply()
    assert victim.read_bytes() == b"#!/bin/sh\necho v1\n"


def test_a_new_files_parent_turned_symlink_is_refused_at_apply(overlay, project, tmp_path):
    overlay.view.write_bytes(project / "docs" / "a.md", b"a\n")
    outside = tmp_path / "outside-docs"
    outside.mkdir()
    (project / "docs").symlink_to(outside)
    with pytest.raises(ApplyConflict, match=ESCAPED):
        overlay.apply()
    assert list(outside.iterdir()) == []


def test_a_symlinked_overlay_directory_is_refused_at_apply(overlay, project, tmp_path):
    speculate(overlay, project)
    outside = tmp_path / "outside-upper"
    (overlay.upper / "src").rename(outside)
    (overlay.upper / "src").symlink_to(outside)
    before = snapshot(project)
    with pytest.raises(ApplyConflict) as caught:
        overlay.apply()
    assert ("src/app.py", BAD_COPY) in [(c.path, c.reason) for c in caught.value.conflicts]
    assert snapshot(project) == before


@pytest.mark.parametrize("rel", ["../outside.txt", "/etc/passwd", "src/../../outside.txt", ""])
def test_a_recorded_path_that_is_not_plain_and_relative_is_refused_at_apply(overlay, rel):
    _, conflicts = journal.plan(overlay.root, overlay.upper, [Original(rel, False, None, None)])
    assert [(c.path, c.reason) for c in conflicts] == [(rel, ESCAPED)]


# --- failures midway -------------------------------------------------------------------------


def test_a_rename_that_fails_midway_leaves_the_real_tree_untouched(overlay, project, monkeypatch):
    before = speculate(overlay, project)
    real_exchange = renameat.exchange  # staged copies of existing files are swapped in by it
    staged = []

    def failing_exchange(dir_fd, src, dst):
        if str(src).startswith(STAGE_PREFIX):
            staged.append(src)
            if len(staged) == 2:
                raise OSError(errno.EIO, "injected failure")
        return real_exchange(dir_fd, src, dst)

    monkeypatch.setattr(renameat, "exchange", failing_exchange)
    with pytest.raises(ApplyFailed, match="injected failure"):
        overlay.apply()
    monkeypatch.undo()
    assert snapshot(project) == before
    assert no_litter(project)
    assert not (overlay.directory / JOURNAL_NAME).exists()
    overlay.apply()
    assert snapshot(project) == expected_after(before)


def test_an_unwritable_directory_fails_the_apply_and_changes_nothing(overlay, project, monkeypatch):
    before = speculate(overlay, project)
    real_open = os.open

    def refusing_open(path, flags, mode=0o777, *, dir_fd=None):
        if flags & os.O_CREAT and str(path).startswith(STAGE_PREFIX) and len(opened) >= 2:
            raise PermissionError(errno.EACCES, "Permission denied", str(path))
        opened.append(path)
        return real_open(path, flags, mode, dir_fd=dir_fd)

    opened: list[str] = []
    monkeypatch.setattr(os, "open", refusing_open)
    with pytest.raises(ApplyFailed, match="Permission denied"):
        overlay.apply()
    monkeypatch.undo()
    assert snapshot(project) == before
    assert no_litter(project)


# --- crash recovery --------------------------------------------------------------------------

CRASH_POINTS = 60  # more than the mutations of one apply of NEW_CONTENT
MUTATIONS = (
    *("mkdir", "link", "replace", "rename", "unlink", "rmdir", "write", "fsync", "fchmod"),
    *("setxattr", "removexattr"),
)


class Crash(BaseException):
    """The process dies here: no rollback, no clean-up."""


class CrashingOs(SimpleNamespace):
    """`os` for journal.py that dies at the n-th filesystem mutation (None: only counts)."""

    def __init__(self, crash_at: int | None) -> None:
        super().__init__()
        self.count = 0
        self.crash_at = crash_at

    def __getattr__(self, name):
        real = getattr(os, name)
        if name not in MUTATIONS and name != "open":
            return real

        def mutate(*args, **kwargs):
            if name != "open" or args[1] & os.O_CREAT:
                if self.count == self.crash_at:
                    raise Crash(name)
                self.count += 1
            return real(*args, **kwargs)

        return mutate


def crashed_apply(
    overlay: Overlay, monkeypatch, crash_at: int | None, also: Sequence[ModuleType] = ()
) -> int:
    """Apply with the os calls of the journal (and of the deletions it makes, and of the
    modules in `also`) crashing at call number `crash_at`; returns how many calls were made."""
    fake = CrashingOs(crash_at)
    for module in (journal, unlinks, *also):
        monkeypatch.setattr(module, "os", fake)
    monkeypatch.setattr(journal, "_abort", lambda *args: None)  # a crash runs no handler
    try:
        overlay.apply()
    except Crash:
        pass
    finally:
        monkeypatch.undo()
    return fake.count


def fresh(tmp_path: Path, name: str) -> tuple[Path, Overlay]:
    root = tmp_path / name
    (root / "src").mkdir(parents=True)
    (root / "src" / "app.py").write_text("app v1\n")
    (root / "src" / "util.py").write_text("util v1\n")
    (root / "run.sh").write_text("#!/bin/sh\necho v1\n")
    return root, Overlay.create(root, PathResolver(root), base_dir=tmp_path / f"base-{name}")


def test_the_crash_points_below_cover_a_whole_apply(tmp_path, monkeypatch):
    root, overlay = fresh(tmp_path, "count")
    before = speculate(overlay, root)
    total = crashed_apply(overlay, monkeypatch, None)
    assert 20 < total < CRASH_POINTS
    assert snapshot(root) == expected_after(before)


@pytest.mark.parametrize("crash_at", range(CRASH_POINTS))
def test_a_crash_at_any_step_recovers_to_all_old_or_all_new(tmp_path, monkeypatch, crash_at):
    root, overlay = fresh(tmp_path, "crash")
    before = speculate(overlay, root)
    crashed_apply(overlay, monkeypatch, crash_at)
    recovery = recover_journal(overlay.directory / JOURNAL_NAME)
    after = snapshot(root)
    assert after in (before, expected_after(before))
    if recovery is not None and recovery.direction == "rolled back":
        assert after == before
    assert no_litter(root)
    assert not (overlay.directory / JOURNAL_NAME).exists()
    overlay.discard()


def crash_before_the_commit_point(monkeypatch) -> None:
    real_write = journal.write_journal

    def write(path, state):
        if state.phase is journal.Phase.COMMITTED:
            raise Crash("before the commit point")
        real_write(path, state)

    monkeypatch.setattr(journal, "write_journal", write)


def crash_at_the_second_rename(monkeypatch) -> None:
    real_exchange = renameat.exchange  # staged copies of existing files are swapped in by it
    staged: list[str] = []

    def exchange(dir_fd, src, dst):
        if str(src).startswith(STAGE_PREFIX):
            staged.append(src)
            if len(staged) == 2:
                raise Crash("second rename")
        real_exchange(dir_fd, src, dst)

    monkeypatch.setattr(renameat, "exchange", exchange)


def crash(overlay: Overlay, monkeypatch, inject) -> None:
    inject(monkeypatch)
    monkeypatch.setattr(journal, "_abort", lambda *args: None)
    with pytest.raises(Crash):
        overlay.apply()
    monkeypatch.undo()
    assert (overlay.directory / JOURNAL_NAME).exists()


def test_recovery_never_overwrites_an_edit_made_after_the_crash(tmp_path, monkeypatch):
    root, overlay = fresh(tmp_path, "edited")
    speculate(overlay, root)
    crash(overlay, monkeypatch, crash_before_the_commit_point)
    assert (root / "src" / "app.py").read_bytes() == NEW_CONTENT["src/app.py"]
    (root / "src" / "app.py").write_text("edited after the crash\n")
    recovery = recover_journal(overlay.directory / JOURNAL_NAME)
    assert recovery is not None
    assert recovery.direction == "rolled back"
    assert recovery.kept == ("src/app.py",)
    assert (root / "src" / "app.py").read_text() == "edited after the crash\n"
    [(kept, beside)] = recovery.beside  # the version from before the apply, named for the user
    assert kept == "src/app.py" and (root / beside).read_text() == "app v1\n"
    aside = set_aside(root, recovery.beside, tmp_path / "state")
    assert aside.moved == ("src/app.py",) and not aside.stayed
    assert aside.folder is not None and aside.folder.is_relative_to(tmp_path / "state")
    assert (aside.folder / "src" / "app.py").read_text() == "app v1\n"
    assert not (root / beside).exists()  # out of the project, nothing left beside the edit
    assert (root / "run.sh").read_text() == "#!/bin/sh\necho v1\n"
    assert not (root / "docs" / "api" / "index.md").exists()


def test_a_crash_after_the_commit_point_is_completed(tmp_path, monkeypatch):
    root, overlay = fresh(tmp_path, "committed")
    before = speculate(overlay, root)
    monkeypatch.setattr(journal, "_finish", lambda *args: (_ for _ in ()).throw(Crash("finish")))
    with pytest.raises(Crash):
        overlay.apply()
    monkeypatch.undo()
    recovery = recover_journal(overlay.directory / JOURNAL_NAME)
    assert recovery is not None and recovery.direction == "completed"
    assert snapshot(root) == expected_after(before)
    assert no_litter(root)


def test_the_sweep_at_start_up_recovers_a_dead_processes_journal(tmp_path, monkeypatch):
    root, overlay = fresh(tmp_path, "sweep")
    before = speculate(overlay, root)
    crash(overlay, monkeypatch, crash_at_the_second_rename)
    assert overlay.lease is not None
    overlay.lease.release()  # the process died: its lock went with it
    base = overlay.directory.parent.parent
    dead = base / str(DEAD_PID)
    overlay.directory.parent.rename(dead)
    assert sweep_stale(base, root=root) == 1
    assert snapshot(root) == before
    assert no_litter(root)
    assert not dead.exists()


def test_discard_rolls_back_a_journal_it_finds(tmp_path, monkeypatch):
    root, overlay = fresh(tmp_path, "discard")
    before = speculate(overlay, root)
    crash(overlay, monkeypatch, crash_at_the_second_rename)
    overlay.discard()
    assert snapshot(root) == before
    assert not overlay.directory.exists()


def test_recover_at_start_up_rolls_back_without_removing_anything(tmp_path, monkeypatch):
    root, overlay = fresh(tmp_path, "recover")
    before = speculate(overlay, root)
    crash(overlay, monkeypatch, crash_at_the_second_rename)
    assert overlay.lease is not None
    overlay.lease.release()  # the process died: its lock went with it
    base = overlay.directory.parent.parent
    overlay.directory.parent.rename(base / str(DEAD_PID))
    assert recover(base, root=root) == 1
    assert snapshot(root) == before
    assert (base / str(DEAD_PID) / overlay.directory.name / "upper").is_dir()
    assert recover(base, root=root) == 0
